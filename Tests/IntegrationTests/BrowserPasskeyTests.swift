import Foundation
import Testing
import TxGateCore
import TestSupport

/// Issue 26 in a real browser: headless Chromium with its virtual WebAuthn authenticator
/// (WebDriver `addVirtualAuthenticator`) creates a passkey on the login page, then approves a
/// demo-bank transfer with it; the transfer is executed once and its approval is kept as
/// passkey evidence. Screenshots go to `.build/test-output/browser/passkey-*`.
@Suite(.serialized, .testbed, .enabled(if: Browser.isInstalled, Comment(rawValue: Browser.notInstalled)))
struct BrowserPasskeyTests {
    /// BrowserApprovalTests' demo-bank configuration on `http://localhost:PORT` (a passkey's
    /// relying party is a domain name), the transfer approved with a passkey.
    static func start(_ bed: Testbed, uv: WebAuthnConfig.UserVerification = .preferred, spc: Bool = false) throws -> GatewayInstance {
        let bank = try bed.startDemoBank()
        let page = try BrowserApprovalTests.config("http://localhost:0", bed: bed, approval: "PasskeyTx")
        return try bed.startGateway { port in
            var c = page
            c["publicUrl"] = "http://localhost:\(port)"
            c["webauthn"] = ["rpName": "Demo Bank", "userVerification": uv.rawValue]
                .merging(spc ? ["securePaymentConfirmation": ["payee": "/payee", "instrumentName": "Demo Bank account"]] : [:]) { a, _ in a }
            var journeys = c["journeys"] as? [String: Any] ?? [:]
            journeys["RegisterPasskey"] = [["type": "WebAuthnRegistration", "residentKey": "required"]]
            journeys["PasskeyTx"] = [["type": "WebAuthnAuthentication"]]
            journeys["PasskeyLogin"] = [["type": "WebAuthnAuthentication", "usernameless": true]]
            c["journeys"] = journeys
            return Testbed.gatewayConfig(port: port, upstream: bank.url, overrides: c)
        }
    }

    static func registerPasskey(_ base: String, _ out: URL) -> [BrowserStep] {
        [
            .open(base + "/am/XUI/?authIndexType=service&authIndexValue=RegisterPasskey&goto=%2F"),
            .waitForElement("#passkey"), .waitForText("Create a passkey"),
            .screenshot(out.appendingPathComponent("2-register.png")),
            .click("#passkey"), .waitForPath("/"), .waitForText("Everyday account"),
        ]
    }

