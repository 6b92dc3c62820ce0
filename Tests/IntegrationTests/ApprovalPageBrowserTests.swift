import Foundation
import Testing
import TxGateCore
import TxGateCrypto
import TestSupport

/// Approve elsewhere (issue 27) in a real browser: a fresh headless Chromium profile stands in
/// for the person's phone. It opens the emailed link, is signed in first (the link alone
/// approves nothing), sees what is approved and the binding code the waiting client shows,
/// approves through the approver journey (TOTP) on the login page, and comes back to the page,
/// which says so; the waiting client's next poll completes the transaction, whose retry runs
/// once. A second run shows the page updating itself when the request is denied elsewhere.
@Suite(.serialized, .testbed, .enabled(if: Browser.isInstalled, Comment(rawValue: Browser.notInstalled)))
struct ApprovalPageBrowserTests {
    typealias Kit = TransactionKit
    typealias A = ApprovalKit

    static func start(_ bed: Testbed) throws -> GatewayInstance {
        let (g, _) = try bed.startGatewayWithBank(configForURL: { A.config(["publicUrl": $0]) })
        return g
    }

    static func link(_ g: GatewayInstance) throws -> (url: String, id: String) {
        let outbox = g.configURL.deletingLastPathComponent().appendingPathComponent("var/outbox")
        let mail = try #require(try MailTools.waitForOutbox(outbox, count: 1).last)
        let id = try #require(A.requestId(inLink: mail.body), "\(mail)")
        return (g.baseURL + "/am/XUI/approval?id=" + id, id)
    }

    static func signIn() -> [BrowserStep] {
        [.waitForElement("#cb1"), .fill("#cb0", "demo"), .fill("#cb1", Kit.password), .click("#submit")]
    }

    @Test(.timeLimit(.minutes(2)))
    func thePhoneSignsInSeesTheCodeAndApprovesThenTheWaitingClientCompletes() throws {
        let bed = try Testbed.current
        let g = try Self.start(bed)
        let waiting = try Kit.login(g)
        let (txid, step) = try A.waitingTransfer(g, token: waiting)
        let code = try #require(A.code(in: try A.pollingWait(step).message))
        let (url, id) = try Self.link(g)
        let totp = TOTP(secret: Base32.decode(Kit.demoSecret)!).code(at: Int(Date().timeIntervalSince1970))

        let run = try bed.runBrowser(url, [
            // No session on this device: the page sends it to sign in, then back.
            .waitForURLContaining("/am/XUI/?goto="), .snapshot("signin"),
        ] + Self.signIn() + [
            .waitForPath("/am/XUI/approval"), .waitForElement("#approve"), .waitForText(code, in: "#code"),
            .snapshot("request"),
            .click("#approve"),
            .waitForElement("input.code"), .snapshot("approver"), .fill("input.code", totp), .click("#submit"),
            .waitForPath("/am/XUI/approval"), .waitForText("Approved."), .snapshot("approved"),
        ], timeout: 60)
        #expect(run.ok, "\(run)")
        let request = try #require(run.snapshots["request"], "\(run)")
        for text in ["Approve a request", "Approve 100 EUR to Bob?", "amount: 100", "payee: Bob", code] {
            #expect(request.text.contains(text), "the approval page lacks '\(text)': \(request.text)")
        }
        #expect(run.snapshots["approver"]?.text.contains("Code: \(code)") == true, "\(run)")
        #expect(run.scriptErrors.isEmpty, "\(run.scriptErrors)")

        Thread.sleep(forTimeInterval: 1)  // the client waits waitTime
        let done = try A.poll(g, step, token: waiting)
        #expect(done.status == 200 && (try? done.json())?["tokenId"] as? String == waiting, "\(done)")
        let retry = try Kit.transfer(g, token: waiting, body: Kit.transferBody, query: "?_txid=\(txid)")
        #expect(retry.status == 201, "\(retry)")
        // The page, the sign-in with its goto and the approver journey named the request: the
        // log never holds its id whole.
        #expect(!g.logText.contains(id), "the approval request's id is in the log")
    }

    @Test(.timeLimit(.minutes(2)))
    func thePageUpdatesItselfWhenTheRequestIsDeniedElsewhere() throws {
        let bed = try Testbed.current
        let g = try Self.start(bed)
        let waiting = try Kit.login(g)
        _ = try A.waitingTransfer(g, token: waiting)
        let (url, id) = try Self.link(g)

        // Once the page has read the pending request, another device of the user denies it.
        final class Box: @unchecked Sendable { var denied: HTTPResponse? }
        let box = Box()
        let denier = Thread {
            _ = Timing.poll(timeout: 40, interval: 0.2) {
                g.logLines().contains { $0["path"] as? String == "/am/json/realms/root/approvals" && $0["status"] as? Int == 200 }
            }
            if let other = try? Kit.login(g) { box.denied = try? A.deny(g, id: id, token: other) }
        }
        denier.start()
        let run = try bed.runBrowser(url, Self.signIn() + [
            .waitForElement("#approve"), .snapshot("pending"),
            .waitForText("Denied.", timeout: 30), .snapshot("denied"),
        ], timeout: 60, stepTimeout: 30)
        #expect(run.ok, "\(run)")
        #expect(box.denied?.status == 200, "\(String(describing: box.denied))")
        // Decided: the buttons are gone (hidden elements are not in the page's text).
        let denied = try #require(run.snapshots["denied"], "\(run)")
        #expect(!denied.text.contains("Deny") && run.snapshots["pending"]?.text.contains("Deny") == true, "\(run)")
        #expect(run.scriptErrors.isEmpty, "\(run.scriptErrors)")
    }
}
