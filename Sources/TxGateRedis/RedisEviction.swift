import EventHTTP
import Foundation
import Logging
import Synchronization

/// Redis's `maxmemory-policy`, checked at start and on every (re)connect.
///
/// Any policy but `noeviction` lets Redis delete keys under memory pressure, silently: a used
/// one-time code's marker, a lockout, a held approval, even the fence record. A deleted marker
/// re-enables the code, a deleted lockout lifts it. With `noeviction` Redis refuses the write
/// instead (an OOM error), which fails closed. So another policy refuses the start unless
/// `store.allowEviction` is set, and while running (an operator's CONFIG SET, a failover to a
/// differently configured server) it is logged at each change and shown by a gauge.
final class EvictionWatch: Sendable {
    let allowed: Bool
    private let onPolicy: (@Sendable (Bool) -> Void)?
    /// The policy last reported, so that every worker's reconnect does not log it again.
    private let reported = Mutex<String?>(nil)
    /// Whether Redis is refusing writes for memory now (an OOM episode), and since when.
    private let outOfMemory = Mutex<(sinceNanos: UInt64, refused: Int)?>(nil)
    /// `outOfMemory != nil`, read without the lock on every successful write.
    private let episodeOpen = Atomic<Bool>(false)

    init(allowed: Bool, onPolicy: (@Sendable (Bool) -> Void)?) {
        self.allowed = allowed
        self.onPolicy = onPolicy
    }

    static func isSafe(_ policy: String) -> Bool { policy == "noeviction" }

    /// The explanation for an unsafe policy, naming the setting and the fix.
    static func problem(_ policy: String, redis: String) -> String {
        "\(redis) has maxmemory-policy '\(policy)': under memory pressure Redis silently deletes keys, which re-enables "
            + "used one-time codes, lifts lockouts and drops sessions and approvals. Set 'maxmemory-policy noeviction' "
            + "(in redis.conf, and CONFIG SET maxmemory-policy noeviction on the running server), or set "
            + "store.allowEviction: true in gateway.json to run with it anyway"
    }

    /// Asks the connection's server for its policy: `CONFIG GET`, or `INFO memory` where
    /// CONFIG is disabled or renamed (managed Redis services often do). Calls back the
    /// policy, or nil when neither says.
    static func read(_ connection: RedisConnection, _ done: @escaping (String?) -> Void) {
        var config = RedisCommand("CONFIG")
        config.add("GET")
        config.add("maxmemory-policy")
        connection.sendSetup(config) { reply in
            if case .array(let items)? = reply, items.count == 2, case .string(let value) = items[1] {
                done(String(decoding: value, as: UTF8.self))
                return
            }
            guard reply != nil else { done(nil); return }
            var info = RedisCommand("INFO")
            info.add("memory")
            connection.sendSetup(info) { reply in
                guard case .string(let text)? = reply else { done(nil); return }
                done(RedisFence.field("maxmemory_policy", in: text))
            }
        }
    }

    /// Records what a (re)connect found: the gauge, and a log line when it changed.
    func observed(_ policy: String?, redis: String, logger: Logger) {
        let safe = policy.map(Self.isSafe)
        onPolicy?(safe ?? false)
        let changed = reported.withLock { last -> Bool in
            defer { last = policy ?? "unknown" }
            return last != (policy ?? "unknown")
        }
        guard changed else { return }
        switch (policy, safe) {
        case (_, true?):
            logger.info("redis maxmemory-policy is noeviction", metadata: ["redis": .string(redis)])
        case (let policy?, _):
            logger.warning("redis may evict keys: \(Self.problem(policy, redis: redis))", metadata: [
                "redis": .string(redis), "maxmemory_policy": .string(policy),
                "allow_eviction": .stringConvertible(allowed),
            ])
        case (nil, _):
            logger.warning("redis does not say its maxmemory-policy (CONFIG GET and INFO memory refused): eviction cannot be ruled out",
                           metadata: ["redis": .string(redis)])
        }
    }

    /// A write refused for memory: logged once per episode, not per request.
    func refusedForMemory(_ command: String, message: String, redis: String, logger: Logger) {
        let first = outOfMemory.withLock { state -> Bool in
            if state == nil {
                state = (EventLoop.nowNanos(), 1)
                episodeOpen.store(true, ordering: .relaxed)
                return true
            }
            state!.refused += 1
            return false
        }
        guard first else { return }
        logger.error("redis refuses writes: out of memory (maxmemory reached); requests that must write state fail with 503 until memory is freed", metadata: [
            "redis": .string(redis), "command": .string(command), "error": .string(message),
        ])
    }

    /// A write succeeded: ends an out-of-memory episode, if one was running.
    func wroteSuccessfully(redis: @autoclosure () -> String, logger: Logger) {
        guard episodeOpen.load(ordering: .relaxed) else { return }
        guard let episode = outOfMemory.withLock({ state -> (sinceNanos: UInt64, refused: Int)? in
            defer { state = nil; episodeOpen.store(false, ordering: .relaxed) }
            return state
        }) else { return }
        logger.notice("redis accepts writes again after running out of memory", metadata: [
            "redis": .string(redis()), "refused_writes": .stringConvertible(episode.refused),
            "episode_ms": .stringConvertible((EventLoop.nowNanos() &- episode.sinceNanos) / 1_000_000),
        ])
    }
}
