import CSQLite
import Dispatch
import Glibc
import TxGateCore
import Synchronization

/// Copies the write-ahead log back into the database file mostly on a thread of its own, so
/// that store operations do not wait for it.
///
/// SQLite's automatic checkpoint runs inside the commit that crosses its threshold (1000 pages):
/// that one operation then copies the whole log and syncs the file, and every request queued
/// behind it on the store's thread waits (the step-up cycle's p99 on SQLite was 2 to 3 times its
/// p90). Here the store's connection turns automatic checkpoints off; its WAL hook, told the
/// log's size after each commit, starts a checkpoint once the log passes the same threshold:
/// - a passive checkpoint on this queue, on a second connection, copies the bulk of the log and
///   syncs the file while the store goes on writing;
/// - then `finish` (the store's own connection, on the store's thread, between two operations)
///   checkpoints the few pages written meanwhile, so that the log is wholly copied and the next
///   write starts it over. Passive checkpoints alone, beside a writer that never pauses, never
///   catch up, and the log grows without end; a blocking (RESTART) one from here would hold every
///   writer for its busy waits.
/// A checkpoint that cannot finish (a reader in another process) loses nothing and is tried again
/// after a later commit.
final class WALCheckpointer: @unchecked Sendable {
    /// SQLite's own `wal_autocheckpoint` default.
    static let thresholdPages: Int32 = 1000
    private let queue = DispatchQueue(label: "txgate.store.sqlite.checkpoint")
    // @unchecked Sendable: `connection` is only touched on `queue`.
    private var connection: SQLiteConnection?
    /// Runs the last step on the store's thread, then calls its argument.
    private let finish: @Sendable (@escaping @Sendable () -> Void) -> Void
    private let pending = Atomic<Bool>(false)
    /// Checkpoints run to the end (for tests).
    let completed = Atomic<Int>(0)
    /// Logs truncated (for tests).
    let truncated = Atomic<Int>(0)
    /// Commits on the store's connection (for tests: operations queued together share one).
    let commits = Atomic<Int>(0)

    init(path: String, finish: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void) throws {
        self.finish = finish
        connection = try queue.sync {
            let c = try SQLiteConnection(path: path)
            try c.execute("PRAGMA busy_timeout=5000")
            // Reads the file's header: a connection that has not seen the file in WAL mode
            // takes a checkpoint for a no-op.
            try c.execute("PRAGMA journal_mode=WAL")
            return c
        }
    }

    /// Takes over `store`'s checkpoints. `store` must be closed before this checkpointer goes.
    func watch(_ store: SQLiteConnection) throws {
        try store.execute("PRAGMA wal_autocheckpoint=0")
        store.onWALCommit(self)
    }

    /// After a commit on the store's connection (on the store's thread): the log has `pages` pages.
    func committed(pages: Int32) {
        commits.add(1, ordering: .relaxed)
        guard pages >= Self.thresholdPages,
              pending.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        queue.async { [self] in
            CurrentThread.unpin()
            _ = try? connection?.checkpointPassive()
            finish { [self] in
                completed.add(1, ordering: .relaxed)
                pending.store(false, ordering: .releasing)
            }
        }
    }

    /// Copies the whole log into the database and truncates the log file to zero bytes, on this
    /// checkpointer's queue and connection: after a large purge, whose one transaction grew the log
    /// by every page it touched. A checkpoint resets the log for reuse but never shrinks the file,
    /// so without this the disk keeps the purge's size for good (13.5 MB seen, issue 22).
    ///
    /// The passive pass first copies the bulk without holding anyone; the TRUNCATE pass then waits
    /// (busy_timeout) for the writer of the moment and holds the write lock while it copies the
    /// rest and truncates, so store operations queued meanwhile wait for that short last step, not
    /// for the whole copy. A log that cannot be truncated now (a reader in another process) is
    /// left as it is, and tried again after the next large purge.
    func truncate() {
        queue.async { [self] in
            CurrentThread.unpin()
            guard let connection else { return }
            _ = try? connection.checkpointPassive()
            // Busy at once, without the busy handler, while another connection checkpoints: the
            // store's own last step, started by the purge's commit, usually is. Tried again a
            // few times; this queue waits, nothing else does.
            for attempt in 1...Self.truncateAttempts {
                do {
                    try connection.checkpointTruncate()
                    truncated.add(1, ordering: .relaxed)
                    return
                } catch let error as SQLiteError where error.primaryCode == SQLITE_BUSY && attempt < Self.truncateAttempts {
                    usleep(Self.truncateRetryMicros)
                } catch {
                    return
                }
            }
        }
    }

    static let truncateAttempts = 20
    static let truncateRetryMicros: UInt32 = 50_000

    func close() {
        queue.sync {
            connection?.close()
            connection = nil
        }
    }
}

extension SQLiteConnection {
    /// Calls `checkpointer.committed(pages:)` after each commit. The checkpointer is not
    /// retained: it must outlive this connection (or this connection's hook).
    func onWALCommit(_ checkpointer: WALCheckpointer) {
        withHandle { db in
            _ = sqlite3_wal_hook(db, { context, _, _, pages in
                Unmanaged<WALCheckpointer>.fromOpaque(context!).takeUnretainedValue().committed(pages: pages)
                return SQLITE_OK
            }, Unmanaged.passUnretained(checkpointer).toOpaque())
        }
    }

    /// Copies as much of the log into the database as it can without waiting for anyone.
    func checkpointPassive() throws {
        try withHandle { db in
            let rc = sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
            guard rc == SQLITE_OK else { throw error(rc) }
        }
    }

    /// Copies the whole log into the database and truncates the log file to zero bytes; waits
    /// (busy_timeout) for writers and for readers of older snapshots. SQLITE_BUSY if they outlast it.
    func checkpointTruncate() throws {
        try withHandle { db in
            let rc = sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_TRUNCATE, nil, nil)
            guard rc == SQLITE_OK else { throw error(rc) }
        }
    }
}

/// A value that crosses to another thread only to be used back on the thread it belongs to (the
/// store's connection, in `WALCheckpointer`'s last step).
struct ThreadConfined<T>: @unchecked Sendable {
    let value: T
}
