import EventHTTP
import Foundation
import Logging
import Testing
import TxGateCore
import TxGateRedis
import TestSupport

/// The store on `redis+sentinel://` against real redis-sentinel processes: the primary is the
/// one the sentinels name, a failover that demotes a live primary is followed, and no sentinel
/// to ask fails closed with every sentinel's answer in the reason.
@Suite(.serialized) struct RedisSentinelTests {
    /// A primary, a replica and three sentinels in one temp folder.
    final class Deployment: @unchecked Sendable {
        let folder: TemporaryDirectory
        let primary: RedisServer
        let replica: RedisServer
        let sentinels: RedisSentinels

        init() throws {
            folder = try TemporaryDirectory(prefix: "txgate-sentinel")
            let primary = try RedisServer.start(in: folder.url)
            let replica = try RedisServer.start(in: folder.url, arguments: ["--replicaof", "127.0.0.1", "\(primary.port)"])
            self.primary = primary
            self.replica = replica
            guard Timing.poll(timeout: 10, { (try? replica.info("replication"))?["master_link_status"] == "up" }) else {
                throw HarnessError("the replica never synced")
            }
            sentinels = try RedisSentinels.start(in: folder.url, primaryPort: primary.port, replicas: 1)
        }

        var url: RedisURL { get throws { try RedisURL(parsing: sentinels.url) } }

        func close() {
            sentinels.kill()
            replica.kill()
            primary.kill()
            folder.remove()
        }
    }

    // Generous: the whole suite starves these real-server tests of CPU on a 2-core machine.
    @Test(.timeLimit(.minutes(3)))
    func aManualFailoverThatDemotesALivePrimaryIsFollowed() async throws {
        let set = try Deployment()
        defer { set.close() }
        let loops = RunningLoops(2)
        let store = makeStore(try set.url, timeoutMs: 1000, on: loops.loops)
        defer { loops.stop(detaching: [store]) }
        for (i, loop) in loops.loops.enumerated() {
            try await call(on: loop) { store.put("before-\(i)", value: [1], ttlMs: 60_000, on: $0, $1) }.get()
        }
        #expect(try set.primary.command(["EXISTS", "t:before-0", "t:before-1"]) == .integer(2), "written on the primary the sentinels name")

        // A graceful failover: the old primary stays up and becomes a replica of the new one.
        #expect(try set.primary.command(["WAIT", "1", "5000"]) == .integer(1))
        let c = try RESPClient(port: set.sentinels.ports[1], timeout: 5)
        #expect(try c.command(["SENTINEL", "FAILOVER", RedisSentinels.masterName]) == .simple("OK"))
        c.close()
        #expect(Timing.poll(timeout: 20, interval: 0.05) { (try? set.replica.info("replication"))?["role"] == "master" },
                "the replica was not promoted:\n\(set.sentinels.logs)")
        // The sentinels turn the old primary into a replica about 8 s later (their publish
        // period times four); do now what they would do then.
        #expect(try set.primary.command(["REPLICAOF", "127.0.0.1", "\(set.replica.port)"]) == .simple("OK"))

