import EventHTTP
import Foundation
import Logging
import Testing
import TxGateCore
import TxGateRedis
import TestSupport

/// Issue 22 item 2: a Redis that comes back behind what the gateway saw (restarted from an RDB
/// snapshot, from an AOF that lost its unsynced tail, a lagging replica promoted) must not
/// bring back consumed transactions or spent one-time codes. Real redis-server processes,
/// killed with SIGKILL; the store is the one the gateway uses, with the gateway's key classes.
@Suite(.serialized) struct RedisFenceTests {
    static let count = 20
    /// The user's last accepted TOTP step, as the TOTP node raises it (`Store.raise`, never expiring).
    static let stepKey = TOTPStepRecord.key("demo")
    static let step: UInt64 = 58_000_001

    /// Writes `count` approved transactions, as the journey completion leaves them.
    static func approve(_ store: RedisStore, on loop: EventLoop) async throws -> [(key: String, fields: [String: String])] {
        var out: [(key: String, fields: [String: String])] = []
        for i in 0..<count {
            let (key, value, fields) = approvedTransaction(i)
            try await call(on: loop) { store.put(key, value: value, ttlMs: 600_000, on: $0, $1) }.get()
            out.append((key, fields))
        }
        return out
    }

    /// Consumes each one (the retried request), and spends one TOTP code.
    static func consumeAndSpend(_ store: RedisStore, _ txs: [(key: String, fields: [String: String])], on loop: EventLoop) async throws {
        for tx in txs {
            let r = try await call(on: loop) { store.takeIf(tx.key, fields: tx.fields, on: $0, $1) }.get()
            guard case .taken = r else { Issue.record("\(tx.key) before the crash: \(r)"); return }
        }
        #expect(try await call(on: loop) { store.raise(stepKey, to: step, on: $0, $1) }.get() == true)
        #expect(try await call(on: loop) { store.raise(stepKey, to: step, on: $0, $1) }.get() == false)
    }

    /// After Redis came back behind: nothing consumed runs again, the spent code is not
    /// accepted, and new approvals work.
    static func expectNothingTwice(_ store: RedisStore, _ txs: [(key: String, fields: [String: String])], on loop: EventLoop) async throws {
        var again = 0
        for tx in txs {
            let r = await call(on: loop) { store.takeIf(tx.key, fields: tx.fields, on: $0, $1) }
            if case .success(.taken) = r { again += 1 }
            #expect(try r.get() == .absent, "\(tx.key) after Redis came back: \(r)")
            #expect(try await call(on: loop) { store.get(tx.key, on: $0, $1) }.get() == nil)
        }
        #expect(again == 0, "\(again) of \(txs.count) consumed transactions were consumed a second time")
        let claim = await call(on: loop) { store.raise(stepKey, to: step, on: $0, $1) }
        #expect((try? claim.get()) != true, "the TOTP code spent before the crash was accepted again: \(claim)")
        #expect(claim.isUnavailable, "a TOTP step right after the fence fails closed as unavailable: \(claim)")

        // Liveness: a new approval is consumed once; a code with no lost past is claimable.
        let (key, value, fields) = approvedTransaction(1000)
        try await call(on: loop) { store.put(key, value: value, ttlMs: 600_000, on: $0, $1) }.get()
        #expect(try await call(on: loop) { store.takeIf(key, fields: fields, on: $0, $1) }.get() == .taken(value))
        #expect(try await call(on: loop) { store.takeIf(key, fields: fields, on: $0, $1) }.get() == .absent)
        #expect(try await call(on: loop) { store.create("session-ish", value: [1], ttlMs: 600_000, on: $0, $1) }.get() == true)
    }

