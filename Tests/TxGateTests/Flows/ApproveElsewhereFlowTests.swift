import Foundation
import Testing
import TestSupport
import TxGateCore
import TxGateCrypto

/// Approve elsewhere (issue 27): the waiting client polls a PollingWaitCallback as the JS SDK
/// does (the step submitted again, unchanged, after waitTime) while the person approves on
/// another session (another device) through the approver journey; then the transaction
/// completes and its retry executes once. Deny, expiry (on the gateway's clock), another
/// user's session and a restart while pending run in process.
@Suite struct ApproveElsewhereFlowTests {
    typealias Kit = TransactionKit
    typealias A = ApprovalKit

    /// Waits the step's waitTime: in process the clock moves, live the time passes.
    func waitTime(_ g: some GatewayUnderTest, _ step: [String: Any]) throws {
        let ms = try A.pollingWait(step).waitMs
        g.advance(seconds: Double(ms) / 1000)
    }

    @Test(.timeLimit(.minutes(1)), arguments: GatewayForm.allCases)
    func approvedOnAnotherDeviceTheWaitingClientCompletesAndItsRetryExecutesOnce(_ form: GatewayForm) throws {
        let g = try form.start(configForURL: { A.config(["publicUrl": $0]) })
        defer { g.stop() }
        let waiting = try Kit.login(g)
        let (txid, first) = try A.waitingTransfer(g, token: waiting)
        let wait = try A.pollingWait(first)
        #expect(wait.waitMs == 1000)
        let code = try #require(A.code(in: wait.message), "no binding code in '\(wait.message)'")

        // The email carries the approval page's link and the same code.
        let mail = try #require(try MailTools.waitForOutbox(g.dir.appendingPathComponent("var/outbox"), count: 1).last)
        let id = try #require(A.requestId(inLink: mail.body), "no approval link in:\n\(mail)")
        #expect(mail.body.contains(code) && mail.body.contains("Approve 100 EUR to Bob?"), "\(mail)")

        // Pending: the same step again (as often as the client polls).
        try waitTime(g, first)
        let pending = try A.poll(g, first, token: waiting)
        #expect(pending.status == 200, "\(pending)")
        let second = try pending.json()
        #expect(try A.pollingWait(second).message == wait.message)

        // The other device: its own session sees what is approved, and approves with TOTP.
        let phone = try Kit.login(g)
        let status = try A.status(g, id: id, token: phone)
        #expect(status.status == 200, "\(status)")
        #expect(A.state(status) == "pending")
        #expect(try status.json()["bindingCode"] as? String == code)
        #expect((try status.json()["display"] as? String)?.contains("Approve 100 EUR to Bob?") == true, "\(status)")
        var codes = Kit.Codes(g)
        let approved = try A.approve(g, id: id, token: phone, code: codes.next(Kit.demoSecret))
        #expect(approved.status == 200, "\(approved)")
        #expect(try approved.json()["tokenId"] as? String == phone)
        #expect(A.state(try A.status(g, id: id, token: phone)) == "approved")

        // The waiting client's next poll completes the transaction in its own session.
        try waitTime(g, second)
        let done = try A.poll(g, second, token: waiting)
        #expect(done.status == 200, "\(done)")
        #expect(try done.json()["tokenId"] as? String == waiting)

        let retry = try Kit.transfer(g, token: waiting, body: Kit.transferBody, query: "?_txid=\(txid)")
        #expect(retry.status == 201, "\(retry)")
        #expect((try retry.json()["sequence"] as? NSNumber)?.intValue == 1)
        let again = try Kit.transfer(g, token: waiting, body: Kit.transferBody, query: "?_txid=\(txid)")
        #expect(again.status == 401 && !again.bodyText.contains("executed"), "\(again)")

        // Operators: the access log names the request (masked); no log line holds its id.
        let log = g.logText
        #expect(!log.contains(id), "the approval request's id is in the log")
        let named = g.logLines().filter { $0["log"] as? String == "access" && $0["approval"] as? String == String(id.prefix(4)) + "…(22)" }
        #expect(named.count >= 3, "access lines naming the approval request: \(named.count)")
    }