    /// With `webauthn.securePaymentConfirmation` the page asks for a payment credential and
    /// tries the browser's payment dialog first; Chromium on Linux has none, so the same
    /// passkey approves through plain WebAuthn.
    @Test("a passkey made in Chromium approves a demo-bank transfer, executed once", .timeLimit(.minutes(2)),
          arguments: [false, true])
    func registerAndApprove(spc: Bool) throws {
        let bed = try Testbed.current
        let g = try Self.start(bed, uv: .required, spc: spc)
        let out = try BrowserApprovalTests.outputFolder(spc ? "passkey-spc" : "passkey")
        let base = g.baseURL.replacingOccurrences(of: "127.0.0.1", with: "localhost")
        let run = try bed.runBrowser(base + "/", [.virtualAuthenticator(uv: true), .waitForElement("#cb1"),
                                                  .fill("#cb0", "demo"), .fill("#cb1", BrowserApprovalTests.password), .click("#submit"),
                                                  .waitForPath("/")]
            + Self.registerPasskey(base, out) + [
                .fill("#amount", "2500"), .fill("#payee", "Mallory Ltd"), .click("#send"),
                .waitForElement("#approval"), .waitForElement("#passkey"), .waitForText("Approve with passkey"),
                .snapshot("approval"), .screenshot(out.appendingPathComponent("3-approval.png")),
                .click("#passkey"),
                .waitForPath("/receipt"), .waitForText("Transfer executed"), .snapshot("receipt"),
                .screenshot(out.appendingPathComponent("4-receipt.png")),
                .reload, .waitForText("Transfer executed"),
                .open(base + "/"), .waitForText("1 transfer made"), .snapshot("after"),
            ], timeout: 90)
        #expect(run.ok, "\(run)")
        #expect(run.scriptErrors.isEmpty, "\(run.scriptErrors)")
        let approval = try #require(run.snapshots["approval"], "\(run)")
        for text in ["Approve this transfer", "2500\u{00A0}EUR", "Mallory Ltd"] {
            #expect(approval.text.contains(text), "approval page lacks '\(text)': \(approval.text)")
        }
        // One discoverable credential for localhost, used once (its counter moved on).
        #expect(run.credentials.count == 1, "\(run.credentials)")
        #expect(run.credentials.first?["rp_id"] as? String == "localhost" && run.credentials.first?["resident"] as? Bool == true,
                "\(run.credentials)")
        #expect((run.credentials.first?["sign_count"] as? Int ?? 0) >= 1, "\(run.credentials)")
        // The gateway's log names the approval; the audit trail and Txn-Token tests cover the evidence.
        #expect(g.process.stdout.contains("transaction approved") || g.process.stderr.contains("transaction approved"))
    }

    @Test("a discoverable passkey signs in with no user name typed", .timeLimit(.minutes(2)))
    func usernameless() throws {
        let bed = try Testbed.current
        let g = try Self.start(bed)
        let out = try BrowserApprovalTests.outputFolder("passkey-usernameless")
        let base = g.baseURL.replacingOccurrences(of: "127.0.0.1", with: "localhost")
        let run = try bed.runBrowser(base + "/", [.virtualAuthenticator(uv: true), .waitForElement("#cb1"),
                                                  .fill("#cb0", "demo"), .fill("#cb1", BrowserApprovalTests.password), .click("#submit"),
                                                  .waitForPath("/")]
            + Self.registerPasskey(base, out) + [
                // Signed out: the passkey alone signs in, no name typed.
                .clearCookies, .open(base + "/"), .waitForElement("#cb1"), .snapshot("signedOut"),
                .open(base + "/am/XUI/?authIndexType=service&authIndexValue=PasskeyLogin&goto=%2F"),
                .waitForText("Sign in with passkey"), .screenshot(out.appendingPathComponent("5-passkey-login.png")),
                .click("#passkey"), .waitForPath("/"), .waitForText("Everyday account"), .snapshot("home"),
            ], timeout: 90)
        #expect(run.ok, "\(run)")
        #expect(run.snapshots["signedOut"]?.text.contains("Sign in") == true, "\(run)")
        #expect(run.cookie("iPlanetDirectoryPro") != nil, "\(run)")
        #expect(run.scriptErrors.isEmpty, "\(run.scriptErrors)")
    }

    @Test("the account page lists the passkey, and Remove takes it away for good", .timeLimit(.minutes(2)))
    func accountPage() throws {
        let bed = try Testbed.current
        let g = try Self.start(bed)
        let out = try BrowserApprovalTests.outputFolder("passkey-account")
        let base = g.baseURL.replacingOccurrences(of: "127.0.0.1", with: "localhost")
        let run = try bed.runBrowser(base + "/am/XUI/passkeys", [.virtualAuthenticator(uv: true), .waitForElement("#cb1"),
                                                                 .fill("#cb0", "demo"), .fill("#cb1", BrowserApprovalTests.password),
                                                                 .click("#submit"), .waitForPath("/am/XUI/passkeys"),
                                                                 .waitForText("You have no passkey yet"), .snapshot("empty"),
                                                                 .click("#create"), .waitForText("Create a passkey"), .click("#passkey"),
                                                                 .waitForPath("/am/XUI/passkeys"), .waitForElement("button.remove"),
                                                                 .snapshot("listed")]
            + BrowserApprovalTests.screenshots(out, "1-passkeys") + [
                .click("button.remove"), .waitForText("Removed."), .snapshot("removed"),
                .reload, .waitForText("You have no passkey yet"), .snapshot("reloaded"),
            ], timeout: 90)
        #expect(run.ok, "\(run)")
        #expect(run.scriptErrors.isEmpty, "\(run.scriptErrors)")
        let listed = try #require(run.snapshots["listed"], "\(run)")
        #expect(listed.text.contains("Your passkeys") && listed.text.contains("Passkey") && listed.text.contains("never used"), "\(listed.text)")
        #expect(listed.text.contains("Signed in as demo"), "\(listed.text)")
        // The authenticator still holds it; the gateway does not take it any more.
        let token = try #require(run.cookie("iPlanetDirectoryPro")?.value)
        let api = try g.fetch("POST", "/am/json/realms/root/passkeys?_action=list", headers: [("Content-Type", "application/json"),
                                                                                           ("iPlanetDirectoryPro", token)], body: Array("{}".utf8))
        #expect(api.status == 200 && api.bodyText == #"{"result":[]}"#, "\(api)")
    }

    @Test("make run's demo: from demo-bank's page to a passkey, and the next transfer approved with it", .timeLimit(.minutes(2)))
    func theDemo() throws {
        let bed = try Testbed.current
        let bank = try bed.startDemoBank()
        let port = try Ports.free()
        let demo = try String(contentsOf: BinaryLocator.packageRoot.appendingPathComponent("gateway.json"), encoding: .utf8)
        let config = try bed.dir.write("gateway.json", demo.replacingOccurrences(of: "127.0.0.1:8080", with: "127.0.0.1:\(port)")
            .replacingOccurrences(of: "localhost:8080", with: "localhost:\(port)")
            .replacingOccurrences(of: "http://127.0.0.1:9000", with: bank.url))
        let gateway = try bed.spawn(try BinaryLocator.txgate, ["serve", "--config", config.path, "--workers", "1"])
        try gateway.waitForPort(port)
        let base = "http://localhost:\(port)"
        let out = try BrowserApprovalTests.outputFolder("passkey-demo")
        let run = try bed.runBrowser(base + "/", [
            .virtualAuthenticator(uv: true), .waitForElement("#cb1"),
            .fill("#cb0", "demo"), .fill("#cb1", BrowserApprovalTests.password), .click("#submit"),
            .waitForText("Everyday account"), .click("#passkeys"), .waitForText("You have no passkey yet"),
            .click("#create"), .click("#passkey"), .waitForElement("button.remove"),
            .open(base + "/"), .fill("#amount", "42.50"), .fill("#payee", "Alice"), .click("#send"),
            .waitForText("Approve with passkey"), .waitForText("Use a one-time code instead"), .snapshot("approval"),
            .screenshot(out.appendingPathComponent("approval.png")),
            .click("#passkey"), .waitForPath("/receipt"), .waitForText("Transfer executed"), .snapshot("receipt"),
        ], timeout: 90)
        #expect(run.ok, "\(run)\n\(gateway.stderrTail(30))")
        #expect(run.scriptErrors.isEmpty, "\(run.scriptErrors)")
        #expect(run.snapshots["receipt"]?.text.contains("Alice") == true, "\(run)")
        #expect(run.credentials.count == 1, "\(run.credentials)")
    }
}
