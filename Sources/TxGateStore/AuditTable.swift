import TxGateCore

/// The `audit` table: the audit trail's records (issue 22 item 7), in the store's file, so that
/// a record is written by the same transaction as the change it records (`KeyValueTable`).
///
/// The table is keyed by time (`Layout.timeKeyed`): a record's id is the millisecond it was
/// written, shifted left by `sequenceBits`, plus one for each record before it in that
/// millisecond. The primary key is then the trail's order: the export reads a range of it and
/// the purge deletes a prefix of it, with no index, and a record written changes one page of
/// the file (the table's last leaf) instead of four in the layout before (the leaf, SQLite's
/// `AUTOINCREMENT` counter and two indexes), at every approval and every consumption.
/// An id is never given twice: it is more than the newest id, or, in a table the purge emptied,
/// more than the last id it deleted (`audit_floor`, written by the purge, not by each record).
///
/// A file made by an earlier version keeps its table (`Layout.indexed`: row ids from
/// `AUTOINCREMENT`, indexed by `time_ms` and `expires_at`), read and purged by its time index;
/// the records it gets from here on have time-keyed ids, after its own.
final class AuditTable {
    /// The new table's schema: `CREATE ... IF NOT EXISTS` leaves an earlier table as it is.
    static let schema = """
        CREATE TABLE IF NOT EXISTS audit (
          id INTEGER PRIMARY KEY, time_ms INTEGER NOT NULL, expires_at INTEGER NOT NULL,
          entry BLOB NOT NULL, found BLOB);
        CREATE TABLE IF NOT EXISTS audit_floor (one INTEGER PRIMARY KEY CHECK (one = 1), id INTEGER NOT NULL);
        """
    /// Bits of an id below its millisecond: room for a million records in one millisecond
    /// (more would borrow the next millisecond's ids, still in order), and for milliseconds up
    /// to the year 2248 in a positive 64-bit id.
    static let sequenceBits: Int64 = 20

    enum Layout: Equatable {
        /// Ids keyed by time: read and purged by the primary key.
        case timeKeyed
        /// An earlier version's table, indexed by `time_ms` (and by `expires_at`, no longer read).
        case indexed
    }

    let layout: Layout
    private let db: SQLiteConnection
    private let insert, newestRetention, raiseFloor, purgeOlder: SQLiteStatement

    /// Creates the table if the file has none, and finds the layout of the one it has.
    init(_ db: SQLiteConnection) throws {
        self.db = db
        try db.execute(Self.schema)
        let indexed = try db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'audit_time_ms'")
        layout = try indexed.use { try $0.step() } ? .indexed : .timeKeyed
        // The first id of this millisecond, or the newest id plus one: after the clock went
        // back, records keep the order they were written in. The floor is read only when the
        // table is empty (`coalesce` stops at its first value).
        insert = try db.prepare("""
            INSERT INTO audit (id, time_ms, expires_at, entry, found)
            VALUES (max(?1, coalesce((SELECT max(id) FROM audit), (SELECT id FROM audit_floor), 0) + 1), ?2, ?3, ?4, ?5)
            """)
        // The newest id so far: a table the purge empties gives none of its ids again.
        raiseFloor = try db.prepare("""
            INSERT INTO audit_floor (one, id) SELECT 1, id FROM audit WHERE true ORDER BY id DESC LIMIT 1
            ON CONFLICT (one) DO UPDATE SET id = max(id, excluded.id)
            """)
        newestRetention = try db.prepare("SELECT expires_at - time_ms FROM audit ORDER BY id DESC LIMIT 1")
        switch layout {
        case .timeKeyed: purgeOlder = try db.prepare("DELETE FROM audit WHERE id < ?1")
        case .indexed: purgeOlder = try db.prepare("DELETE FROM audit WHERE time_ms < ?1")
        }
    }

    /// The first id of millisecond `ms`: the bound of a range of ids by time.
    static func firstId(atMs ms: Int64) -> Int64 {
        if ms <= 0 { return 0 }
        if ms > Int64.max >> sequenceBits { return .max }
        return ms << sequenceBits
    }

    /// The bound, at millisecond `ms`, of a range of records in the column this layout orders
    /// them by: the id (`firstId`) or `time_ms`.
    private func bound(atMs ms: Int64) -> Int64 {
        layout == .timeKeyed ? Self.firstId(atMs: ms) : ms
    }

    /// Inside the caller's transaction (or as one statement of its own).
    func append(_ entry: [UInt8], found: [UInt8]?, retentionMs: Int, now: Int64) throws {
        guard retentionMs > 0 else { throw StoreError.failed("audit: retentionMs must be more than 0, got \(retentionMs)") }
        try insert.use { s in
            try s.bind(1, Self.firstId(atMs: now))
            try s.bind(2, now)
            try s.bind(3, KeyValueTable.expiry(now: now, ttlMs: retentionMs))
            try s.bind(4, entry)
            try s.bind(5, found)
            try s.step()
        }
    }

    /// Deletes the records past their retention; returns how many.
    ///
    /// The retention is the newest record's (the `audit.retentionDays` of the gateway that
    /// wrote last), and every record older than that goes: a retention lowered at a restart
    /// applies to the records already kept, as Redis trims its stream (`MINID`) at each record.
    func purge(now: Int64) throws -> Int {
        guard let retention = try newestRetention.use({ s in try s.step() ? s.int64(0) : nil }) else { return 0 }
        // Records at or before `now - retention` go.
        let (last, overflow) = now.subtractingReportingOverflow(retention)
        guard !overflow, last < .max else { return 0 }
        // Before the records go (a crash between the two keeps a floor and loses nothing).
        _ = try raiseFloor.use { try $0.step() }
        try purgeOlder.use { s in
            try s.bind(1, bound(atMs: last + 1))
            try s.step()
        }
        return db.changes
    }

    /// The records written in [sinceMs, untilMs), oldest first, one at a time to `each`.
    /// Records past their retention but not yet purged are included: the trail's purge is
    /// the minute's, not the export's.
    func read(sinceMs: Int64, untilMs: Int64, _ each: (StoredAuditRecord) throws -> Void) throws {
        let select: SQLiteStatement
        switch layout {
        case .timeKeyed:
            select = try db.prepare("SELECT id, time_ms, entry, found FROM audit WHERE id >= ?1 AND id < ?2 ORDER BY id")
        case .indexed:
            select = try db.prepare(
                "SELECT id, time_ms, entry, found FROM audit WHERE time_ms >= ?1 AND time_ms < ?2 ORDER BY time_ms, id")
        }
        try select.use { s in
            try s.bind(1, bound(atMs: sinceMs))
            try s.bind(2, bound(atMs: untilMs))
            while try s.step() {
                try each(StoredAuditRecord(timeMs: s.int64(1), id: String(s.int64(0)), entry: s.bytes(2),
                                           found: s.isNull(3) ? nil : s.bytes(3)))
            }
        }
    }
}
