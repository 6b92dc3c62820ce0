import CSQLite
import Dispatch
import Foundation
import Synchronization
import TxGateCore

/// The embedded default store: one SQLite file, durable across restarts.
///
/// Every SQLite call runs on the store's own thread (`StoreThread`), never on an event loop, and
/// each completion is handed to the caller's executor. One connection used serially makes every
/// operation atomic with respect to the others in this process; the transactions keep them
/// atomic when another process shares the file.
///
/// Operations that queue up while the store is busy are committed together (group commit):
/// one transaction, each operation in a savepoint of its own, one commit, and only then their
/// replies. A commit writes the log once however many operations it carries, so under load
/// (several gateway workers sharing the file) the store's thread does less per operation
/// instead of more. An operation that fails in a batch is undone alone; if the batch's commit
/// fails, every operation in it fails, and none is answered as done before it is committed.
public final class SQLiteStore: Store, @unchecked Sendable {
    /// How often expired rows are deleted. Expiry itself is checked on every read.
    static let purgeInterval: DispatchTimeInterval = .seconds(60)
    /// A purge that deletes at least this many rows is followed by a truncating checkpoint
    /// (`WALCheckpointer.truncate`): its transaction grew the log by every page it touched.
    static let truncateAfterPurgedRows = 1000

    public let path: String
    /// The time, in epoch milliseconds, every operation and purge compares expiries against.
    private let clock: @Sendable () -> Int64
    private let thread: StoreThread
    /// The most operations one commit carries by default: a bound on how long the first waits
    /// for the last.
    public static let defaultMaxBatch = 64
    private let maxBatch: Int
    /// Operations waiting for the thread, and whether a drain is given to it to run them.
    private let waiting = Mutex<(jobs: [Job], draining: Bool)>(([], false))
    // @unchecked Sendable: `table` and `purgeTimer` are only touched on `thread` (or in deinit,
    // when nothing else can hold the store).
    private var table: KeyValueTable?
    private var purgeTimer: DispatchSourceTimer?
    /// The minute's purge while it runs (on `thread`): where its next chunk starts, the time it
    /// compares expiries against, and the rows it deleted so far.
    private var purgePass: (next: String, now: Int64, deleted: Int)?
    /// Checkpoints the log off `thread` (closed after `table`, whose connection calls it).
    let checkpointer: WALCheckpointer

    /// Opens (or creates) the store at `path`, creating its folder if needed.
    /// Throws a `ConfigError` for `store.path` that names the file and says what is wrong.
    /// `clock` gives the current time in epoch milliseconds; it is read on the store's thread,
    /// once per operation and once per purge. Tests pass a clock they advance by hand.
    /// `maxBatch` bounds the operations one commit carries; 1 commits each alone (for
    /// benchmarks: `bench/store.sh` compares the two).
    public convenience init(path: String, clock: @escaping @Sendable () -> Int64 = SQLiteStore.wallClockMs,
                            maxBatch: Int = SQLiteStore.defaultMaxBatch) throws {
        try self.init(path: path, clock: clock, maxBatch: maxBatch, threadName: "txgate.store")
    }

    /// `threadName`: the store's thread's (tests give each store a name of its own).
    init(path: String, clock: @escaping @Sendable () -> Int64, maxBatch: Int, threadName: String) throws {
        precondition(maxBatch >= 1, "SQLiteStore: maxBatch must be at least 1")
        self.path = path
        self.clock = clock
        self.maxBatch = maxBatch
        let thread = StoreThread(name: threadName)
        self.thread = thread
        // A store that fails to open leaves no thread behind (its deinit, which stops it, does
        // not run then).
        var opened = false
        defer { if !opened { thread.stop() } }
        guard !path.isEmpty else { throw ConfigError(path: "store.path", message: "must not be empty") }
        try Self.createFolder(of: path)
        try Self.restrictToOwner(path)
        do {
            let (table, connection) = try thread.sync {
                let connection = try SQLiteConnection(path: path)
                return (try KeyValueTable(connection), connection)
            }
            // Once the file is in WAL mode (KeyValueTable). Its last step runs here, between two
            // operations; a store closed meanwhile has no connection left to checkpoint.
            let confined = ThreadConfined(value: connection)
            let checkpointer = try WALCheckpointer(path: path) { done in
                thread.async {
                    _ = try? confined.value.checkpointPassive()
                    done()
                }
            }
            try thread.sync { try checkpointer.watch(connection) }
            self.checkpointer = checkpointer
            self.table = table
        } catch let error as SQLiteError {
            throw ConfigError(path: "store.path", message: "cannot open '\(path)': \(error.message)")
        }
        // The timer only gives the purge to the store's thread.
        let timer = DispatchSource.makeTimerSource(queue: .global(qos: .utility))
        timer.schedule(deadline: .now() + Self.purgeInterval, repeating: Self.purgeInterval, leeway: .seconds(5))
        timer.setEventHandler { [weak self] in self?.startPurge() }
        timer.resume()
        purgeTimer = timer
        opened = true
    }

