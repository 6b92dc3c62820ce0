import Testing
@testable import TxGateCore

/// CIBA's poll answers (CIBA Core §11), from the record and its approval request alone.
@Suite struct CIBARequestTests {
    static let now = 1_800_000_000
    func record(uid: String? = "demo") -> CIBARequest {
        CIBARequest(clientId: "agent", approvalId: "a", uid: uid, scope: ["openid"], txid: nil, expires: Self.now + 60, intervalS: 5,
                    nextPollS: Self.now)
    }
    func approval(_ state: ApprovalRequest.State, subject: String = "demo", expiresMs: Int64? = nil) -> ApprovalRequest {
        var a = ApprovalRequest.pending(subject: subject, matter: .stepUp(journey: "Confirm"), approverJourney: "Confirm",
                                        nowMs: Int64(Self.now) * 1000 - 1000, ttlS: 60)
        a.state = state
        if let expiresMs { a.expiresMs = expiresMs }
        if state != .pending { a.decidedMs = Int64(Self.now) * 1000 - 500 }
        return a
    }

    @Test func answers() {
        #expect(record().poll(approval(.pending), now: Self.now) == .pending)
        #expect(record().poll(approval(.pending), now: Self.now - 1) == .slowDown)
        #expect(record().poll(approval(.denied), now: Self.now) == .denied)
        #expect(record().poll(approval(.approved), now: Self.now) == .approved(uid: "demo", authTime: Self.now - 1, acr: "Confirm"))
        #expect(record().poll(approval(.approved), now: Self.now + 60) == .expired, "the auth_req_id's own expiry wins")
        #expect(record().poll(approval(.pending, expiresMs: Int64(Self.now) * 1000), now: Self.now) == .expired)
        #expect(record().poll(nil, now: Self.now) == .expired)
        // Nobody's request (an unknown hint) stays pending until it expires; another user's decision counts for nothing.
        #expect(record(uid: nil).poll(approval(.pending, subject: ""), now: Self.now) == .pending)
        #expect(record().poll(approval(.approved, subject: "mallory"), now: Self.now) == .denied)
        #expect(CIBARequest.decode(record().encoded) == record())
    }

    @Test func bindingMessages() {
        #expect(CIBARequest.bindingMessageRefusal("Pay Bob 42") == nil)
        #expect(CIBARequest.bindingMessageRefusal("") != nil)
        #expect(CIBARequest.bindingMessageRefusal(String(repeating: "x", count: 65)) != nil)
        #expect(CIBARequest.bindingMessageRefusal("a\u{202E}b") != nil)
        #expect(CIBARequest.bindingMessageRefusal("a\nb") != nil)
    }
}
