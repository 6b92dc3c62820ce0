import Foundation
import Testing
import TxGateCore
import TestSupport
@testable import TxGateStore

/// Issue 27 item 1 on SQLite: two devices (here 40 callers on four threads) racing to approve
/// and deny one request: exactly one decides, every other one is told what was decided.
@Suite struct ApprovalDecisionTests {
    let executors: [CallbackExecutor] = (0..<4).map { TestExecutor($0) }

    static func request(nowMs: Int64) -> ApprovalRequest {
        .pending(subject: "demo", matter: .transaction(txid: "tx1", display: "Approve 100 EUR to Bob?", bound: [:]),
                 approverJourney: "ConfirmTransaction", nowMs: nowMs, ttlS: 120)
    }

    @Test func ofRacingApprovesAndDeniesExactlyOneDecides() async throws {
        try await withStore { store, _ async throws in
            for round in 0..<5 {
                let r = Self.request(nowMs: 1_000)
                #expect(try await call { store.create(ApprovalRequest.key(r.id), value: r.encoded, ttlMs: 120_000, on: $0, $1) }.get())
                let results = await concurrently(40, executors: executors) { i, executor, done in
                    store.decideApproval(r.id, i % 2 == 0 ? .approved : .denied, by: "demo", nowMs: 2_000, on: executor, done)
                }
                let outcomes = try results.map { try $0.get() }
                let winners = outcomes.compactMap { try? $0.get() }
                #expect(winners.count == 1, "round \(round): \(winners)")
                let decided = try #require(winners.first?.state)
                #expect(outcomes.filter { $0 == .failure(.alreadyDecided(decided)) }.count == 39, "round \(round)")
                let stored = try await call { store.get(ApprovalRequest.key(r.id), on: $0, $1) }.get()
                #expect(stored.flatMap(ApprovalRequest.decode)?.state == decided)
            }
        }
    }

    @Test func anotherUserAnExpiredOrAnUnknownRequestDecidesNothing() async throws {
        try await withStore { store, _ async throws in
            let r = Self.request(nowMs: 1_000)
            #expect(try await call { store.create(ApprovalRequest.key(r.id), value: r.encoded, ttlMs: 120_000, on: $0, $1) }.get())
            #expect(try await call { store.decideApproval(r.id, .approved, by: "mallory", nowMs: 2_000, on: $0, $1) }.get()
                == .failure(.notYours))
            #expect(try await call { store.decideApproval(r.id, .approved, by: "demo", nowMs: r.expiresMs, on: $0, $1) }.get()
                == .failure(.expired))
            #expect(try await call { store.decideApproval("nope", .approved, by: "demo", nowMs: 2_000, on: $0, $1) }.get()
                == .failure(.notFound))
            let stored = try await call { store.get(ApprovalRequest.key(r.id), on: $0, $1) }.get()
            #expect(stored.flatMap(ApprovalRequest.decode)?.state == .pending, "still pending for its user")
        }
    }
}