    deinit {
        // Every queued operation holds the store, but the checkpointer's last step holds only
        // the connection: the connection is closed on the thread, after any such step.
        thread.sync {
            purgeTimer?.cancel()
            table?.close()
        }
        checkpointer.close()
        thread.stop()
    }

    /// Finalizes the statements and closes the file. Later operations fail as unavailable.
    public func close() {
        thread.sync {
            // Operations asked for before the close are done, not refused.
            while runWaiting() {}
            purgeTimer?.cancel()
            purgeTimer = nil
            table?.close()
            table = nil
        }
        checkpointer.close()
    }

    /// Deletes expired rows now (the store also does it every minute); returns how many.
    @discardableResult
    public func purgeExpired() throws -> Int {
        let purged = try thread.sync { try perform("purge") { table, now in try table.purge(now: now) }.get() }
        self.purged(purged)
        return purged
    }

    /// Starts the minute's purge now (for tests: the timer starts it every minute).
    func startPurge() {
        thread.async { [weak self] in self?.startPurgePass() }
    }

    /// The minute's purge (on `thread`): one chunk of the table a turn of the thread
    /// (`KeyValueTable.purgeChunk`), so that operations queued meanwhile run between chunks
    /// instead of after the whole table; the audit trail's expired records at the end. A pass
    /// still running when the timer fires again goes on alone.
    private func startPurgePass() {
        guard purgePass == nil else { return }
        purgePass = (next: "", now: clock(), deleted: 0)
        purgeNextChunk()
    }

    private func purgeNextChunk() {
        guard var pass = purgePass, let table else { purgePass = nil; return }
        purgePass = nil
        // A failed purge loses nothing: expired rows are ignored by every read anyway, and the
        // next minute's pass starts over.
        do {
            let chunk = try table.purgeChunk(from: pass.next, now: pass.now)
            pass.deleted += chunk.deleted
            if let next = chunk.next {
                pass.next = next
                purgePass = pass
                thread.async { [weak self] in self?.purgeNextChunk() }
                return
            }
            pass.deleted += try table.purgeAudit(now: pass.now)
        } catch {}
        purged(pass.deleted)
    }

    /// After a purge: a large one leaves a large log file behind, truncated off the store's thread.
    private func purged(_ rows: Int) {
        if rows >= Self.truncateAfterPurgedRows { checkpointer.truncate() }
    }

    // MARK: Store

    public func create(_ key: String, value: [UInt8], ttlMs: Int, on executor: CallbackExecutor,
                       _ done: @escaping (StoreResult<Bool>) -> Void) {
        run("create", ttlMs: ttlMs, executor, done) { table, now, expiresAt in
            try table.create(key, value: value, expiresAt: expiresAt, now: now)
        }
    }

    public func writeAll(_ writes: [ConditionalWrite], moving counter: CounterMove, on executor: CallbackExecutor,
                         _ done: @escaping (StoreResult<WriteOutcome>) -> Void) {
        if let problem = ConditionalWrite.problem(in: writes) {
            let reply = Completion(on: executor, done)
            thread.async { reply(.failure(.failed(problem))) }
            return
        }
        run("writeAll", executor, done) { table, now in try table.writeAll(writes, moving: counter, now: now) }
    }

    public func put(_ key: String, value: [UInt8], ttlMs: Int, on executor: CallbackExecutor,
                    _ done: @escaping (StoreResult<Void>) -> Void) {
        run("put", ttlMs: ttlMs, executor, done) { table, _, expiresAt in
            try table.put(key, value: value, expiresAt: expiresAt)
        }
    }

    public func get(_ key: String, on executor: CallbackExecutor, _ done: @escaping (StoreResult<[UInt8]?>) -> Void) {
        run("get", executor, done) { table, now in try table.get(key, now: now) }
    }

