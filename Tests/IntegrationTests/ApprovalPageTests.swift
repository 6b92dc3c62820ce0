import Foundation
import Testing
import TestSupport
import TxGateCore
import TxGateCrypto

/// Issue 24 items 7 and 9: the approval has a way out (decline), and a failed approval says
/// which failure it was, inside the live session only.
@Suite(.testbed) struct ApprovalPageTests {
    typealias Kit = TransactionKit
    static let decline = "/am/json/realms/root/transactions?_action=decline"

    static func declineTx(_ g: GatewayInstance, _ txid: String, token: String?, contentType: String = "application/json") throws -> HTTPResponse {
        try g.fetch("POST", decline, headers: [("Content-Type", contentType)] + (token.map { [("iPlanetDirectoryPro", $0)] } ?? []),
                    body: Array(#"{"txid":"\#(txid)"}"#.utf8))
    }

    @Test func declineRefusesAWaitingTransactionOnceAndOnlyForItsUser() throws {
        let (g, _) = try Testbed.current.startGatewayWithBank(config: Kit.config(["metrics": ["allowFrom": ["127.0.0.1/32"]]]))
        let demo = try Kit.login(g)
        let other = try Kit.login(g, user: "other")
        let txid = try Kit.challengeTxid(try Kit.transfer(g, token: demo, body: Kit.transferBody))

        expectGatewayError(try Self.declineTx(g, txid, token: demo, contentType: "application/x-www-form-urlencoded"), 415)
        #expect(try Self.declineTx(g, txid, token: nil).status == 401)
        expectGatewayError(try Self.declineTx(g, txid, token: other), 404)  // not theirs: nothing learnt
        let r = try Self.declineTx(g, txid, token: demo)
        #expect(r.status == 200 && r.bodyText == #"{"declined":true}"#, "\(r)")
        expectGatewayError(try Self.declineTx(g, txid, token: demo), 404)

        // Declined is gone: it can neither be approved nor spent.
        var codes = Kit.Codes()
        #expect(throws: (any Error).self) { try Kit.approve(g, txid: txid, token: demo, code: codes.next(Kit.demoSecret)) }
        let retry = try Kit.transfer(g, token: demo, body: Kit.transferBody, query: "?_txid=\(txid)")
        #expect(retry.status == 401, "\(retry)")
        let metrics = try g.fetch("GET", "/-/metrics").bodyText.split(separator: "\n")
        #expect(metrics.contains("txgate_transactions_declined_total 1"))
        #expect(metrics.contains(#"txgate_audit_events_total{event="declined"} 1"#))

        // An approved transaction is past declining.
        let approved = try Kit.approvedTransfer(g, token: demo, codes: &codes)
        let late = try Self.declineTx(g, approved, token: demo)
        expectGatewayError(late, 409)
        #expect(try Kit.transfer(g, token: demo, body: Kit.transferBody, query: "?_txid=\(approved)").status == 201)
    }

    @Test func aFailedApprovalSaysWhichFailureItWasButALoginDoesNot() throws {
        let (g, _) = try Testbed.current.startGatewayWithBank(config: Kit.config())
        let demo = try Kit.login(g)
        func reason(_ r: HTTPResponse) -> String? { ((try? r.json())?["detail"] as? [String: Any])?["reason"] as? String }
        func approve(_ txid: String, _ code: String) throws -> HTTPResponse {
            let start = try Kit.startComposite(g, txid: txid, session: .header(demo))
            return try Kit.post(g, Kit.authPath, Kit.answer(try start.json(), [code]), headers: [("iPlanetDirectoryPro", demo)])
        }
        let txid = try Kit.challengeTxid(try Kit.transfer(g, token: demo, body: Kit.transferBody))
        let now = Int(Date().timeIntervalSince1970)
        let totp = TOTP(secret: Base32.decode(Kit.demoSecret)!)
        let wrong = try approve(txid, totp.code(at: now) == "000000" ? "111111" : "000000")
        #expect(wrong.status == 401 && reason(wrong) == "wrong_code", "\(wrong)")
        #expect(try wrong.json()["message"] as? String == "Login failure", "AM's message stays")
        #expect(try approve(txid, totp.code(at: now)).status == 200)
        let second = try Kit.challengeTxid(try Kit.transfer(g, token: demo, body: Array(#"{"amount":7,"currency":"EUR","payee":"Bob"}"#.utf8)))
        let used = try approve(second, totp.code(at: now))
        #expect(used.status == 401 && reason(used) == "code_used", "\(used)")

        // Without a session (a sign-in), a failure says nothing more than AM does.
        let start = try Kit.post(g, Kit.authPath, nil)
        let login = try Kit.post(g, Kit.authPath, Kit.answer(try start.json(), ["demo", "not the password"]))
        #expect(login.status == 401 && reason(login) == nil, "\(login)")
    }

    /// Issue 24 item 9: a wrong code inside the session says how many attempts are left before
    /// the lockout (`detail.attemptsLeft`, docs/WIRE-EXTENSIONS.md §4b); the one that locks says
    /// 0 and how long; then `locked_out`. AM's members stay as they were, and a sign-in says
    /// nothing of the kind.
    @Test func aWrongCodeSaysHowManyAttemptsAreLeftBeforeTheLockout() throws {
        let (g, _) = try Testbed.current.startGatewayWithBank(config: Kit.config([
            "security": ["maxFailedAttempts": 3, "lockoutWindowS": 120, "lockoutDurationS": 240],
        ]))
        let demo = try Kit.login(g)
        let txid = try Kit.challengeTxid(try Kit.transfer(g, token: demo, body: Kit.transferBody))
        let now = Int(Date().timeIntervalSince1970)
        let totp = TOTP(secret: Base32.decode(Kit.demoSecret)!)
        let wrongCode = (-1...1).map { totp.code(at: now + 30 * $0) }.contains("000000") ? "111111" : "000000"
        func approve(_ code: String) throws -> (HTTPResponse, [String: Any]) {
            let start = try Kit.startComposite(g, txid: txid, session: .header(demo))
            let r = try Kit.post(g, Kit.authPath, Kit.answer(try start.json(), [code]), headers: [("iPlanetDirectoryPro", demo)])
            #expect(r.status == 401, "\(r)")
            let body = try r.json()
            // AM's members, as AM sends them.
            #expect(body["code"] as? Int == 401 && body["reason"] as? String == "Unauthorized" && body["message"] as? String == "Login failure",
                    "\(r)")
            return (r, try #require(body["detail"] as? [String: Any], "\(r)"))
        }

        let (first, d1) = try approve(wrongCode)
        #expect(d1["reason"] as? String == "wrong_code" && d1["attemptsLeft"] as? Int == 2 && d1["retryAfterS"] == nil, "\(first)")
        #expect(d1["failureUrl"] as? String == "", "\(first)")
        let (second, d2) = try approve(wrongCode)
        #expect(d2["reason"] as? String == "wrong_code" && d2["attemptsLeft"] as? Int == 1, "\(second)")
        // The third locks: nothing left, and how long it lasts.
        let (third, d3) = try approve(wrongCode)
        #expect(d3["reason"] as? String == "wrong_code" && d3["attemptsLeft"] as? Int == 0 && d3["retryAfterS"] as? Int == 240, "\(third)")
        // Locked: even the right code is refused, and not counted.
        let (locked, d4) = try approve(totp.code(at: now))
        #expect(d4["reason"] as? String == "locked_out" && d4["retryAfterS"] as? Int == 240 && d4["attemptsLeft"] == nil, "\(locked)")

        // A sign-in's failure is AM's, exactly: no reason, no attempts.
        let start = try Kit.post(g, Kit.authPath, nil)
        let login = try Kit.post(g, Kit.authPath, Kit.answer(try start.json(), ["other", "not the password"]))
        #expect(login.status == 401 && login.bodyText == #"{"code":401,"reason":"Unauthorized","message":"Login failure","detail":{"failureUrl":""}}"#,
                "\(login)")
    }
}
