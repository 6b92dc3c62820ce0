import CSQLite

/// A failed SQLite call: SQLite's extended result code and its own message.
struct SQLiteError: Error, CustomStringConvertible {
    let code: Int32
    let message: String
    /// The primary result code (SQLITE_IOERR for SQLITE_IOERR_WRITE, and so on).
    var primaryCode: Int32 { code & 0xff }
    var description: String { message }
}

/// One SQLite connection and the statements prepared on it.
///
/// Not thread-safe, on purpose: the store touches it only from its own thread, so the
/// connection is opened without SQLite's mutexes.
final class SQLiteConnection {
    private var db: OpaquePointer?
    private var statements: [SQLiteStatement] = []

    /// Done once, before the process's first SQLite connection: no memory statistics
    /// (`txg_sqlite3_disable_memstatus`), so SQLite's allocations take no global mutex.
    private static let configured: Void = { _ = txg_sqlite3_disable_memstatus() }()

    init(path: String) throws {
        _ = Self.configured
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &handle, flags, nil)
        guard rc == SQLITE_OK, let handle else {
            // SQLite hands back a handle even when opening fails; it carries the message.
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
            sqlite3_close_v2(handle)
            throw SQLiteError(code: rc, message: message)
        }
        sqlite3_extended_result_codes(handle, 1)
        db = handle
    }

    deinit { close() }

    var isOpen: Bool { db != nil }

    /// Runs SQL that binds nothing, such as a PRAGMA or the schema.
    func execute(_ sql: String) throws {
        let db = try handle()
        var errorMessage: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(db, sql, nil, nil, &errorMessage)
        defer { sqlite3_free(errorMessage) }
        guard rc == SQLITE_OK else {
            let message = errorMessage.map { String(cString: $0) } ?? String(cString: sqlite3_errstr(rc))
            throw SQLiteError(code: rc, message: message)
        }
    }

    /// Prepares a statement once, for reuse; it is finalized by `close()`.
    func prepare(_ sql: String) throws -> SQLiteStatement {
        let db = try handle()
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &stmt, nil)
        guard rc == SQLITE_OK, let stmt else { throw error(rc) }
        let statement = SQLiteStatement(stmt, connection: self)
        statements.append(statement)
        return statement
    }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    var changes: Int { db.map { Int(sqlite3_changes($0)) } ?? 0 }

    /// Whether a transaction is open (SQLite rolls some back by itself after an I/O error).
    var inTransaction: Bool { db.map { sqlite3_get_autocommit($0) == 0 } ?? false }

    /// The error for a failed call, with SQLite's message for it.
    func error(_ rc: Int32) -> SQLiteError {
        guard let db else { return SQLiteError(code: SQLITE_MISUSE, message: "the database is closed") }
        return SQLiteError(code: rc, message: String(cString: sqlite3_errmsg(db)))
    }

    func close() {
        guard let db else { return }
        for statement in statements { statement.finalize() }
        statements = []
        sqlite3_close_v2(db)
        self.db = nil
    }

    /// Runs `body` with the open handle (nothing when closed).
    func withHandle<T>(_ body: (OpaquePointer) throws -> T) rethrows -> T? {
        guard let db else { return nil }
        return try body(db)
    }

    private func handle() throws -> OpaquePointer {
        guard let db else { throw SQLiteError(code: SQLITE_MISUSE, message: "the database is closed") }
        return db
    }
}

/// A prepared statement, reused: `use` resets it and clears its bindings afterwards, so that no
/// read stays open and no old value leaks into the next call.
final class SQLiteStatement {
    private var stmt: OpaquePointer?
    private unowned let connection: SQLiteConnection

    fileprivate init(_ stmt: OpaquePointer, connection: SQLiteConnection) {
        self.stmt = stmt
        self.connection = connection
    }

    func use<T>(_ body: (SQLiteStatement) throws -> T) throws -> T {
        guard let stmt else { throw SQLiteError(code: SQLITE_MISUSE, message: "the statement is finalized") }
        defer {
            sqlite3_reset(stmt)
            sqlite3_clear_bindings(stmt)
        }
        return try body(self)
    }

    func bind(_ index: Int32, _ value: Int64) throws {
        try check(sqlite3_bind_int64(stmt, index, value))
    }

    func bind(_ index: Int32, _ text: String) throws {
        var text = text
        let rc = text.withUTF8 { utf8 -> Int32 in
            guard utf8.count <= Int32.max else { return SQLITE_TOOBIG }
            // An empty buffer may have no address, and a nil pointer would bind NULL, not "".
            let start = utf8.baseAddress.map { UnsafeRawPointer($0) } ?? UnsafeRawPointer(("" as StaticString).utf8Start)
            return txg_sqlite3_bind_text_transient(stmt, index, start.assumingMemoryBound(to: CChar.self), Int32(utf8.count))
        }
        try check(rc)
    }

    func bind(_ index: Int32, _ bytes: [UInt8]) throws {
        let rc = bytes.withUnsafeBytes { raw -> Int32 in
            guard raw.count <= Int32.max else { return SQLITE_TOOBIG }
            // A nil pointer would bind NULL; an empty value must stay an empty blob.
            guard let base = raw.baseAddress, raw.count > 0 else { return sqlite3_bind_zeroblob(stmt, index, 0) }
            return txg_sqlite3_bind_blob_transient(stmt, index, base, Int32(raw.count))
        }
        try check(rc)
    }

    /// Binds NULL for nil.
    func bind(_ index: Int32, _ bytes: [UInt8]?) throws {
        guard let bytes else { try check(sqlite3_bind_null(stmt, index)); return }
        try bind(index, bytes)
    }

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(stmt, column) == SQLITE_NULL }

    /// Steps once: true when a row is ready, false when the statement is done.
    @discardableResult
    func step() throws -> Bool {
        let rc = sqlite3_step(stmt)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw connection.error(rc)
        }
    }

    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(stmt, column) }

    /// A TEXT column (written from a Swift `String`, so UTF-8).
    func text(_ column: Int32) -> String {
        guard let base = sqlite3_column_text(stmt, column) else { return "" }
        return String(decoding: UnsafeBufferPointer(start: base, count: Int(sqlite3_column_bytes(stmt, column))), as: UTF8.self)
    }

    func bytes(_ column: Int32) -> [UInt8] {
        // column_blob before column_bytes, as SQLite advises; an empty blob has no pointer.
        guard let base = sqlite3_column_blob(stmt, column) else { return [] }
        let count = Int(sqlite3_column_bytes(stmt, column))
        return Array(UnsafeRawBufferPointer(start: base, count: count))
    }

    fileprivate func finalize() {
        sqlite3_finalize(stmt)
        stmt = nil
    }

    private func check(_ rc: Int32) throws {
        // A bind failure is about the arguments, not the connection: SQLite's generic text fits.
        guard rc == SQLITE_OK else { throw SQLiteError(code: rc, message: String(cString: sqlite3_errstr(rc))) }
    }
}