    @Test(.timeLimit(.minutes(1)))
    func deniedOnAnotherDeviceTheWaitingClientFailsWithReasonDenied() throws {
        let g = try GatewayForm.inProcess.start(configForURL: { A.config(["publicUrl": $0]) })
        defer { g.stop() }
        let waiting = try Kit.login(g)
        let (txid, first) = try A.waitingTransfer(g, token: waiting)
        let id = try #require(A.requestId(inLink: try MailTools.waitForOutbox(g.dir.appendingPathComponent("var/outbox")).last!.body))
        let phone = try Kit.login(g)
        let denied = try A.deny(g, id: id, token: phone)
        #expect(denied.status == 200 && A.state(denied) == "denied", "\(denied)")
        // Decided once: a second deny, or an approve, is told what was decided.
        let twice = try A.deny(g, id: id, token: phone)
        #expect(twice.status == 409 && A.state(twice) == "denied", "\(twice)")
        let late = try A.startApprover(g, id: id, token: phone)
        #expect(late.status == 409 && A.state(late) == "denied", "\(late)")

        try waitTime(g, first)
        let failed = try A.poll(g, first, token: waiting)
        #expect(failed.status == 401, "\(failed)")
        #expect(try failed.json()["message"] as? String == "Login failure")
        #expect(A.reason(failed) == "denied", "\(failed)")
        let retry = try Kit.transfer(g, token: waiting, body: Kit.transferBody, query: "?_txid=\(txid)")
        #expect(retry.status == 401 && !retry.bodyText.contains("executed"), "\(retry)")
    }

    /// Expiry is the gateway's clock's: 61 s after a 60 s request the waiting client fails with
    /// "expired", the page says expired, and an approver journey started in time but finished
    /// late does not approve.
    @Test(.timeLimit(.minutes(1)))
    func anExpiredRequestFailsTheWaitingClientAndCannotBeApproved() throws {
        let g = try GatewayForm.inProcess.start(configForURL: { A.config(ttlS: 60, ["publicUrl": $0]) })
        defer { g.stop() }
        let waiting = try Kit.login(g)
        let (_, first) = try A.waitingTransfer(g, token: waiting)
        let id = try #require(A.requestId(inLink: try MailTools.waitForOutbox(g.dir.appendingPathComponent("var/outbox")).last!.body))
        let phone = try Kit.login(g)
        g.advance(seconds: 50)
        let started = try A.startApprover(g, id: id, token: phone)
        #expect(started.status == 200, "\(started)")
        g.advance(seconds: 11)
        let late = try A.post(g, A.authPath, A.answer(try started.json(), [TOTP(secret: Base32.decode(Kit.demoSecret)!).code(at: g.nowS)]), headers: [("iPlanetDirectoryPro", phone)])
        #expect(late.status == 410 && A.state(late) == "expired", "an approval finished after expiry:\n\(late)")
        #expect(A.state(try A.status(g, id: id, token: phone)) == "expired")
        let failed = try A.poll(g, first, token: waiting)
        #expect(failed.status == 401 && A.reason(failed) == "expired", "\(failed)")
    }

