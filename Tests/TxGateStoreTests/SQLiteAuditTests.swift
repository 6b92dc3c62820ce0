import Foundation
import Testing
import TxGateCore
import TestSupport
@testable import TxGateStore

/// The audit trail in the SQLite file (issue 22 item 7): a record is written by the same
/// transaction as the change it records, so it exists if and only if the change happened.
@Suite struct SQLiteAuditTests {
    static let rule = TransactionRule(journey: "Confirm", ttlS: 180, bindFields: ["/amount"], display: "Pay {amount}?")
    static let request = TransactionBinding(realm: "/", resource: "https://gw/transfer", method: "POST", subject: "alice", rule: rule,
                                            body: Array(#"{"amount":5}"#.utf8), contentType: "application/json")

    static func record(_ txid: String, _ state: TransactionRecord.State, clock: ManualClock) -> TransactionRecord {
        TransactionRecord(txid: txid, state: state, realm: "/", resource: request.resource, method: "POST", subject: "alice",
                          journey: "Confirm", bodyDigest: request.bodyDigest, bound: request.bound, display: "Pay 5?",
                          expires: Int(clock.nowMs / 1000) + 180)
    }

    func trail(_ path: String, sinceMs: Int64 = 0, untilMs: Int64 = .max) throws -> [AuditEvent] {
        var out: [AuditEvent] = []
        try SQLiteStore.auditRecords(path: path, sinceMs: sinceMs, untilMs: untilMs) { out.append(try #require(AuditEvent(stored: $0))) }
        return out
    }

    /// Ten retries at once from several threads: one consumed, nine refused, and the file's
    /// trail (read by a connection of its own, as `txgate audit` does) says exactly that.
    @Test func ofTenConcurrentConsumesExactlyOneIsRecordedConsumed() async throws {
        let clock = ManualClock()
        try await withStore(clock: clock) { store, folder async throws in
            let tx = Self.record("tx-10", .completed, clock: clock)
            try await call { store.put(TransactionRecord.key(tx.txid), value: tx.encoded, ttlMs: 60_000, on: $0, $1) }.get()
            let executors = (0..<4).map { TestExecutor($0) }
            let results = await concurrently(10, executors: executors) { i, executor, done in
                let audit = AuditEvent.consume(txid: tx.txid, Self.request, requestId: "req-\(i)").append(retentionMs: 86_400_000)
                store.takeIf(TransactionRecord.key(tx.txid), fields: TransactionRecord.consumable(by: Self.request), audit: audit,
                             on: executor, done)
            }
            #expect(try results.filter { if case .taken = try $0.get() { return true } else { return false } }.count == 1)
            let events = try trail(folder.path("store.db"))
            #expect(events.count == 10)
            #expect(events.filter { $0.kind == .consumed }.count == 1)
            let consumed = try #require(events.first { $0.kind == .consumed })
            #expect(consumed.display == "Pay 5?" && consumed.journey == "Confirm" && consumed.bound == ["/amount": .number(5)])
            #expect(consumed.timeMs == clock.nowMs)
            #expect(events.filter { $0.kind == .refused }.allSatisfy { $0.reason == "unknown, expired or consumed" })
            #expect(Set(events.map(\.requestId)).count == 10)
        }
    }

    /// A refused retry is recorded with the record it found and why; a consume without an
    /// audit entry writes nothing.
    @Test func aRefusalIsRecordedWithTheRecordFound() async throws {
        let clock = ManualClock()
        try await withStore(clock: clock) { store, folder async throws in
            let pending = Self.record("tx-p", .created, clock: clock)
            try await call { store.put(TransactionRecord.key(pending.txid), value: pending.encoded, ttlMs: 60_000, on: $0, $1) }.get()
            let audit = AuditEvent.consume(txid: pending.txid, Self.request, requestId: "r").append(retentionMs: 60_000)
            let take = try await call { store.takeIf(TransactionRecord.key(pending.txid), fields: TransactionRecord.consumable(by: Self.request),
                                                     audit: audit, on: $0, $1) }.get()
            #expect(take == .kept(pending.encoded))
            _ = try await call { store.takeIf(TransactionRecord.key(pending.txid), fields: ["state": "COMPLETED"], on: $0, $1) }.get()
            let events = try trail(folder.path("store.db"))
            #expect(events.map(\.kind) == [.refused])
            #expect(events.first?.reason == "not completed")
            #expect(events.first?.display == "Pay 5?")
        }
    }

    /// An approval's record is written only by the swap that approved; a failed swap, and a
    /// rolled-back one, write nothing.
    @Test func anApprovalIsRecordedOnlyByTheSwapThatMadeIt() async throws {
        let clock = ManualClock()
        try await withStore(clock: clock) { store, folder async throws in
            let created = Self.record("tx-a", .created, clock: clock)
            let approved = try #require(created.approved(by: "alice"))
            let key = TransactionRecord.key(created.txid)
            try await call { store.put(key, value: created.encoded, ttlMs: 60_000, on: $0, $1) }.get()
            let results = await concurrently(8, executors: [TestExecutor(1), TestExecutor(2)]) { i, executor, done in
                let audit = AuditAppend(ifChanged: AuditEvent.approved(approved, requestId: "req-\(i)").entry, retentionMs: 60_000)
                store.compareAndSwap(key, expected: created.encoded, new: approved.encoded, ttlMs: nil, audit: audit, on: executor, done)
            }
            #expect(try results.filter { try $0.get() }.count == 1)
            #expect(try trail(folder.path("store.db")).map(\.kind) == [.approved])
            // A retention of 0 fails the operation, and the swap with it: the two never disagree.
            let bad = AuditAppend(ifChanged: AuditEvent.approved(approved, requestId: "x").entry, retentionMs: 0)
            let r = await call { store.compareAndSwap(key, expected: approved.encoded, new: created.encoded, ttlMs: nil, audit: bad, on: $0, $1) }
            #expect(throws: StoreError.self) { try r.get() }
            #expect(try await call { store.get(key, on: $0, $1) }.get() == approved.encoded)
            #expect(try trail(folder.path("store.db")).count == 1)
        }
    }

    /// The records as `txgate audit` reads them, with their ids.
    func stored(_ path: String, sinceMs: Int64 = 0, untilMs: Int64 = .max) throws -> [StoredAuditRecord] {
        var out: [StoredAuditRecord] = []
        try SQLiteStore.auditRecords(path: path, sinceMs: sinceMs, untilMs: untilMs) { out.append($0) }
        return out
    }

    func append(_ txid: String, retentionMs: Int = 10_000, to store: SQLiteStore) async throws {
        let e = AuditEvent(kind: .declined, txid: txid, subject: "alice", requestId: txid)
        try await call { store.appendAudit(e.entry, foundKey: nil, retentionMs: retentionMs, on: $0, $1) }.get()
    }

    /// The names of what the file's schema holds besides the `kv` table and its index.
    func schema(_ path: String) throws -> [String] {
        let db = try SQLiteConnection(path: path)
        defer { db.close() }
        let select = try db.prepare("SELECT name FROM sqlite_master WHERE name NOT LIKE 'kv%' ORDER BY name")
        return try select.use { s in
            var names: [String] = []
            while try s.step() { names.append(String(decoding: s.bytes(0), as: UTF8.self)) }
            return names
        }
    }

    /// A new file keys the trail by time: no index and no `AUTOINCREMENT` counter to write at
    /// each record, and ids that are the records' order (one more within a millisecond).
    @Test func aNewFileKeysTheTrailByTime() async throws {
        let clock = ManualClock()
        try await withStore(clock: clock) { store, folder async throws in
            let t0 = clock.nowMs
            try await append("a", to: store)
            try await append("b", to: store)
            clock.advance(ms: 5)
            try await append("c", to: store)
            let path = folder.path("store.db")
            #expect(try schema(path) == ["audit", "audit_floor"])
            let records = try stored(path)
            let first = AuditTable.firstId(atMs: t0)
            #expect(records.map(\.id) == [String(first), String(first + 1), String(AuditTable.firstId(atMs: t0 + 5))])
            #expect(records.map(\.timeMs) == [t0, t0, t0 + 5])
        }
    }

    /// Records are filtered by the store's clock; the minute's purge deletes those past their
    /// retention, and nothing else.
    @Test func theWindowFiltersAndThePurgeKeepsTheRetention() async throws {
        let clock = ManualClock()
        try await withStore(clock: clock) { store, folder async throws in
            let t0 = clock.nowMs
            try await append("a", to: store)
            clock.advance(ms: 5_000)
            try await append("b", to: store)
            clock.advance(ms: 5_000)
            let path = folder.path("store.db")
            #expect(try trail(path).map(\.txid) == ["a", "b"])
            #expect(try trail(path, sinceMs: t0 + 1).map(\.txid) == ["b"])
            #expect(try trail(path, untilMs: t0 + 5_000).map(\.txid) == ["a"])
            #expect(try trail(path, sinceMs: t0 + 5_000, untilMs: t0 + 5_001).map(\.txid) == ["b"])
            #expect(try store.purgeExpired() == 1)
            #expect(try trail(path).map(\.txid) == ["b"])
            clock.advance(ms: 4_999)
            #expect(try store.purgeExpired() == 0)
            clock.advance(ms: 1)
            #expect(try store.purgeExpired() == 1)
            #expect(try trail(path).isEmpty)
        }
    }

    /// A retention lowered at a restart applies to the records already kept, as Redis trims
    /// its stream at each record: the newest record's retention is the trail's.
    @Test func aLoweredRetentionAppliesToTheRecordsKept() async throws {
        let clock = ManualClock()
        try await withStore(clock: clock) { store, folder async throws in
            try await append("old", retentionMs: 60_000, to: store)
            clock.advance(ms: 20_000)
            try await append("new", retentionMs: 10_000, to: store)
            #expect(try store.purgeExpired() == 1)
            #expect(try trail(folder.path("store.db")).map(\.txid) == ["new"])
        }
    }

    /// Two gateways share the file, one with its clock behind: the trail keeps the order the
    /// records were written in, each record its own writer's time, and no id is given twice,
    /// not even once the purge has emptied the table.
    @Test func aClockBehindKeepsTheOrderWrittenAndIdsAreNeverGivenTwice() async throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let path = folder.path("shared.db")
        let clock = ManualClock()
        let behind = ManualClock(startMs: clock.nowMs - 60_000)
        let first = try SQLiteStore(path: path, clock: clock.read)
        let second = try SQLiteStore(path: path, clock: behind.read)
        defer { first.close(); second.close() }
        try await append("a", to: first)
        try await append("b", to: second)
        let written = try stored(path, sinceMs: behind.nowMs)
        #expect(written.compactMap { AuditEvent(stored: $0)?.txid } == ["a", "b"])
        #expect(written.map(\.timeMs) == [clock.nowMs, behind.nowMs])
        let ids = written.compactMap { Int64($0.id) }
        #expect(ids.count == 2 && ids[0] < ids[1])

        clock.advance(ms: 20_000)
        #expect(try first.purgeExpired() == 2)
        #expect(try stored(path).isEmpty)
        try await append("c", to: second)
        let after = try #require(try stored(path, sinceMs: behind.nowMs).first.flatMap { Int64($0.id) })
        #expect(after > ids[1])
    }

    /// A file whose trail an earlier version made (`AUTOINCREMENT`, indexed by time and by
    /// expiry) keeps its table: new records join it in time order, and its purge keeps the
    /// newest record's retention, as a new file's does.
    @Test func aTrailFromAnEarlierVersionIsReadAndPurgedAsBefore() async throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let path = folder.path("store.db")
        let clock = ManualClock()
        let event = AuditEvent(kind: .declined, txid: "earlier", subject: "alice", requestId: "r")
        do {
            let db = try SQLiteConnection(path: path)
            defer { db.close() }
            try db.execute("""
                CREATE TABLE audit (
                  id INTEGER PRIMARY KEY AUTOINCREMENT, time_ms INTEGER NOT NULL, expires_at INTEGER NOT NULL,
                  entry BLOB NOT NULL, found BLOB);
                CREATE INDEX audit_time_ms ON audit (time_ms);
                CREATE INDEX audit_expires_at ON audit (expires_at);
                """)
            let insert = try db.prepare("INSERT INTO audit (time_ms, expires_at, entry) VALUES (?1, ?2, ?3)")
            try insert.use { s in
                try s.bind(1, clock.nowMs - 5_000)
                try s.bind(2, clock.nowMs + 60_000)
                try s.bind(3, event.entry)
                try s.step()
            }
        }
        let store = try SQLiteStore(path: path, clock: clock.read)
        defer { store.close() }
        try await append("new", retentionMs: 10_000, to: store)
        #expect(try trail(path).map(\.txid) == ["earlier", "new"])
        #expect(try stored(path).first?.id == "1")
        #expect(try trail(path, sinceMs: clock.nowMs).map(\.txid) == ["new"])
        // "earlier" is 10 s old (the newest record's retention) 5 s from now.
        clock.advance(ms: 4_999)
        #expect(try store.purgeExpired() == 0)
        clock.advance(ms: 1)
        #expect(try store.purgeExpired() == 1)
        #expect(try trail(path).map(\.txid) == ["new"])
    }

    @Test func exportingAFileThatIsNotThereCreatesNothing() throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let path = folder.path("missing.db")
        #expect(throws: StoreError.self) { try trail(path) }
        #expect(!FileManager.default.fileExists(atPath: path))
    }
}