    public func touch(_ key: String, ttlMs: Int, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Bool>) -> Void) {
        run("touch", ttlMs: ttlMs, executor, done) { table, now, expiresAt in
            try table.touch(key, expiresAt: expiresAt, now: now)
        }
    }

    public func delete(_ key: String, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Bool>) -> Void) {
        run("delete", executor, done) { table, now in try table.delete(key, now: now) }
    }

    public func take(_ key: String, on executor: CallbackExecutor, _ done: @escaping (StoreResult<[UInt8]?>) -> Void) {
        run("take", executor, done) { table, now in try table.take(key, now: now) }
    }

    public func increment(_ key: String, ttlMs: Int, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Int>) -> Void) {
        run("increment", ttlMs: ttlMs, executor, done) { table, now, expiresAt in
            try table.increment(key, expiresAt: expiresAt, now: now)
        }
    }

    public func compareAndSwap(_ key: String, expected: [UInt8], new: [UInt8]?, ttlMs: Int?, audit: AuditAppend?,
                               on executor: CallbackExecutor, _ done: @escaping (StoreResult<Bool>) -> Void) {
        run("compareAndSwap", ttlMsOrKeep: ttlMs, executor, done) { table, now, expiresAt in
            try table.compareAndSwap(key, expected: expected, new: new, expiresAt: expiresAt, now: now, audit: audit)
        }
    }

    public func compareAndSwap(_ key: String, expected: [UInt8], new: [UInt8]?, ttlMs: Int?, audit: AuditAppend?,
                               moving counter: CounterMove, on executor: CallbackExecutor,
                               _ done: @escaping (StoreResult<Int?>) -> Void) {
        run("compareAndSwap", ttlMsOrKeep: ttlMs, executor, done) { table, now, expiresAt in
            try table.compareAndSwap(key, expected: expected, new: new, expiresAt: expiresAt, now: now, audit: audit, moving: counter)
        }
    }

    public func takeIf(_ key: String, fields: [String: String], audit: AuditAppend?, on executor: CallbackExecutor,
                       _ done: @escaping (StoreResult<ConditionalTake>) -> Void) {
        run("takeIf", executor, done) { table, now in try table.takeIf(key, fields: fields, now: now, audit: audit) }
    }

    public func appendAudit(_ entry: [UInt8], foundKey: String?, retentionMs: Int, on executor: CallbackExecutor,
                            _ done: @escaping (StoreResult<Void>) -> Void) {
        run("appendAudit", executor, done) { table, now in
            try table.appendAudit(entry, foundKey: foundKey, retentionMs: retentionMs, now: now)
        }
    }

    /// The audit records written in [sinceMs, untilMs), oldest first (`txgate audit`), read
    /// through a connection of its own: the file must exist (an export creates nothing).
    public static func auditRecords(path: String, sinceMs: Int64, untilMs: Int64,
                                    _ each: (StoredAuditRecord) throws -> Void) throws {
        guard FileManager.default.fileExists(atPath: path) else {
            throw StoreError.unavailable("sqlite '\(path)': no such file (store.path names the gateway's database)")
        }
        do {
            let db = try SQLiteConnection(path: path)
            defer { db.close() }
            try db.execute("PRAGMA busy_timeout=5000")
            try AuditTable(db).read(sinceMs: sinceMs, untilMs: untilMs, each)
        } catch let error as SQLiteError {
            throw storeError(error, operation: "audit export", path: path)
        }
    }

    public func ping(on executor: CallbackExecutor, _ done: @escaping (StoreResult<Void>) -> Void) {
        run("ping", executor, done) { table, _ in try table.checkAlive() }
    }

    /// One transaction on the store's thread instead of a read and a compare-and-swap.
    public func decrement(_ key: String, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Bool>) -> Void) {
        run("decrement", executor, done) { table, now in try table.decrement(key, now: now) }
    }

    /// One transaction on the store's thread instead of a read and a create or compare-and-swap.
    public func raise(_ key: String, to value: UInt64, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Bool>) -> Void) {
        run("raise", executor, done) { table, now in try table.raise(key, to: value, now: now) }
    }

    /// One transaction: the guards read, then the raise.
    public func raise(_ key: String, to value: UInt64, unlessPresent guards: [String], on executor: CallbackExecutor,
                      _ done: @escaping (StoreResult<GuardedRaise>) -> Void) {
        run("raise", executor, done) { table, now in try table.raise(key, to: value, unlessPresent: guards, now: now) }
    }

    // MARK: Running operations

    /// Runs `body` on the store's thread, then `done` on `executor` once what it wrote is
    /// committed. The queued job holds the store, so an operation finishes even if its caller
    /// lets go of the store. Internal for tests, which run operations of their own.
    func run<T: Sendable>(_ operation: String, _ executor: CallbackExecutor, _ done: @escaping (StoreResult<T>) -> Void,
                                  _ body: @escaping @Sendable (KeyValueTable, Int64) throws -> T) {
        let reply = Completion(on: executor, done)
        enqueue(Job { [self] in
            let result = perform(operation, body)
            if case .failure = result { return Ran(failed: true) { _ in reply(result) } }
            return Ran(failed: false) { lost in reply(lost.map { .failure($0) } ?? result) }
        })
    }

    // MARK: Group commit

    /// An operation waiting for the thread. Run (on the thread), it says whether it failed, and
    /// how to answer once its batch is committed or lost.
    private struct Job: @unchecked Sendable {
        // @unchecked Sendable: made on any thread, then only run once, on the thread.
        let run: () -> Ran
    }

    private struct Ran {
        let failed: Bool
        /// Answers the caller: with the operation's own result, or with why the batch that
        /// carried it was not committed.
        let reply: (StoreError?) -> Void
    }

    /// Holds the thread until the returned closure is called (for tests: operations queued
    /// meanwhile run as one batch).
    func hold() -> @Sendable () -> Void {
        let held = DispatchSemaphore(value: 0)
        thread.async { held.wait() }
        return { held.signal() }
    }

    private func enqueue(_ job: Job) {
        let start = waiting.withLock { w in
            w.jobs.append(job)
            if w.draining { return false }
            w.draining = true
            return true
        }
        if start { thread.async { self.drain() } }
    }

    /// On the thread: runs what is waiting, up to `maxBatch` operations in one commit, and
    /// gives itself to the thread again while more waits (after any other block given
    /// meanwhile: a purge, a checkpoint's last step).
    private func drain() {
        runWaiting()
        let more = waiting.withLock { w in
            if w.jobs.isEmpty { w.draining = false }
            return w.draining
        }
        if more { thread.async { self.drain() } }
    }

    /// On the thread: runs up to `maxBatch` of the operations waiting; says whether there were any.
    @discardableResult
    private func runWaiting() -> Bool {
        var jobs: [Job] = []
        waiting.withLock { w in
            swap(&jobs, &w.jobs)
            if jobs.count > maxBatch {
                w.jobs = Array(jobs[maxBatch...])
                jobs.removeLast(jobs.count - maxBatch)
            }
        }
        runBatch(jobs)
        return !jobs.isEmpty
    }

    private func runBatch(_ jobs: [Job]) {
        guard jobs.count > 1, let table else {
            // One operation is its own transaction (or a statement that commits itself).
            for job in jobs { job.run().reply(nil) }
            return
        }
        var committed: [Ran] = []
        committed.reserveCapacity(jobs.count)
        var failed: [Ran] = []
        do {
            try table.batch { batch in
                for job in jobs {
                    try batch.run {
                        let ran = job.run()
                        if ran.failed { failed.append(ran) } else { committed.append(ran) }
                        return ran.failed
                    }
                }
            }
        } catch {
            // Nothing the batch wrote was kept: what had succeeded in it fails now, with why;
            // what had not run yet runs one by one.
            let lost = batchError(error, jobs: jobs.count)
            for ran in committed { ran.reply(lost) }
            for ran in failed { ran.reply(nil) }
            for job in jobs.dropFirst(committed.count + failed.count) { job.run().reply(nil) }
            return
        }
        for ran in failed { ran.reply(nil) }
        for ran in committed { ran.reply(nil) }
    }

    private func batchError(_ error: Error, jobs: Int) -> StoreError {
        let operation = "commit of \(jobs) operations"
        switch error {
        case let error as SQLiteError: return Self.storeError(error, operation: operation, path: path)
        case is KeyValueTable.Lost:
            return .unavailable("sqlite '\(path)': \(operation): SQLite rolled the transaction back after an error")
        default: return .failed("sqlite '\(path)': \(operation): \(error)")
        }
    }

    /// As `run`, for operations that set an expiry: `ttlMs` must be positive.
    private func run<T: Sendable>(_ operation: String, ttlMs: Int, _ executor: CallbackExecutor,
                                  _ done: @escaping (StoreResult<T>) -> Void,
                                  _ body: @escaping @Sendable (KeyValueTable, Int64, Int64) throws -> T) {
        guard ttlMs > 0 else {
            let reply = Completion(on: executor, done)
            thread.async { reply(.failure(.failed("\(operation): ttlMs must be more than 0, got \(ttlMs)"))) }
            return
        }
        run(operation, executor, done) { table, now in try body(table, now, KeyValueTable.expiry(now: now, ttlMs: ttlMs)) }
    }

    /// As `run(ttlMs:)` for a `ttlMs` that may be nil (an operation that then keeps the key's
    /// expiry: `expiresAt` nil).
    private func run<T: Sendable>(_ operation: String, ttlMsOrKeep ttlMs: Int?, _ executor: CallbackExecutor,
                                  _ done: @escaping (StoreResult<T>) -> Void,
                                  _ body: @escaping @Sendable (KeyValueTable, Int64, Int64?) throws -> T) {
        guard let ttlMs else {
            run(operation, executor, done) { table, now in try body(table, now, nil) }
            return
        }
        run(operation, ttlMs: ttlMs, executor, done) { table, now, expiresAt in try body(table, now, expiresAt) }
    }

    /// Must be called on the thread. The clock is read here, when the operation runs.
    private func perform<T>(_ operation: String, _ body: (KeyValueTable, Int64) throws -> T) -> StoreResult<T> {
        guard let table else { return .failure(.unavailable("sqlite '\(path)': \(operation): the store is closed")) }
        do {
            return .success(try body(table, clock()))
        } catch let error as StoreError {
            return .failure(error)
        } catch let error as SQLiteError {
            return .failure(Self.storeError(error, operation: operation, path: path))
        } catch {
            return .failure(.failed("sqlite '\(path)': \(operation): \(error)"))
        }
    }

    /// The disk or the file being gone is the store being unavailable (requests fail closed);
    /// anything else is a failure of this one operation.
    static func storeError(_ error: SQLiteError, operation: String, path: String) -> StoreError {
        let message = "sqlite '\(path)': \(operation): \(error.message)"
        switch error.primaryCode {
        case SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN: return .unavailable(message)
        default: return .failed(message)
        }
    }

    /// The wall clock in epoch milliseconds: the default clock.
    @Sendable public static func wallClockMs() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)) }

    /// `mkdir -p` for the file's folder, with errors that say which folder and why.
    /// The database holds sessions, transactions and code hashes: only the gateway's user may
    /// read it. The file is created 0600 before SQLite opens it (SQLite gives its `-wal` and
    /// `-shm` files the database's mode), and files left more open by an older version are
    /// tightened.
    private static func restrictToOwner(_ path: String) throws {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw ConfigError(path: "store.path", message: "cannot open '\(path)': \(String(cString: strerror(errno)))")
        }
        let tightened = fchmod(fd, 0o600) == 0
        Glibc.close(fd)
        guard tightened else {
            throw ConfigError(path: "store.path", message: "cannot make '\(path)' private (chmod 600): \(String(cString: strerror(errno)))")
        }
        for suffix in ["-wal", "-shm"] where FileManager.default.fileExists(atPath: path + suffix) {
            _ = chmod(path + suffix, 0o600)
        }
    }

    private static func createFolder(of path: String) throws {
        let folder = (path as NSString).deletingLastPathComponent
        guard !folder.isEmpty else { return }
        func fail(_ why: String) -> ConfigError {
            ConfigError(path: "store.path", message: "cannot open '\(path)': \(why)")
        }
        func make(_ dir: String) throws {
            var isFolder: ObjCBool = false
            if FileManager.default.fileExists(atPath: dir, isDirectory: &isFolder) {
                if isFolder.boolValue { return }
                throw fail("'\(dir)' is not a folder")
            }
            let parent = (dir as NSString).deletingLastPathComponent
            if !parent.isEmpty && parent != dir { try make(parent) }
            if mkdir(dir, 0o755) != 0 && errno != EEXIST {
                throw fail("cannot create folder '\(dir)': \(String(cString: strerror(errno)))")
            }
        }
        try make(folder)
    }
}