    /// The link names a request; it never authenticates. Another user's session can neither
    /// read, deny nor approve it; no session is 401; the page itself holds nothing of it.
    @Test(.timeLimit(.minutes(1)))
    func anotherUsersSessionCannotReadDenyOrApprove() throws {
        let g = try GatewayForm.inProcess.start(configForURL: { A.config(["publicUrl": $0]) })
        defer { g.stop() }
        let waiting = try Kit.login(g)
        _ = try A.waitingTransfer(g, token: waiting)
        let mail = try #require(try MailTools.waitForOutbox(g.dir.appendingPathComponent("var/outbox")).last)
        let id = try #require(A.requestId(inLink: mail.body))
        let mallory = try Kit.login(g, user: "other")

        let read = try A.status(g, id: id, token: mallory)
        #expect(read.status == 403 && !read.bodyText.contains("Bob"), "\(read)")
        let deny = try A.deny(g, id: id, token: mallory)
        #expect(deny.status == 403, "\(deny)")
        let approve = try A.startApprover(g, id: id, token: mallory)
        #expect(approve.status == 403, "\(approve)")
        for r in [try A.status(g, id: id, token: nil), try A.deny(g, id: id, token: nil)] {
            #expect(r.status == 401, "\(r)")
        }
        #expect(try A.startApprover(g, id: id, token: nil).status == 401)
        // Still pending for its own user.
        #expect(A.state(try A.status(g, id: id, token: waiting)) == "pending")
        #expect(g.logText.contains("approval request refused: another user's session"))

        let page = try g.fetch("GET", "/am/XUI/approval?id=\(id)")
        #expect(page.status == 200)
        let csp = try #require(page.header("Content-Security-Policy"))
        #expect(csp.contains("script-src 'sha256-") && !csp.contains("script-src 'unsafe-inline'"), "\(csp)")
        #expect(!page.bodyText.contains("Bob") && !page.bodyText.contains(id), "the page itself shows nothing of the request:\n\(page)")
    }

    /// The approver journey may be the passkey step (issue 26); a user with no passkey passes
    /// its one-time-code fallback, and the approval counts the same.
    @Test(.timeLimit(.minutes(1)))
    func thePasskeyStepWithItsCodeFallbackCanBeTheApproverJourney() throws {
        let g = try GatewayForm.inProcess.start(configForURL: { url in
            A.config(approver: "ApproverPasskey", [
                "publicUrl": url.replacingOccurrences(of: "127.0.0.1", with: "localhost"), "webauthn": [:] as [String: Any],
                "journeys": ["ApproverPasskey": [["type": "WebAuthnAuthentication", "fallback": "TOTP"]]],
            ])
        })
        defer { g.stop() }
        let waiting = try Kit.login(g)
        let (_, step) = try A.waitingTransfer(g, token: waiting)
        let id = try #require(A.requestId(inStep: step))
        let phone = try Kit.login(g)
        var codes = Kit.Codes(g)
        let approved = try A.approve(g, id: id, token: phone, code: codes.next(Kit.demoSecret))
        #expect(approved.status == 200, "\(approved)")
        #expect(A.state(try A.status(g, id: id, token: phone)) == "approved")
        try waitTime(g, step)
        #expect(try A.poll(g, step, token: waiting).status == 200)
    }

    /// A sign-in approved elsewhere (a TV, a kiosk): the name is only a claim until the person
    /// approves on a device where they are signed in; then the waiting client gets a session of
    /// its own. Outside a session a denial is AM's plain "Login failure".
    @Test(.timeLimit(.minutes(1)))
    func aSignInApprovedOnThePhoneGetsItsOwnSession() throws {
        let g = try GatewayForm.inProcess.start(configForURL: { A.config(["publicUrl": $0, "journeys": ["TVLogin": [
            ["type": "UsernameOnly"],
            ["type": "ApproveElsewhere", "channels": ["email"], "pollMs": 1000, "approverJourney": "ApproverTOTP"],
        ]]]) })
        defer { g.stop() }
        func tvStep() throws -> [String: Any] {
            let start = try A.post(g, A.authPath + "?authIndexType=service&authIndexValue=TVLogin", nil)
            let named = try A.post(g, A.authPath, A.answer(try start.json(), ["demo"]))
            #expect(named.status == 200, "\(named)")
            return try named.json()
        }
        let step = try tvStep()
        let id = try #require(A.requestId(inStep: step))
        let phone = try Kit.login(g)
        let status = try A.status(g, id: id, token: phone)
        let display = try status.json()["display"] as? String
        #expect(display == "Sign-in (TVLogin)", "\(status)")
        var codes = Kit.Codes(g)
        #expect(try A.approve(g, id: id, token: phone, code: codes.next(Kit.demoSecret)).status == 200)
        try waitTime(g, step)
        let signedIn = try A.poll(g, step, token: "")
        let token = try #require(try signedIn.json()["tokenId"] as? String, "\(signedIn)")
        #expect(token != phone)
        let valid = try A.post(g, "/am/json/realms/root/sessions?_action=validate", nil, headers: [("iPlanetDirectoryPro", token)])
        let uid = try valid.json()["uid"] as? String
        #expect(uid == "demo", "\(valid)")

        let other = try tvStep()
        let otherId = try #require(A.requestId(inStep: other))
        #expect(try A.deny(g, id: otherId, token: phone).status == 200)
        try waitTime(g, other)
        let refused = try A.poll(g, other, token: "")
        let message = try refused.json()["message"] as? String
        #expect(refused.status == 401 && A.reason(refused) == nil && message == "Login failure", "\(refused)")
    }

