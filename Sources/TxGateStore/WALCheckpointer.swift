import CSQLite
import Dispatch
import Synchronization

/// Copies the write-ahead log back into the database file on a thread of its own, so that no
/// store operation waits for it.
///
/// SQLite's automatic checkpoint runs inside the commit that crosses its threshold (1000 pages):
/// that one operation then copies the log and syncs the file, and every request queued behind
/// it on the store's queue waits (the step-up cycle's p99 on SQLite was 2 to 3 times its p90).
/// Here the store's connection turns automatic checkpoints off; its WAL hook, told the log's
/// size after each commit, hands a checkpoint to this queue, on a second connection, once the
/// log passes the same threshold (`SQLiteConnection.checkpoint`: writers go on during the bulk
/// of it and wait only for the last few pages). A checkpoint that cannot finish (a reader in
/// another process) loses nothing and is tried again after a later commit.
final class WALCheckpointer: @unchecked Sendable {
    /// SQLite's own `wal_autocheckpoint` default.
    static let thresholdPages: Int32 = 1000
    private let queue = DispatchQueue(label: "txgate.store.sqlite.checkpoint")
    // @unchecked Sendable: `connection` is only touched on `queue`.
    private var connection: SQLiteConnection?
    private let pending = Atomic<Bool>(false)
    /// Checkpoints run (for tests).
    let completed = Atomic<Int>(0)

    init(path: String) throws {
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

    /// After a commit on the store's connection (on the store's queue): the log has `pages` pages.
    func committed(pages: Int32) {
        guard pages >= Self.thresholdPages,
              pending.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        queue.async { [self] in
            defer { pending.store(false, ordering: .releasing) }
            if (try? connection?.checkpoint()) != nil { completed.add(1, ordering: .relaxed) }
        }
    }

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

    /// Copies the log into the database in two steps. First without waiting for anyone (the
    /// bulk of the pages and the file's sync, while the store goes on writing); then, holding
    /// off writers (`RESTART`), what they added meanwhile, after which the next write starts the
    /// log over instead of growing it. Behind a writer that never pauses, passive checkpoints
    /// alone never catch up, and the log grows without end.
    func checkpoint() throws {
        try withHandle { db in
            for mode in [SQLITE_CHECKPOINT_PASSIVE, SQLITE_CHECKPOINT_RESTART] {
                let rc = sqlite3_wal_checkpoint_v2(db, nil, mode, nil, nil)
                guard rc == SQLITE_OK else { throw error(rc) }
            }
        }
    }
}
