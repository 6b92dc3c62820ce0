import TxGateCore

/// The `kv` table and the store's operations on it, run synchronously on the caller's thread
/// (which is always the store's thread).
///
/// `now` and expiry times are epoch milliseconds. A row whose `expires_at <= now` is treated as
/// absent everywhere; the periodic purge only reclaims its space. Operations that read and then
/// write run in `BEGIN IMMEDIATE` transactions, so they stay atomic even if another process
/// shares the file; `create` and `compareAndSwap` are each one conditional write statement
/// instead (a writing statement takes the write lock before it reads, so it is as atomic,
/// without the BEGIN and COMMIT round and the separate read).
final class KeyValueTable {
    /// Internal for tests, which make it fail as a disk would.
    let db: SQLiteConnection
    private let begin, commit, rollback, savepoint, release, rollbackToSavepoint: SQLiteStatement
    private let selectLive, upsert, touchLive, deleteLive, deleteKey, ping: SQLiteStatement
    private let purgeChunkEnd, purgeRange, purgeTail: SQLiteStatement
    private let insertUnlessLive, swapIfEqual, swapIfEqualKeepingExpiry, deleteIfEqual, updateValue: SQLiteStatement
    private let audit: AuditTable

    init(_ db: SQLiteConnection) throws {
        self.db = db
        // Before anything that locks, so that every later statement waits for another process.
        try db.execute("PRAGMA busy_timeout=5000")
        try db.execute("PRAGMA journal_mode=WAL")
        try db.execute("PRAGMA synchronous=NORMAL")
        try db.execute("""
            CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value BLOB NOT NULL, expires_at INTEGER NOT NULL) WITHOUT ROWID;
            DROP INDEX IF EXISTS kv_expires_at;
            """)
        begin = try db.prepare("BEGIN IMMEDIATE")
        commit = try db.prepare("COMMIT")
        rollback = try db.prepare("ROLLBACK")
        savepoint = try db.prepare("SAVEPOINT operation")
        release = try db.prepare("RELEASE operation")
        rollbackToSavepoint = try db.prepare("ROLLBACK TO operation")
        selectLive = try db.prepare("SELECT value, expires_at FROM kv WHERE key = ?1 AND expires_at > ?2")
        upsert = try db.prepare("INSERT OR REPLACE INTO kv (key, value, expires_at) VALUES (?1, ?2, ?3)")
        touchLive = try db.prepare("UPDATE kv SET expires_at = ?2 WHERE key = ?1 AND expires_at > ?3")
        deleteLive = try db.prepare("DELETE FROM kv WHERE key = ?1 AND expires_at > ?2")
        deleteKey = try db.prepare("DELETE FROM kv WHERE key = ?1")
        // The purge walks the primary key a chunk at a time: the first key past the chunk, then
        // the chunk's expired rows (`purgeChunk`).
        purgeChunkEnd = try db.prepare("SELECT key FROM kv WHERE key >= ?1 ORDER BY key LIMIT 1 OFFSET ?2")
        purgeRange = try db.prepare("DELETE FROM kv WHERE key >= ?1 AND key < ?2 AND expires_at <= ?3")
        purgeTail = try db.prepare("DELETE FROM kv WHERE key >= ?1 AND expires_at <= ?2")
        ping = try db.prepare("SELECT 1 FROM kv LIMIT 1")
        // An expired row may still be there: replacing it is creating.
        insertUnlessLive = try db.prepare("""
            INSERT INTO kv (key, value, expires_at) VALUES (?1, ?2, ?3)
            ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at WHERE kv.expires_at <= ?4
            """)
        swapIfEqual = try db.prepare("UPDATE kv SET value = ?3, expires_at = ?4 WHERE key = ?1 AND value = ?2 AND expires_at > ?5")
        // A change that keeps the row's expiry leaves `expires_at` out of the statement: naming
        // it rewrites the row's entry in the expiry index too, one more page in the log at each
        // commit (an approval, a counter moved, a one-time code's step raised).
        swapIfEqualKeepingExpiry = try db.prepare("UPDATE kv SET value = ?3 WHERE key = ?1 AND value = ?2 AND expires_at > ?4")
        updateValue = try db.prepare("UPDATE kv SET value = ?2 WHERE key = ?1")
        deleteIfEqual = try db.prepare("DELETE FROM kv WHERE key = ?1 AND value = ?2 AND expires_at > ?3")
        audit = try AuditTable(db)
    }

    func create(_ key: String, value: [UInt8], expiresAt: Int64, now: Int64) throws -> Bool {
        try insertUnlessLive.use { s in
            try s.bind(1, key)
            try s.bind(2, value)
            try s.bind(3, expiresAt)
            try s.bind(4, now)
            try s.step()
        }
        return db.changes > 0
    }

