import TxGateCore

/// The `audit` table: the audit trail's records (issue 22 item 7), in the store's file, so that
/// a record is written by the same transaction as the change it records (`KeyValueTable`).
/// Ordered by time (`time_ms`, indexed, with the row id breaking ties); a record is kept until
/// `expires_at` (its retention), then the minute's purge deletes it.
final class AuditTable {
    static let schema = """
        CREATE TABLE IF NOT EXISTS audit (
          id INTEGER PRIMARY KEY AUTOINCREMENT, time_ms INTEGER NOT NULL, expires_at INTEGER NOT NULL,
          entry BLOB NOT NULL, found BLOB);
        CREATE INDEX IF NOT EXISTS audit_time_ms ON audit (time_ms);
        CREATE INDEX IF NOT EXISTS audit_expires_at ON audit (expires_at);
        """

    private let db: SQLiteConnection
    private let insert, purgeExpired: SQLiteStatement

    init(_ db: SQLiteConnection) throws {
        self.db = db
        try db.execute(Self.schema)
        insert = try db.prepare("INSERT INTO audit (time_ms, expires_at, entry, found) VALUES (?1, ?2, ?3, ?4)")
        purgeExpired = try db.prepare("DELETE FROM audit WHERE expires_at <= ?1")
    }

    /// Inside the caller's transaction (or as one statement of its own).
    func append(_ entry: [UInt8], found: [UInt8]?, retentionMs: Int, now: Int64) throws {
        guard retentionMs > 0 else { throw StoreError.failed("audit: retentionMs must be more than 0, got \(retentionMs)") }
        let (expiresAt, overflow) = now.addingReportingOverflow(Int64(retentionMs))
        try insert.use { s in
            try s.bind(1, now)
            try s.bind(2, overflow ? .max : expiresAt)
            try s.bind(3, entry)
            try s.bind(4, found)
            try s.step()
        }
    }

    /// Deletes the records past their retention; returns how many.
    func purge(now: Int64) throws -> Int {
        try purgeExpired.use { s in
            try s.bind(1, now)
            try s.step()
        }
        return db.changes
    }

    /// The records written in [sinceMs, untilMs), oldest first, one at a time to `each`.
    /// Records past their retention but not yet purged are included: the trail's purge is
    /// the minute's, not the export's.
    static func read(_ db: SQLiteConnection, sinceMs: Int64, untilMs: Int64, _ each: (StoredAuditRecord) throws -> Void) throws {
        let select = try db.prepare(
            "SELECT id, time_ms, entry, found FROM audit WHERE time_ms >= ?1 AND time_ms < ?2 ORDER BY time_ms, id")
        try select.use { s in
            try s.bind(1, sinceMs)
            try s.bind(2, untilMs)
            while try s.step() {
                try each(StoredAuditRecord(timeMs: s.int64(1), id: String(s.int64(0)), entry: s.bytes(2),
                                           found: s.isNull(3) ? nil : s.bytes(3)))
            }
        }
    }
}