    // Generous: the whole suite starves these real-server tests of CPU on a 2-core machine.
    @Test(.timeLimit(.minutes(3)))
    func aRestartFromAnRDBSnapshotBringsNoConsumedTransactionBack() async throws {
        let redis = try RedisServer.start()
        let loops = RunningLoops(2)
        // Two gateways: both reconnect after the restart; the epoch moves on once.
        let stores = [makeStore(redis.storeURL, on: [loops.loops[0]]), makeStore(redis.storeURL, on: [loops.loops[1]])]
        defer {
            loops.stop(detaching: stores)
            redis.kill()
        }
        let (store, loop) = (stores[0], loops.loops[0])
        try await waitServing(stores[1], on: loops.loops[1])
        let txs = try await Self.approve(store, on: loop)
        try redis.snapshot()
        try await Self.consumeAndSpend(store, txs, on: loop)

        redis.kill()
        try redis.start()
        // The scenario is real: the snapshot brought the consumed records back.
        #expect(try redis.command(["EXISTS", "t:" + txs[0].key]) == .integer(1), "the dump did not restore the records")
        try await waitServing(store, on: loop)
        try await waitServing(stores[1], on: loops.loops[1])
        try await Self.expectNothingTwice(store, txs, on: loop)
        #expect(try redis.command(["HGET", "t:fence", "epoch"]) == .bulk(Array("2".utf8)), "one bump for two gateways")
    }

    @Test(.timeLimit(.minutes(1)))
    func aRestartFromAnAOFThatLostItsTailBringsNoConsumedTransactionBack() async throws {
        let redis = try RedisServer.start(arguments: ["--appendonly", "yes", "--appendfsync", "everysec"])
        let loops = RunningLoops(1)
        let store = makeStore(redis.storeURL, on: loops.loops)
        defer {
            loops.stop(detaching: [store])
            redis.kill()
        }
        let loop = loops.loops[0]
        let txs = try await Self.approve(store, on: loop)
        // What had reached the disk when the machine lost power: everything up to here.
        let aof = try Self.incrementalAOF(in: redis.directory)
        #expect(Timing.poll(timeout: 5) { ((try? Self.size(aof)) ?? 0) > 0 })
        let synced = try Self.size(aof)
        try await Self.consumeAndSpend(store, txs, on: loop)
        #expect(try Self.size(aof) > synced, "the consumptions were appended to \(aof.lastPathComponent)")

        redis.kill()
        // appendfsync everysec: a power cut loses up to a second of appended writes, here exactly the consumptions.
        let handle = try FileHandle(forWritingTo: aof)
        try handle.truncate(atOffset: UInt64(synced))
        try handle.close()
        try redis.start()
        #expect(try redis.command(["EXISTS", "t:" + txs[0].key]) == .integer(1), "the AOF did not restore the records")
        try await waitServing(store, on: loop)
        try await Self.expectNothingTwice(store, txs, on: loop)
    }

    @Test(.timeLimit(.minutes(1)))
    func aPromotedReplicaThatLaggedBringsNoConsumedTransactionBack() async throws {
        let primary = try RedisServer.start()
        let replica = try RedisServer.start(arguments: ["--replicaof", "127.0.0.1", "\(primary.port)"])
        let loops = RunningLoops(2)
        let onPrimary = makeStore(primary.storeURL, on: [loops.loops[0]])
        var stores = [onPrimary]
        defer {
            loops.stop(detaching: stores)
            primary.kill()
            replica.kill()
        }
        let loop = loops.loops[0]
        try await waitServing(onPrimary, on: loop)
        let txs = try await Self.approve(onPrimary, on: loop)
        let last = "t:" + txs[txs.count - 1].key
        #expect(Timing.poll(timeout: 10) { (try? replica.command(["EXISTS", last])) == .integer(1) }, "the replica never got the approvals")

        // The replica falls behind (its link to the primary is gone), then the primary commits the consumptions.
        let nowhere = try Ports.free()
        _ = try replica.command(["REPLICAOF", "127.0.0.1", "\(nowhere)"])
        try await Self.consumeAndSpend(onPrimary, txs, on: loop)
        #expect(try primary.command(["EXISTS", last]) == .integer(0))
        #expect(try replica.command(["EXISTS", last]) == .integer(1), "the replica lagged: it still has the approvals")

        // Failover: the primary dies, the replica is promoted, the gateway now points at it.
        primary.kill()
        #expect(try replica.command(["REPLICAOF", "NO", "ONE"]) == .simple("OK"))
        let onReplica = makeStore(replica.storeURL, on: [loops.loops[1]])
        stores.append(onReplica)
        try await waitServing(onReplica, on: loops.loops[1])
        try await Self.expectNothingTwice(onReplica, txs, on: loops.loops[1])
    }