    /// `Store.writeAll`: every condition read first, then every write and the move, in one
    /// transaction. A move that fails undoes the writes.
    func writeAll(_ writes: [ConditionalWrite], moving counter: CounterMove, now: Int64) throws -> WriteOutcome {
        try transaction {
            for write in writes {
                let found = try live(write.key, now: now)?.value
                let holds = switch write {
                case .create: found == nil
                case .swap(_, let expected, _, _): found == expected
                }
                if !holds { return .refused(key: write.key, found: found) }
            }
            for write in writes {
                switch write {
                case .create(let key, let value, let ttlMs):
                    try put(key, value: value, expiresAt: try Self.expiry(of: "writeAll '\(key)'", now: now, ttlMs: ttlMs))
                case .swap(let key, _, let new, let ttlMs?):
                    try put(key, value: new, expiresAt: try Self.expiry(of: "writeAll '\(key)'", now: now, ttlMs: ttlMs))
                case .swap(let key, _, let new, nil):
                    try replaceValue(key, new)
                }
            }
            return .written(count: try move(counter, now: now))
        }
    }

    /// When a row written now with `ttlMs` (> 0) expires: never (`Int64.max`) past the clock's
    /// range, as `StoreExpiry.never` is.
    static func expiry(now: Int64, ttlMs: Int) -> Int64 {
        let (expiresAt, overflow) = now.addingReportingOverflow(Int64(ttlMs))
        return overflow ? .max : expiresAt
    }

    /// `expiry`, for a `ttlMs` not checked yet; `what` names it in the error when it is not positive.
    private static func expiry(of what: String, now: Int64, ttlMs: Int) throws -> Int64 {
        guard ttlMs > 0 else { throw StoreError.failed("\(what): ttlMs must be more than 0, got \(ttlMs)") }
        return expiry(now: now, ttlMs: ttlMs)
    }

    func put(_ key: String, value: [UInt8], expiresAt: Int64) throws {
        try upsert.use { s in
            try s.bind(1, key)
            try s.bind(2, value)
            try s.bind(3, expiresAt)
            try s.step()
        }
    }

    func get(_ key: String, now: Int64) throws -> [UInt8]? {
        try live(key, now: now)?.value
    }

    func touch(_ key: String, expiresAt: Int64, now: Int64) throws -> Bool {
        try touchLive.use { s in
            try s.bind(1, key)
            try s.bind(2, expiresAt)
            try s.bind(3, now)
            try s.step()
        }
        return db.changes > 0
    }

    func delete(_ key: String, now: Int64) throws -> Bool {
        // An expired row is left to the purge: deleting it would not change any answer.
        try deleteLive.use { s in
            try s.bind(1, key)
            try s.bind(2, now)
            try s.step()
        }
        return db.changes > 0
    }

    func take(_ key: String, now: Int64) throws -> [UInt8]? {
        try transaction {
            guard let row = try live(key, now: now) else { return nil }
            try remove(key)
            return row.value
        }
    }

    /// Counters are stored as decimal ASCII, as Redis's INCR keeps them, so that `get` reads the
    /// same bytes from either store.
    func increment(_ key: String, expiresAt: Int64, now: Int64) throws -> Int {
        try transaction {
            if let row = try live(key, now: now) {
                guard let n = Int(String(decoding: row.value, as: UTF8.self)) else {
                    throw StoreError.failed("increment: the value is not a counter")
                }
                let (next, overflow) = n.addingReportingOverflow(1)
                if overflow { throw StoreError.failed("increment: the counter would overflow") }
                try replaceValue(key, Array(String(next).utf8))
                return next
            }
            // No live counter (an expired one is replaced): a new window starts at 1.
            try put(key, value: Array("1".utf8), expiresAt: expiresAt)
            return 1
        }
    }

    /// `Store.decrement` in one transaction: the counter lowered by one, keeping its expiry.
    func decrement(_ key: String, now: Int64) throws -> Bool {
        try transaction { try lower(key, now: now) != nil }
    }

    /// The counter lowered by one, keeping its expiry: its new value, or nil if it is absent,
    /// at 0 or not a number (then it is left as it is). In the caller's transaction.
    private func lower(_ key: String, now: Int64) throws -> Int? {
        guard let row = try live(key, now: now), let n = Int(String(decoding: row.value, as: UTF8.self)), n > 0 else {
            return nil
        }
        try replaceValue(key, Array(String(n - 1).utf8))
        return n - 1
    }