        // Every worker's connection ends up on the new primary (a write refused with READONLY
        // by the demoted one reconnects; it is never reported as done).
        for (i, loop) in loops.loops.enumerated() {
            try await eventually(45, "worker \(i) writes to the new primary") {
                let r = await call(on: loop) { store.put("after-\(i)", value: [2], ttlMs: 60_000, on: $0, $1) }
                return (try? r.get()) != nil
            }
        }
        #expect(try set.replica.command(["EXISTS", "t:after-0", "t:after-1"]) == .integer(2))
        // The fence moved on for the new server.
        guard case .array(let fence) = try set.replica.command(["HMGET", "t:fence", "run_id", "epoch"]),
              fence.count == 2, case .bulk(let runId) = fence[0], case .bulk(let epoch) = fence[1] else {
            Issue.record("no fence record on the new primary")
            return
        }
        #expect(String(decoding: runId, as: UTF8.self) == (try set.replica.info("server"))["run_id"])
        #expect((Int(String(decoding: epoch, as: UTF8.self)) ?? 0) >= 2)
    }

    @Test func noSentinelToAskFailsClosedNamingEachSentinel() async throws {
        let ports = [try Ports.free(), try Ports.free()]
        let url = try RedisURL(parsing: "redis+sentinel://127.0.0.1:\(ports[0]),127.0.0.1:\(ports[1])/nowhere")
        let loops = RunningLoops(1)
        let store = makeStore(url, on: loops.loops)
        defer { loops.stop(detaching: [store]) }
        let started = Date()
        let r = await call(on: loops.loops[0]) { store.put("k", value: [1], ttlMs: 1000, on: $0, $1) }
        #expect(r.isUnavailable, "\(r)")
        // Within the store's 2 s timeout, not hanging; the margin is for a loaded two-core machine,
        // where an async test waits seconds for a cooperative thread (4.5 s seen in a full run).
        #expect(Date().timeIntervalSince(started) < 10)
        let reason = "\(r)"
        #expect(reason.contains("no sentinel named the primary of 'nowhere'"), "\(reason)")
        for p in ports { #expect(reason.contains("127.0.0.1:\(p): "), "\(reason)") }
    }

    @Test(.timeLimit(.minutes(1)))
    func sentinelsThatDoNotKnowTheMasterNameFailClosed() async throws {
        let folder = try TemporaryDirectory(prefix: "txgate-sentinel")
        let primary = try RedisServer.start(in: folder.url)
        let sentinel = try RedisSentinels.start(in: folder.url, primaryPort: primary.port, replicas: 0, count: 1)
        defer { sentinel.kill(); primary.kill(); folder.remove() }
        let url = try RedisURL(parsing: "redis+sentinel://127.0.0.1:\(sentinel.ports[0])/not-monitored")
        let loops = RunningLoops(1)
        let store = makeStore(url, on: loops.loops)
        defer { loops.stop(detaching: [store]) }
        let r = await call(on: loops.loops[0]) { store.get("k", on: $0, $1) }
        #expect(r.isUnavailable, "\(r)")
        #expect("\(r)".contains("127.0.0.1:\(sentinel.ports[0]): does not monitor a master named 'not-monitored'"), "\(r)")
    }

    @Test(.timeLimit(.minutes(1)))
    func theStartUpEvictionCheckAsksTheSentinelsForThePrimary() throws {
        let folder = try TemporaryDirectory(prefix: "txgate-sentinel")
        let primary = try RedisServer.start(in: folder.url, arguments: ["--maxmemory-policy", "allkeys-lru"])
        let sentinel = try RedisSentinels.start(in: folder.url, primaryPort: primary.port, replicas: 0, count: 1)
        defer { sentinel.kill(); primary.kill(); folder.remove() }
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let store = RedisStore(url: try RedisURL(parsing: sentinel.url), keyPrefix: "t:", timeoutMs: 1000, logger: logger)
        #expect(throws: RedisStartError.self) { _ = try store.checkEvictionPolicyAtStart() }
        do {
            _ = try store.checkEvictionPolicyAtStart()
        } catch {
            #expect(error.description.contains("maxmemory-policy 'allkeys-lru'"), "\(error)")
        }
        #expect(try primary.command(["CONFIG", "SET", "maxmemory-policy", "noeviction"]) == .simple("OK"))
        #expect(try store.checkEvictionPolicyAtStart() == nil)
        // No sentinel to ask: not an error at start (the gateway fails closed until one answers), a warning.
        sentinel.kill()
        let warning = try store.checkEvictionPolicyAtStart()
        #expect(warning?.contains("no sentinel named the primary of '\(RedisSentinels.masterName)'") == true, "\(String(describing: warning))")
    }
}