    @Test(.timeLimit(.minutes(1)))
    func aDroppedConnectionToTheSameRedisKeepsApprovals() async throws {
        let fixture = try RedisFixture()
        defer { fixture.close() }
        let (redis, store, loop) = (fixture.redis, fixture.store, fixture.loop)
        let txs = try await Self.approve(store, on: loop)
        _ = try redis.command(["CLIENT", "KILL", "TYPE", "normal"])
        try await waitServing(store, on: loop)
        // Same server, same run_id: no new epoch, nothing refused.
        for tx in txs {
            let r = try await call(on: loop) { store.takeIf(tx.key, fields: tx.fields, on: $0, $1) }.get()
            guard case .taken = r else { Issue.record("\(tx.key) after a reconnect: \(r)"); return }
        }
        #expect(try await call(on: loop) { store.raise(Self.stepKey, to: Self.step + 1, on: $0, $1) }.get() == true)
        #expect(try redis.command(["HGET", "t:fence", "epoch"]) == .bulk(Array("1".utf8)))
    }

    @Test(.timeLimit(.minutes(1)))
    func aFlushedFenceRecordIsFencedAgainBeforeAnythingIsServed() async throws {
        let fixture = try RedisFixture()
        defer { fixture.close() }
        let (redis, store, loop) = (fixture.redis, fixture.store, fixture.loop)
        let txs = try await Self.approve(store, on: loop)
        _ = try redis.command(["DEL", "t:fence"])
        let r = await call(on: loop) { store.takeIf(txs[0].key, fields: txs[0].fields, on: $0, $1) }
        #expect(r.isUnavailable, "without its fence record the store serves nothing fenced: \(r)")
        try await waitServing(store, on: loop)
        for tx in txs {
            #expect(try await call(on: loop) { store.takeIf(tx.key, fields: tx.fields, on: $0, $1) }.get() == .absent)
        }
        #expect(try redis.command(["HGET", "t:fence", "epoch"]) == .bulk(Array("2".utf8)), "the lost record was above epoch 0")
    }

    // MARK: helpers

    static func incrementalAOF(in directory: URL) throws -> URL {
        let dir = directory.appendingPathComponent("appendonlydir")
        var found: URL?
        _ = Timing.poll(timeout: 5) {
            found = (try? FileManager.default.contentsOfDirectory(at: dir, includingPropertiesForKeys: nil))?
                .first { $0.lastPathComponent.hasSuffix(".incr.aof") }
            return found != nil
        }
        guard let found else { throw HarnessError("no *.incr.aof in \(dir.path)") }
        return found
    }

    static func size(_ url: URL) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int) ?? 0
    }
}

/// An approved transaction record, as JourneyCompletion leaves it, and the fields its retry must match.
func approvedTransaction(_ i: Int) -> (key: String, value: [UInt8], fields: [String: String]) {
    let rule = TransactionRule(journey: "J", bindFields: ["/amount"])
    let binding = TransactionBinding(realm: "/", resource: "http://gw/transfer?n=\(i)", method: "POST", subject: "demo",
                                     rule: rule, body: Array(#"{"amount":"10"}"#.utf8))
    var tx = TransactionRecord(txid: "tx\(i)", realm: "/", resource: binding.resource, method: "POST", subject: "demo", journey: "J",
                               bodyDigest: binding.bodyDigest, bound: binding.bound, display: "Pay 10", expires: 1)
    tx.state = .completed
    return (TransactionRecord.key(tx.txid), tx.encoded, TransactionRecord.consumable(by: binding))
}

/// Waits until the store answers again (its connection reconnected and passed the handshake).
func waitServing(_ store: RedisStore, on loop: EventLoop, timeout: Double = 15) async throws {
    let deadline = Timing.now() + timeout
    var last: StoreResult<Void> = .failure(.unavailable("not asked"))
    while Timing.now() < deadline {
        last = await call(on: loop) { store.ping(on: $0, $1) }
        if case .success = last { return }
        try await Task.sleep(nanoseconds: 50_000_000)
    }
    throw HarnessError("the store did not serve again within \(timeout) s: \(last)")
}