    /// A `CounterMove`, in the caller's transaction: the counter's value after it.
    private func move(_ counter: CounterMove, now: Int64) throws -> Int {
        switch counter {
        case .up(let key, let ttlMs):
            return try increment(key, expiresAt: try Self.expiry(of: "counter '\(key)'", now: now, ttlMs: ttlMs), now: now)
        case .down(let key):
            return try lower(key, now: now) ?? 0
        }
    }

    /// `Store.raise` in one transaction: a first value never expires; a raised one keeps its expiry.
    func raise(_ key: String, to value: UInt64, now: Int64) throws -> Bool {
        try transaction {
            if let row = try live(key, now: now) {
                guard let kept = UInt64(String(decoding: row.value, as: UTF8.self)) else {
                    throw StoreError.failed("raise '\(key)': the value kept there is not a number")
                }
                guard kept < value else { return false }
                try replaceValue(key, Array(String(value).utf8))
            } else {
                try put(key, value: Array(String(value).utf8), expiresAt: Int64.max)
            }
            return true
        }
    }

    /// `Store.raise(unlessPresent:)` in one transaction.
    func raise(_ key: String, to value: UInt64, unlessPresent guards: [String], now: Int64) throws -> GuardedRaise {
        try transaction {
            for guardKey in guards where try live(guardKey, now: now) != nil { return .blocked }
            return try raise(key, to: value, now: now) ? .raised : .notHigher
        }
    }

    /// `expiresAt` nil keeps the row's expiry. The value compares byte for byte (both are blobs).
    /// With an audit entry for the outcome, the swap and the entry are one transaction.
    func compareAndSwap(_ key: String, expected: [UInt8], new: [UInt8]?, expiresAt: Int64?, now: Int64,
                        audit append: AuditAppend? = nil) throws -> Bool {
        guard let append, append.ifChanged != nil || append.ifUnchanged != nil else {
            return try swap(key, expected: expected, new: new, expiresAt: expiresAt, now: now)
        }
        return try transaction {
            let swapped = try swap(key, expected: expected, new: new, expiresAt: expiresAt, now: now)
            if let entry = append.entry(changed: swapped) {
                try audit.append(entry, found: nil, retentionMs: append.retentionMs, now: now)
            }
            return swapped
        }
    }

    /// `Store.compareAndSwap(moving:)`: the counter's value after the move, nil if nothing was
    /// swapped. A move that fails undoes the swap and its audit entry.
    func compareAndSwap(_ key: String, expected: [UInt8], new: [UInt8]?, expiresAt: Int64?, now: Int64,
                        audit append: AuditAppend?, moving counter: CounterMove) throws -> Int? {
        try transaction {
            try compareAndSwap(key, expected: expected, new: new, expiresAt: expiresAt, now: now, audit: append)
                ? try move(counter, now: now) : nil
        }
    }

    private func swap(_ key: String, expected: [UInt8], new: [UInt8]?, expiresAt: Int64?, now: Int64) throws -> Bool {
        if let new, let expiresAt {
            try swapIfEqual.use { s in
                try s.bind(1, key)
                try s.bind(2, expected)
                try s.bind(3, new)
                try s.bind(4, expiresAt)
                try s.bind(5, now)
                try s.step()
            }
        } else if let new {
            try swapIfEqualKeepingExpiry.use { s in
                try s.bind(1, key)
                try s.bind(2, expected)
                try s.bind(3, new)
                try s.bind(4, now)
                try s.step()
            }
        } else {
            try deleteIfEqual.use { s in
                try s.bind(1, key)
                try s.bind(2, expected)
                try s.bind(3, now)
                try s.step()
            }
        }
        return db.changes > 0
    }

    /// With an audit entry for the outcome, it is written with the value found, in the same
    /// transaction as the take.
    func takeIf(_ key: String, fields: [String: String], now: Int64, audit append: AuditAppend? = nil) throws -> ConditionalTake {
        try transaction {
            let outcome: ConditionalTake
            if let row = try live(key, now: now) {
                if ConditionalTake.matches(row.value, fields) {
                    try remove(key)
                    outcome = .taken(row.value)
                } else {
                    outcome = .kept(row.value)
                }
            } else {
                outcome = .absent
            }
            if let append {
                var taken = false, found: [UInt8]?
                switch outcome {
                case .absent: break
                case .kept(let v): found = v
                case .taken(let v): found = v; taken = true
                }
                if let entry = append.entry(changed: taken) {
                    try audit.append(entry, found: found, retentionMs: append.retentionMs, now: now)
                }
            }
            return outcome
        }
    }

    /// Appends an audit entry with the live value under `foundKey`, read in the same transaction.
    func appendAudit(_ entry: [UInt8], foundKey: String?, retentionMs: Int, now: Int64) throws {
        try transaction {
            let found = try foundKey.flatMap { try live($0, now: now)?.value }
            try audit.append(entry, found: found, retentionMs: retentionMs, now: now)
        }
    }

