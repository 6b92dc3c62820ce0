import Foundation
import Testing
import TxGateCore
import TestSupport
@testable import TxGateStore

/// Issue 26 item 3 on SQLite: several passkeys per user, one owner per credential ID, counters
/// that never go back however many sign-ins race, and removal.
@Suite struct PasskeyStoreTests {
    let executors: [CallbackExecutor] = (0..<4).map { TestExecutor($0) }

    static func passkey(_ n: UInt8, count: UInt32 = 0) -> Passkey {
        Passkey(credentialId: Array(repeating: n, count: 16), publicKey: [0xA5, n], signCount: count, backupEligible: false,
                userHandle: Array("handle".utf8), name: "key \(n)", createdS: 1_000, attestation: "none")
    }

    @Test func severalPerUserOneOwnerPerCredentialAndALimit() async throws {
        try await withStore { store, _ async throws in
            #expect(try await call { e, d in PasskeyStore(store: store, executor: e).add(Self.passkey(1), for: "demo", limit: 2, d) }.get() == .added)
            #expect(try await call { e, d in PasskeyStore(store: store, executor: e).add(Self.passkey(2), for: "demo", limit: 2, d) }.get() == .added)
            // The same credential again, for anyone: refused; a third for demo: over the limit.
            #expect(try await call { e, d in PasskeyStore(store: store, executor: e).add(Self.passkey(1), for: "other", limit: 2, d) }.get() == .alreadyRegistered)
            #expect(try await call { e, d in PasskeyStore(store: store, executor: e).add(Self.passkey(3), for: "demo", limit: 2, d) }.get() == .tooMany(limit: 2))
            // The refused one's ID is free again.
            #expect(try await call { e, d in PasskeyStore(store: store, executor: e).add(Self.passkey(3), for: "other", limit: 2, d) }.get() == .added)
            let list = try await call { e, d in PasskeyStore(store: store, executor: e).passkeys(of: "demo", d) }.get()
            #expect(list.map(\.name) == ["key 1", "key 2"] && list == [Self.passkey(1), Self.passkey(2)])
            #expect(try await call { e, d in PasskeyStore(store: store, executor: e).owner(of: Self.passkey(3).credentialId, d) }.get() == "other")
        }
    }

    @Test func ofRacingSignInsWithOneCounterExactlyOneIsRecorded() async throws {
        try await withStore { store, _ async throws in
            #expect(try await call { e, d in PasskeyStore(store: store, executor: e).add(Self.passkey(1, count: 4), for: "demo", limit: 5, d) }.get() == .added)
            for round in 0..<4 {
                let counter = UInt32(10 + round)
                let results = await concurrently(20, executors: executors) { _, executor, done in
                    PasskeyStore(store: store, executor: executor).recordUse(of: Self.passkey(1).credentialId, by: "demo", signCount: counter,
                                                                            nowS: 2_000, done)
                }
                let outcomes = try results.map { try $0.get() }
                #expect(outcomes.filter { $0 == .recorded }.count == 1, "round \(round): \(outcomes)")
                #expect(outcomes.filter { $0 == .counterRegression(stored: counter, received: counter) }.count == 19, "round \(round)")
            }
            let stored = try await call { e, d in PasskeyStore(store: store, executor: e).passkeys(of: "demo", d) }.get()
            #expect(stored.first?.signCount == 13 && stored.first?.lastUsedS == 2_000)
            // An older counter is refused.
            #expect(try await call { e, d in PasskeyStore(store: store, executor: e).recordUse(of: Self.passkey(1).credentialId, by: "demo",
                                                                                            signCount: 12, nowS: 3_000, d) }.get()
                == .counterRegression(stored: 13, received: 12))
        }
    }

    @Test func removingFreesTheCredentialAndLeavesTheOthers() async throws {
        try await withStore { store, _ async throws in
            for n: UInt8 in [1, 2] {
                _ = try await call { e, d in PasskeyStore(store: store, executor: e).add(Self.passkey(n), for: "demo", limit: 5, d) }.get()
            }
            #expect(try await call { e, d in PasskeyStore(store: store, executor: e).remove(Self.passkey(1).credentialId, of: "other", d) }.get() == false)
            #expect(try await call { e, d in PasskeyStore(store: store, executor: e).remove(Self.passkey(1).credentialId, of: "demo", d) }.get())
            #expect(try await call { e, d in PasskeyStore(store: store, executor: e).owner(of: Self.passkey(1).credentialId, d) }.get() == nil)
            #expect(try await call { e, d in PasskeyStore(store: store, executor: e).passkeys(of: "demo", d) }.get() == [Self.passkey(2)])
            // A removed passkey signs nothing in.
            #expect(try await call { e, d in PasskeyStore(store: store, executor: e).recordUse(of: Self.passkey(1).credentialId, by: "demo",
                                                                                            signCount: 9, nowS: 3_000, d) }.get() == .gone)
        }
    }
}
