import EventHTTP
import Foundation
import Testing
import TestSupport
import TxGateCore
@testable import TxGateRedis

/// Issue 26 item 3 on Redis: two gateways (two stores, four loops) on one Redis, racing
/// sign-ins with one passkey's counter: exactly one is recorded; a credential is registered once.
@Suite struct RedisPasskeyStoreTests {
    @Test func acrossTwoGatewaysACounterMovesOnceAndACredentialIsRegisteredOnce() async throws {
        let redis = try RedisServer.start()
        defer { redis.kill() }
        let loops = RunningLoops(4)
        let a = makeStore(redis.storeURL, on: Array(loops.loops[0..<2]))
        let b = makeStore(redis.storeURL, on: Array(loops.loops[2..<4]))
        defer { loops.stop(detaching: [a, b]) }
        func passkeys(_ loop: EventLoop) -> PasskeyStore {
            PasskeyStore(store: loops.loops.firstIndex { $0 === loop }! < 2 ? a : b, executor: loop)
        }
        let key = Passkey(credentialId: Array(repeating: 7, count: 32), publicKey: [1], signCount: 1, backupEligible: false,
                          userHandle: Array("h".utf8), name: "k", createdS: 1, attestation: "none")
        let adds = await concurrently(10, loops: loops.loops) { i, loop, done in
            passkeys(loop).add(key, for: i % 2 == 0 ? "demo" : "other", limit: 5, done)
        }
        #expect(try adds.map { try $0.get() }.filter { $0 == .added }.count == 1)
        let owner = try #require(try await call(on: loops.loops[0]) { passkeys(loops.loops[0]).owner(of: key.credentialId, $1) }.get())
        for round in 0..<3 {
            let counter = UInt32(10 + round)
            let results = await concurrently(20, loops: loops.loops) { _, loop, done in
                passkeys(loop).recordUse(of: key.credentialId, by: owner, signCount: counter, nowS: 5, done)
            }
            let outcomes = try results.map { try $0.get() }
            #expect(outcomes.filter { $0 == .recorded }.count == 1, "round \(round): \(outcomes)")
        }
    }
}