    /// An approver journey whose session logs out before its last step approves nothing.
    @Test(.timeLimit(.minutes(1)))
    func anApproverJourneyWhoseSessionEndedApprovesNothing() throws {
        let g = try GatewayForm.inProcess.start(configForURL: { A.config(["publicUrl": $0]) })
        defer { g.stop() }
        let waiting = try Kit.login(g)
        let (_, step) = try A.waitingTransfer(g, token: waiting)
        let id = try #require(A.requestId(inStep: step))
        let phone = try Kit.login(g)
        let started = try A.startApprover(g, id: id, token: phone)
        #expect(started.status == 200, "\(started)")
        let out = try A.post(g, "/am/json/realms/root/sessions?_action=logout", nil, headers: [("iPlanetDirectoryPro", phone)])
        #expect(out.status == 200, "\(out)")
        var codes = Kit.Codes(g)
        let late = try A.post(g, A.authPath, A.answer(try started.json(), [codes.next(Kit.demoSecret)]), headers: [("iPlanetDirectoryPro", phone)])
        #expect(late.status == 401, "an approval after the approver's logout:\n\(late)")
        #expect(A.state(try A.status(g, id: id, token: waiting)) == "pending")
    }

    /// The request is in the store and the authId is signed: a gateway started again on the
    /// same store and key continues the wait, and the approval made after the restart counts.
    @Test(.timeLimit(.minutes(1)))
    func aRestartWhilePendingLosesNothing() throws {
        let shared = try TemporaryDirectory(prefix: "txgate-restart")
        // One public URL for both (the address clients use does not change with a restart).
        let overrides: (String) -> [String: Any] = { _ in
            A.config(["publicUrl": "http://gateway.test", "store": ["path": shared.path("store.db")],
                      "secrets": ["signingKeyFile": shared.path("signing.key")]])
        }
        let g1 = try GatewayForm.inProcess.start(configForURL: overrides)
        let waiting = try Kit.login(g1)
        let (txid, first) = try A.waitingTransfer(g1, token: waiting)
        let id = try #require(A.requestId(inLink: try MailTools.waitForOutbox(g1.dir.appendingPathComponent("var/outbox")).last!.body))
        g1.stop()

        let g2 = try GatewayForm.inProcess.start(configForURL: overrides)
        defer { g2.stop() }
        try waitTime(g2, first)
        let still = try A.poll(g2, first, token: waiting)
        #expect(still.status == 200, "\(still)")
        let second = try still.json()
        _ = try A.pollingWait(second)
        let phone = try Kit.login(g2)
        var codes = Kit.Codes(g2)
        let approved = try A.approve(g2, id: id, token: phone, code: codes.next(Kit.demoSecret))
        #expect(approved.status == 200, "\(approved)")
        try waitTime(g2, second)
        let done = try A.poll(g2, second, token: waiting)
        #expect(done.status == 200, "\(done)")
        let retry = try Kit.transfer(g2, token: waiting, body: Kit.transferBody, query: "?_txid=\(txid)")
        #expect(retry.status == 201, "\(retry)")
    }
}