    /// Several operations in one transaction, each inside a savepoint of its own, so that one
    /// that fails is undone alone: `SQLiteStore` commits what the operations queued together
    /// wrote with one commit (one write of the log, not one per operation).
    struct Batch {
        fileprivate let table: KeyValueTable

        /// Runs one operation in the batch; `body` says whether it failed, and then what it
        /// wrote is undone. Throws when the batch itself failed: SQLite rolls the whole
        /// transaction back after some errors (I/O, a full disk), and what the operations before
        /// this one wrote is then lost with it.
        func run(_ body: () -> Bool) throws {
            try table.step(table.savepoint)
            if body() {
                guard table.db.inTransaction else { throw Lost() }
                try table.step(table.rollbackToSavepoint)
            }
            try table.step(table.release)
        }
    }

    /// SQLite rolled back the batch's transaction by itself.
    struct Lost: Error {}

    /// Runs `body` as one transaction (`Batch`) and commits it; on any error rolls it back and
    /// rethrows, and nothing the batch's operations wrote is kept.
    func batch(_ body: (Batch) throws -> Void) throws {
        try transaction { try body(Batch(table: self)) }
    }

    private func step(_ statement: SQLiteStatement) throws {
        _ = try statement.use { s in try s.step() }
    }

    func checkAlive() throws {
        try ping.use { s in _ = try s.step() }
    }

    /// Rows the purge reads in one transaction (`purgeChunk`): about a millisecond of the
    /// store's thread.
    static let purgeChunkRows = 1000

    /// Deletes expired rows, and audit records past their retention, all in one call; returns
    /// how many. The store's minute purge runs the same chunks one queue turn at a time.
    func purge(now: Int64, chunkRows: Int = purgeChunkRows) throws -> Int {
        var deleted = 0
        var from: String? = ""
        while let start = from {
            let chunk = try purgeChunk(from: start, now: now, rows: chunkRows)
            deleted += chunk.deleted
            from = chunk.next
        }
        return deleted + (try purgeAudit(now: now))
    }

    /// Deletes the expired rows among the `rows` keys from `start` on (in key order), in one
    /// transaction; returns how many, and the key the next chunk starts at (nil: none left).
    ///
    /// The table has no index on `expires_at`: every write that creates, deletes or re-times a
    /// row would change a page of it too, one more page in the log at each commit of the step-up
    /// cycle. The purge reads the table instead, by its primary key, a chunk at a time, so that
    /// operations wait for one chunk at most.
    func purgeChunk(from start: String, now: Int64, rows: Int = purgeChunkRows) throws -> (deleted: Int, next: String?) {
        try transaction {
            let next: String? = try purgeChunkEnd.use { s in
                try s.bind(1, start)
                try s.bind(2, Int64(rows))
                return try s.step() ? s.text(0) : nil
            }
            if let next {
                try purgeRange.use { s in
                    try s.bind(1, start)
                    try s.bind(2, next)
                    try s.bind(3, now)
                    try s.step()
                }
            } else {
                try purgeTail.use { s in
                    try s.bind(1, start)
                    try s.bind(2, now)
                    try s.step()
                }
            }
            return (db.changes, next)
        }
    }

    /// Deletes the audit records past their retention; returns how many.
    func purgeAudit(now: Int64) throws -> Int {
        try audit.purge(now: now)
    }

    func close() { db.close() }

    private func live(_ key: String, now: Int64) throws -> (value: [UInt8], expiresAt: Int64)? {
        try selectLive.use { s in
            try s.bind(1, key)
            try s.bind(2, now)
            guard try s.step() else { return nil }
            return (s.bytes(0), s.int64(1))
        }
    }

    /// A live row's new value, its expiry kept (the caller read the row in this transaction).
    private func replaceValue(_ key: String, _ value: [UInt8]) throws {
        try updateValue.use { s in
            try s.bind(1, key)
            try s.bind(2, value)
            try s.step()
        }
    }

    private func remove(_ key: String) throws {
        try deleteKey.use { s in
            try s.bind(1, key)
            try s.step()
        }
    }

    /// BEGIN IMMEDIATE takes the write lock before the read, so that no other connection can
    /// change the row between our read and our write (and WAL never has to refuse our commit).
    /// Inside a batch (`Batch`) the batch's transaction already holds the lock, and the
    /// operation's savepoint undoes it if it fails.
    private func transaction<T>(_ body: () throws -> T) throws -> T {
        if db.inTransaction { return try body() }
        try step(begin)
        do {
            let result = try body()
            try step(commit)
            return result
        } catch {
            if db.inTransaction { try? step(rollback) }
            throw error
        }
    }
}
