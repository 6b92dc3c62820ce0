import EventHTTP
import Foundation
import Logging
import Synchronization
import Testing
import TxGateCore
import TxGateRedis
import TestSupport

/// Issue 22 item 3: a Redis that may evict keys silently re-enables spent codes and lifts
/// lockouts. Its maxmemory-policy is checked at start (refused unless store.allowEviction) and
/// on every reconnect (a warning and a gauge); a write refused for memory is logged once per
/// episode. Real redis-server processes.
@Suite(.serialized) struct RedisEvictionTests {
    static func store(_ redis: RedisServer, allowEviction: Bool = false, logger: Logger? = nil,
                      onPolicy: (@Sendable (Bool) -> Void)? = nil) -> RedisStore {
        var quiet = Logger(label: "test")
        quiet.logLevel = .critical
        return RedisStore(url: redis.storeURL, keyPrefix: "t:", timeoutMs: 500, allowEviction: allowEviction,
                          onEvictionPolicy: onPolicy, logger: logger ?? quiet)
    }

    @Test func anEvictingPolicyRefusesTheStartNamingTheSettingAndTheFix() throws {
        let redis = try RedisServer.start(arguments: ["--maxmemory-policy", "allkeys-lru"])
        defer { redis.kill() }
        do {
            _ = try Self.store(redis).checkEvictionPolicyAtStart()
            Issue.record("a Redis with allkeys-lru was accepted at start")
        } catch {
            let text = error.description
            #expect(text.contains("maxmemory-policy 'allkeys-lru'"), "\(text)")
            #expect(text.contains("maxmemory-policy noeviction") && text.contains("store.allowEviction: true"), "the fix: \(text)")
            #expect(text.contains("127.0.0.1:\(redis.port)"), "the place: \(text)")
        }
        // Allowed: a warning to log, no refusal.
        let warning = try Self.store(redis, allowEviction: true).checkEvictionPolicyAtStart()
        #expect(warning?.contains("allkeys-lru") == true, "\(warning ?? "nil")")
    }

    @Test func noevictionPassesAndCONFIGRenamedFallsBackToINFO() throws {
        let safe = try RedisServer.start(arguments: ["--maxmemory-policy", "noeviction"])
        defer { safe.kill() }
        #expect(try Self.store(safe).checkEvictionPolicyAtStart() == nil)

        // Managed Redis often renames or disables CONFIG: INFO memory still tells.
        let renamed = try RedisServer.start(arguments: ["--maxmemory-policy", "volatile-lru", "--rename-command", "CONFIG", ""])
        defer { renamed.kill() }
        #expect(throws: RedisStartError.self) { try Self.store(renamed).checkEvictionPolicyAtStart() }
    }

    @Test(.timeLimit(.minutes(1)))
    func aPolicyChangedAtRuntimeIsNoticedOnReconnect() async throws {
        let redis = try RedisServer.start()
        let seen = Mutex<[Bool]>([])
        let logs = CapturedLogs()
        let loops = RunningLoops(1)
        let store = Self.store(redis, logger: logs.logger) { ok in seen.withLock { $0.append(ok) } }
        store.attach(to: loops.loops[0])
        defer {
            loops.stop(detaching: [store])
            redis.kill()
        }
        try await waitServing(store, on: loops.loops[0])
        #expect(seen.withLock { $0 } == [true])

        _ = try redis.command(["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"])
        _ = try redis.command(["CLIENT", "KILL", "TYPE", "normal"])
        #expect(Timing.poll(timeout: 10) { seen.withLock { $0.last } == false }, "the reconnect did not notice: \(seen.withLock { $0 })")
        try await waitServing(store, on: loops.loops[0])
        #expect(logs.matching("allkeys-lru").count == 1, "one warning for the change: \(logs.matching("maxmemory"))")
        // Still serving: once running, it is a warning, not an outage.
        try await call(on: loops.loops[0]) { store.put("k", value: [1], ttlMs: 10_000, on: $0, $1) }.get()
    }

    @Test(.timeLimit(.minutes(1)))
    func aWriteRefusedForMemoryIsLoggedOncePerEpisode() async throws {
        let redis = try RedisServer.start(arguments: ["--maxmemory-policy", "noeviction"])
        let logs = CapturedLogs()
        let loops = RunningLoops(1)
        let loop = loops.loops[0]
        let store = Self.store(redis, logger: logs.logger)
        store.attach(to: loop)
        defer {
            loops.stop(detaching: [store])
            redis.kill()
        }
        try await waitServing(store, on: loop)
        let value = [UInt8](repeating: 7, count: 1000)

        func episode() async throws {
            // A limit just below what Redis holds now: every write is refused for memory.
            let used = Int(try redis.info("memory")["used_memory"] ?? "") ?? 0
            _ = try redis.command(["CONFIG", "SET", "maxmemory", "\(max(used - 100_000, 1))"])
            for i in 0..<50 {
                let r = await call(on: loop) { store.put("k\(i)", value: value, ttlMs: 60_000, on: $0, $1) }
                #expect(r.isUnavailable, "a write over maxmemory: \(r)")
            }
            _ = try redis.command(["CONFIG", "SET", "maxmemory", "0"])
            try await call(on: loop) { store.put("after", value: value, ttlMs: 60_000, on: $0, $1) }.get()
        }
        try await episode()
        #expect(logs.matching("out of memory").count == 2, "one line when it starts, one when it ends: \(logs.matching("memory"))")
        try await episode()
        #expect(logs.matching("refuses writes: out of memory").count == 2, "one per episode: \(logs.matching("memory"))")
        #expect(logs.matching("accepts writes again").count == 2)
    }
}
