import EventHTTP
import Synchronization
import TxGateCore

/// Sessions read from the store in the last second, by token, so that a client's requests in
/// quick succession read the store once per second rather than once per request (a SQLite
/// query on the store's thread, or a Redis round trip).
///
/// One table per event loop (`Shard`), each behind a lock of its own that only its loop takes
/// on the request path: one table for every worker put one lock and the cached sessions'
/// objects (their strings, retained by every request) on cache lines that every core wrote.
/// A session used on several workers is read and cached by each of them.
///
/// The bound: a session ended or changed on another instance (a logout, a step-up recorded
/// there, an expiry) can still be seen here for up to `maxAgeNanos` (1 s). On this instance,
/// a logout and a step-up drop the entry at once from every loop's table (`invalidate`),
/// before the store is written and again after.
///
/// The hazard: a store read started on one worker before another worker's logout reached the
/// store answers with the live session after the logout has cleared the cache and answered,
/// and would put it back for a second. So every fill names the `generation` of its table (the
/// number of invalidations so far) read before its store read began, and is refused if any
/// invalidation came since. One counter for all keys rather than a tombstone per key: nothing to
/// keep or to expire, and the only cost is that a read concurrent with some logout or step-up
/// on this instance is not cached (the next request reads the store again). A table is
/// registered before its first read begins, so the invalidation after a logout's store write
/// reaches every table that a read begun before that write could fill.
final class SessionCache: Sendable {
    static let maxAgeNanos: UInt64 = 1_000_000_000
    /// Beyond this many entries in one table, expired ones are dropped; if none are, all are.
    static let maxEntries = 10_000

    /// A reference: a request reads an entry's subject, which the first request made, without
    /// copying the session out of the table.
    final class Entry {
        let session: Session
        let storeKey: String
        let fetchedNanos: UInt64
        /// The wall-clock second of the store read: a clock moved on (tests, a fake clock) ends it too.
        let fetchedSecond: Int
        /// The policies' subject for this session and token, made by the first request that asked
        /// (`Shard.subject`); changed only under its table's lock.
        var subject: Subject?

        init(session: Session, storeKey: String, fetchedNanos: UInt64, fetchedSecond: Int) {
            self.session = session
            self.storeKey = storeKey
            self.fetchedNanos = fetchedNanos
            self.fetchedSecond = fetchedSecond
        }
    }

    /// One loop's table.
    final class Shard: Sendable {
        private struct Table {
            var byToken: [String: Entry] = [:]
            var tokenByKey: [String: String] = [:]
            /// Invalidations so far.
            var generation: UInt64 = 0
        }

        private let table = Mutex(Table())
        /// Keeps the next shard's lock off this one's cache line (they are allocated one after
        /// the other).
        private let padding: (Int, Int, Int, Int, Int, Int, Int, Int) = (0, 0, 0, 0, 0, 0, 0, 0)

        /// The session read for `token` less than a second ago, if any.
        func get(_ token: String, now: Int) -> Session? {
            table.withLock { t in Self.fresh(&t, token, now: now)?.session }
        }

        /// The subject of the session read for `token` less than a second ago, if that session
        /// is within its lifetime (`maxLifetimeS` from its creation): made by `make` for the
        /// entry's first request, the same one after that.
        func subject(_ token: String, now: Int, maxLifetimeS: Int, make: (Session) -> Subject) -> Subject? {
            table.withLock { t in
                guard let e = Self.fresh(&t, token, now: now), e.session.remainingLife(now: now, maxLifetimeS: maxLifetimeS) > 0 else { return nil }
                if let s = e.subject { return s }
                let s = make(e.session)
                e.subject = s
                return s
            }
        }

        private static func fresh(_ t: inout Table, _ token: String, now: Int) -> Entry? {
            guard let e = t.byToken[token] else { return nil }
            guard EventLoop.nowNanos() &- e.fetchedNanos < SessionCache.maxAgeNanos, now >= e.fetchedSecond,
                  now <= e.fetchedSecond + 1 else {
                t.byToken[token] = nil
                t.tokenByKey[e.storeKey] = nil
                return nil
            }
            return e
        }

        /// To take before a store read whose answer may be `put`.
        func generation() -> UInt64 {
            table.withLock { $0.generation }
        }

        /// Keeps what a store read found, unless a session was invalidated since `generation`
        /// (taken before the read began): the read may predate a logout. True if kept.
        @discardableResult
        func put(_ token: String, storeKey: String, _ session: Session, now: Int, readSince generation: UInt64) -> Bool {
            let nanos = EventLoop.nowNanos()
            return table.withLock { t in
                guard t.generation == generation else { return false }
                if t.byToken.count >= SessionCache.maxEntries { Self.prune(&t, nanos: nanos) }
                t.byToken[token] = Entry(session: session, storeKey: storeKey, fetchedNanos: nanos, fetchedSecond: now)
                t.tokenByKey[storeKey] = token
                return true
            }
        }

        fileprivate func invalidate(storeKey: String) {
            table.withLock { t in
                t.generation &+= 1
                guard let token = t.tokenByKey.removeValue(forKey: storeKey) else { return }
                t.byToken[token] = nil
            }
        }

        private static func prune(_ t: inout Table, nanos: UInt64) {
            t.byToken = t.byToken.filter { nanos &- $0.value.fetchedNanos < SessionCache.maxAgeNanos }
            if t.byToken.count >= SessionCache.maxEntries { t.byToken.removeAll() }
            t.tokenByKey = Dictionary(uniqueKeysWithValues: t.byToken.map { ($0.value.storeKey, $0.key) })
        }
    }

    /// Every loop's table, by the loop. Taken when a loop's phases are built, on a lookup that
    /// misses (once a second per session at most) and to invalidate; never on a cache hit.
    private let shards = Mutex([ObjectIdentifier: Shard]())

    /// The table of `loop`, made and registered on first use.
    func shard(for loop: EventLoop) -> Shard {
        shards.withLock { all in
            if let s = all[ObjectIdentifier(loop)] { return s }
            let s = Shard()
            all[ObjectIdentifier(loop)] = s
            return s
        }
    }

    /// Forgets the session stored under `storeKey` (logout, step-up recorded) on every loop, and
    /// refuses every fill from a store read begun before now.
    func invalidate(storeKey: String) {
        for s in shards.withLock({ Array($0.values) }) { s.invalidate(storeKey: storeKey) }
    }
}
