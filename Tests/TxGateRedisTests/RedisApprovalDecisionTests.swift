import EventHTTP
import Foundation
import Testing
import TestSupport
import TxGateCore
@testable import TxGateRedis

/// Issue 27 item 1 on Redis: two gateways (two stores, four loops) on one Redis, 40 approve and
/// deny posts racing for one request: exactly one decision, through the fenced records.
@Suite struct RedisApprovalDecisionTests {
    @Test func acrossTwoGatewaysExactlyOneDecides() async throws {
        let redis = try RedisServer.start()
        defer { redis.kill() }
        let loops = RunningLoops(4)
        let a = makeStore(redis.storeURL, on: Array(loops.loops[0..<2]))
        let b = makeStore(redis.storeURL, on: Array(loops.loops[2..<4]))
        defer { loops.stop(detaching: [a, b]) }
        #expect(a.fenced.kind(of: ApprovalRequest.key("x")) == .record)
        func store(_ loop: EventLoop) -> RedisStore { loops.loops.firstIndex { $0 === loop }! < 2 ? a : b }
        for round in 0..<5 {
            let r = ApprovalRequest.pending(subject: "demo", matter: .stepUp(journey: "Login"), approverJourney: "Login",
                                            nowMs: 1_000, ttlS: 600)
            #expect(try await call(on: loops.loops[0]) { a.create(ApprovalRequest.key(r.id), value: r.encoded, ttlMs: 600_000, on: $0, $1) }.get())
            let results = await concurrently(40, loops: loops.loops) { i, loop, done in
                store(loop).decideApproval(r.id, i % 2 == 0 ? .approved : .denied, by: "demo", nowMs: 2_000, on: loop, done)
            }
            let outcomes = try results.map { try $0.get() }
            let winners = outcomes.compactMap { try? $0.get() }
            #expect(winners.count == 1, "round \(round): \(winners)")
            let decided = try #require(winners.first?.state)
            #expect(outcomes.filter { $0 == .failure(.alreadyDecided(decided)) }.count == 39, "round \(round)")
        }
    }
}
