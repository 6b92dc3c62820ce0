import Foundation
import Testing
import TxGateCore

/// The approval request's own rules (issue 27 item 1): who may decide it, once, before it expires.
@Suite struct ApprovalRequestTests {
    static func request(nowMs: Int64 = 1_000_000) -> ApprovalRequest {
        .pending(subject: "demo", matter: .transaction(txid: "tx1", display: "Approve 100 EUR to Bob?", bound: ["/amount": "100"]),
                 approverJourney: "ConfirmTransaction", nowMs: nowMs, ttlS: 120)
    }

    @Test func aNewRequestIsPendingWithAnUnguessableIdAndATwoDigitCode() {
        let a = Self.request(), b = Self.request()
        #expect(a.state == .pending && a.expiresMs == 1_000_000 + 120_000)
        #expect(a.id != b.id && a.id.count == 22, "128 bits in base64url: \(a.id)")
        #expect(Int(a.bindingCode).map { (10...99).contains($0) } == true, "\(a.bindingCode)")
    }

    @Test func theBindingCodeIsUniformOverTenToNinetyNine() {
        var seen = Set<String>()
        for b in 0..<180 { seen.insert(ApprovalRequest.bindingCode([UInt8(b)])) }
        #expect(seen.count == 90 && seen.contains("10") && seen.contains("99"))
        // Bytes of 180 and above are skipped (180 = 2 × 90 keeps every code equally likely).
        #expect(ApprovalRequest.bindingCode([200, 250, 5]) == "15")
    }

    @Test func itEncodesToTheSameBytesEveryTimeAndBack() throws {
        let r = Self.request()
        #expect(r.encoded == r.encoded)
        #expect(try #require(ApprovalRequest.decode(r.encoded)) == r)
        let step = ApprovalRequest.pending(subject: "demo", matter: .stepUp(journey: "Login"), approverJourney: "Login", nowMs: 0, ttlS: 1)
        #expect(ApprovalRequest.decode(step.encoded) == step)
    }

    @Test func onlyItsUserDecidesItOnceBeforeItExpires() throws {
        let r = Self.request()
        let approved = try r.deciding(.approved, by: "demo", nowMs: 1_000_500).get()
        #expect(approved.state == .approved && approved.decidedMs == 1_000_500)
        #expect(r.deciding(.approved, by: "mallory", nowMs: 1_000_500) == .failure(.notYours))
        #expect(approved.deciding(.denied, by: "demo", nowMs: 1_000_600) == .failure(.alreadyDecided(.approved)))
        #expect(r.deciding(.denied, by: "demo", nowMs: r.expiresMs) == .failure(.expired))
        #expect(try r.deciding(.denied, by: "demo", nowMs: r.expiresMs - 1).get().state == .denied)
    }
}
