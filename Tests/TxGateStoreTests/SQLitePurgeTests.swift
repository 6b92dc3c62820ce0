import Foundation
import Testing
import TxGateCore
import TestSupport
@testable import TxGateStore

/// The purge of expired rows without an index on their expiry: it walks the table by its
/// primary key, a chunk at a time.
@Suite struct SQLitePurgeTests {
    /// The first column of every row `sql` selects from the file at `path`, as text.
    private func texts(_ path: String, _ sql: String) throws -> [String] {
        let db = try SQLiteConnection(path: path)
        defer { db.close() }
        return try db.prepare(sql).use { s in
            var out: [String] = []
            while try s.step() { out.append(s.text(0)) }
            return out
        }
    }

    /// The names of the file's indexes on `kv` (SQLite's own for the primary key aside).
    private func kvIndexes(_ path: String) throws -> [String] {
        try texts(path, "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'kv' AND sql IS NOT NULL")
    }

    private func keys(_ path: String) throws -> [String] {
        try texts(path, "SELECT key FROM kv ORDER BY key")
    }

    /// A write that creates, deletes or re-times a row changes the table's page and no other:
    /// a new file has no index on `expires_at`, and a file an earlier version made loses its
    /// own, its rows kept.
    @Test func theTableHasNoIndexOnExpiry() async throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let clock = ManualClock()
        let fresh = folder.path("fresh.db")
        do {
            let store = try SQLiteStore(path: fresh, clock: clock.read)
            store.close()
        }
        #expect(try kvIndexes(fresh) == [])

        let earlier = folder.path("earlier.db")
        do {
            let db = try SQLiteConnection(path: earlier)
            defer { db.close() }
            try db.execute("""
                CREATE TABLE kv (key TEXT PRIMARY KEY, value BLOB NOT NULL, expires_at INTEGER NOT NULL) WITHOUT ROWID;
                CREATE INDEX kv_expires_at ON kv (expires_at);
                """)
            let insert = try db.prepare("INSERT INTO kv (key, value, expires_at) VALUES ('kept', x'01', ?1), ('gone', x'02', ?2)")
            try insert.use { s in
                try s.bind(1, clock.nowMs + 60_000)
                try s.bind(2, clock.nowMs + 1_000)
                try s.step()
            }
        }
        #expect(try kvIndexes(earlier) == ["kv_expires_at"])
        let store = try SQLiteStore(path: earlier, clock: clock.read)
        defer { store.close() }
        #expect(try kvIndexes(earlier) == [])
        #expect(try await call { store.get("kept", on: $0, $1) }.get() == [1])
        clock.advance(ms: 1_000)
        #expect(try store.purgeExpired() == 1)
        #expect(try keys(earlier) == ["kept"])
    }

    /// Chunk by chunk, the purge deletes exactly the rows expired at its time, whatever their
    /// place in the key order (the chunks' edges included), and reads each chunk as it is when it
    /// comes to it: a row written ahead of it meanwhile is judged by what was written.
    @Test func thePurgeWalksTheKeysAChunkAtATime() async throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let db = try SQLiteConnection(path: folder.path("store.db"))
        defer { db.close() }
        let table = try KeyValueTable(db)
        let now: Int64 = 1_000_000
        var live: [String] = []
        // 503 keys written out of order; a third of them expired (one at `now` exactly).
        for i in (0..<503).shuffled() {
            let key = String(format: "k%03d", i)
            let expired = i % 3 == 0
            try table.put(key, value: [UInt8(i % 256)], expiresAt: expired ? now - Int64(i % 2) : now + 1)
            if !expired { live.append(key) }
        }

        var chunks = 0, deleted = 0
        var from: String? = ""
        while let start = from {
            let chunk = try table.purgeChunk(from: start, now: now, rows: 10)
            chunks += 1
            deleted += chunk.deleted
            if let next = chunk.next {
                #expect(next > start)
                if chunks == 1 {
                    // Written while the pass runs, ahead of it: an expired row goes, a row
                    // written again with a later expiry stays.
                    try table.put("k501", value: [1], expiresAt: now + 1)
                    try table.put("k999", value: [2], expiresAt: now)
                }
            }
            from = chunk.next
        }
        live.append("k501")
        #expect(chunks == 51, "503 keys, 10 a chunk, and the tail")
        #expect(deleted == 168 - 1 + 1, "the expired third, less k501 written again, plus k999")
        #expect(try keys(folder.path("store.db")) == live.sorted())
        #expect(try table.purge(now: now, chunkRows: 7) == 0)
    }

    /// The minute's purge runs its chunks one queue turn at a time, to the end of the table:
    /// every expired row goes, the live ones stay, and a purge that large truncates the log.
    @Test func theMinutesPurgeGoesThroughTheWholeTable() async throws {
        let clock = ManualClock()
        try await withStore(clock: clock) { store, folder async throws in
            let path = folder.path("store.db")
            let expiring = 3 * KeyValueTable.purgeChunkRows + 17
            for i in 0..<expiring {
                try await call { store.put("e\(i)", value: [1], ttlMs: 1_000, on: $0, $1) }.get()
            }
            for key in ["a", "m", "z"] {
                try await call { store.put(key, value: [2], ttlMs: 60_000, on: $0, $1) }.get()
            }
            clock.advance(ms: 1_000)
            let truncatedBefore = store.checkpointer.truncated.load(ordering: .relaxed)
            store.startPurge()
            try await eventually(10, "the pass deleted every expired row") { try keys(path).count <= 3 }
            #expect(try keys(path) == ["a", "m", "z"])
            try await eventually(10, "the log truncated after the pass") {
                store.checkpointer.truncated.load(ordering: .relaxed) != truncatedBefore
            }
            #expect(store.checkpointer.truncated.load(ordering: .relaxed) > truncatedBefore)
            #expect(try await call { store.get("m", on: $0, $1) }.get() == [2])
        }
    }
}
