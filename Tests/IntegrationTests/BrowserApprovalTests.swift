import Foundation
import Testing
import TxGateCore
import TxGateCrypto
import TestSupport

/// A person in a real browser (headless Chromium, browser/drive.py) through txgate and
/// demo-bank: signs in, sends a transfer from demo-bank's form, approves it on the branded
/// login page, and lands on demo-bank's receipt; the transfer is executed once (demo-bank's
/// sequence number says so), whatever is reloaded. Screenshots of the login, approval and
/// receipt pages go to `.build/test-output/browser/` (or `$TXGATE_TEST_OUTPUT`).
@Suite(.serialized, .testbed, .enabled(if: Browser.isInstalled, Comment(rawValue: Browser.notInstalled)))
struct BrowserApprovalTests {
    static let password = "Ch4ngeMe!"
    static let hash = PasswordHash.hash(password)
    static let secret = "JBSWY3DPEHPK3PXP"
    static let logo = ##"<svg xmlns="http://www.w3.org/2000/svg" width="32" height="32"><rect width="32" height="32" rx="7" fill="#0f766e"/><text x="16" y="22" font-size="16" text-anchor="middle" fill="#fff" font-family="sans-serif">DB</text></svg>"##

    /// demo-bank's demo configuration (gateway.json's policies and branding), with the
    /// transfer approved by `approval` (a journey name) and a logo file.
    static func config(_ baseURL: String, bed: Testbed, approval: String, transferTtlS: Int = 180,
                       security: [String: Any] = [:]) throws -> [String: Any] {
        let logoFile = try bed.dir.write("logo.svg", logo)
        return [
            "security": security,
            "publicUrl": baseURL,
            "users": [["username": "demo", "passwordHash": hash, "email": "demo@example.com", "totpSecret": secret]],
            "loginJourney": "Login",
            "journeys": [
                "Login": [["type": "UsernamePassword"]],
                "ConfirmTransaction": [["type": "TOTP", "prompt": "One Time Password"]],
                "EmailConfirm": [["type": "EmailOTP", "ttlS": 300]],
                "MagicLink": [["type": "UsernameOnly"], ["type": "EmailSuspend", "suspendTtlS": 300]],
                "MagicApprove": [["type": "EmailSuspend", "suspendTtlS": 300]],
            ],
            "email": ["outbox": bed.dir.url.appendingPathComponent("outbox").path],
            "loginPage": ["title": "Demo Bank", "accentColor": "#0f766e", "logoFile": logoFile.path, "defaultGoto": "/",
                          "approvalTitle": "Approve this transfer",
                          "supportText": "Demo Bank will never ask for your password by email or phone."],
            "policies": [
                ["name": "home", "resources": ["/", "/receipt", "/transfer"], "actions": ["GET"], "subjects": "authenticated"],
                ["name": "transfer", "resources": ["/transfer"], "actions": ["POST"], "subjects": "authenticated",
                 "transaction": ["journey": approval, "ttlS": transferTtlS, "bind": ["body": ["/amount", "/currency", "/payee"]],
                                 "display": "Approve {amount} {currency} to {payee}?"]],
            ],
        ]
    }

    /// Where this run's screenshots go (kept after the test).
    static func outputFolder(_ test: String) throws -> URL {
        let base = ProcessInfo.processInfo.environment["TXGATE_TEST_OUTPUT"].map { URL(fileURLWithPath: $0) }
            ?? BinaryLocator.packageRoot.appendingPathComponent(".build/test-output")
        let url = base.appendingPathComponent("browser/\(test)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// Signs in on the login page a protected page sent the browser to, then sends 2500 EUR to
    /// Mallory Ltd from demo-bank's form and waits for the approval step.
    static func signInAndSendTransfer(_ out: URL) -> [BrowserStep] {
        [
            .waitForElement("#cb1"),
            .snapshot("login"), .screenshot(out.appendingPathComponent("1-login.png")),
            .fill("#cb0", "demo"), .fill("#cb1", password), .click("#submit"),
            .waitForPath("/"), .waitForText("Everyday account"), .snapshot("home"),
            .fill("#amount", "2500"), .fill("#payee", "Mallory Ltd"), .click("#send"),
            .waitForElement("#approval"), .waitForElement(#"input.code[autocomplete="one-time-code"][inputmode="numeric"]"#),
            .snapshot("approval"), .screenshot(out.appendingPathComponent("2-approval.png")),
        ]
    }

    /// The page now, at desktop width and then at a phone's (`name`-desktop.png, `name`-phone.png).
    static func screenshots(_ out: URL, _ name: String) -> [BrowserStep] {
        [
            .screenshot(out.appendingPathComponent("\(name)-desktop.png")),
            .phone, .screenshot(out.appendingPathComponent("\(name)-phone.png")), .desktop,
        ]
    }

    /// The `m:ss` the approval page's countdown shows in `text`, in seconds.
    static func timeLeft(_ text: String) -> Int? {
        guard let m = text.firstMatch(of: #/Time left to approve: (\d+):(\d\d)/#), let min = Int(m.output.1), let sec = Int(m.output.2) else {
            return nil
        }
        return min * 60 + sec
    }

    /// The receipt, reloaded, then the home page: one transfer, whatever was reloaded.
    static func receiptOnce(_ g: GatewayInstance, _ out: URL) -> [BrowserStep] {
        [
            .waitForPath("/receipt"), .waitForText("Transfer executed"),
            .snapshot("receipt"), .screenshot(out.appendingPathComponent("3-receipt.png")),
            .reload, .waitForText("Transfer executed"), .snapshot("reloaded"),
            .open(g.baseURL + "/"), .waitForText("1 transfer made"), .snapshot("after"),
        ]
    }

    /// What every approval run must show: the branded pages, the rows, the one execution.
    static func expectApprovedOnce(_ run: BrowserRun, _ g: GatewayInstance) throws {
        #expect(run.ok, "\(run)")
        let login = try #require(run.snapshots["login"], "\(run)")
        #expect(login.text.contains("Demo Bank") && login.text.contains("Sign in"), "\(login.text)")
        let approval = try #require(run.snapshots["approval"], "\(run)")
        for text in ["Approve this transfer", "Amount", "2500\u{00A0}EUR", "Payee", "Mallory Ltd", "Demo Bank"] {
            #expect(approval.text.contains(text), "approval page lacks '\(text)': \(approval.text)")
        }
        #expect(!approval.text.contains("Approve 2500 EUR to Mallory Ltd?"), "the sentence repeats the rows: \(approval.text)")
        for name in ["receipt", "reloaded"] {
            let r = try #require(run.snapshots[name], "\(run)")
            #expect(r.text.contains("Mallory Ltd") && r.text.contains("2500.00 EUR"), "\(name): \(r.text)")
            #expect(r.text.range(of: #"Transfer number\s+1\b"#, options: .regularExpression) != nil, "\(name): \(r.text)")
        }
        #expect(run.snapshots["after"]?.text.contains("1 transfer made") == true, "\(run)")
        // The form's POST was parked (303 to the login page), the approved GET replayed it, and
        // demo-bank's answer (303 to its receipt) came back as it was.
        #expect(run.network.contains { $0.status == 303 && $0.url == g.baseURL + "/transfer" && $0.location?.contains("/am/XUI/?goto=") == true },
                "\(run)")
        let replay = try #require(run.network.first { $0.url.hasPrefix(g.baseURL + "/transfer?_txid=") }, "\(run)")
        #expect(replay.status == 303 && replay.location == "/receipt?seq=1", "\(replay)")
        #expect(run.scriptErrors.isEmpty, "\(run.scriptErrors)")

        // The approval URL again, with the session: a new approval is asked for, no second transfer.
        let cookie = try #require(run.cookie("iPlanetDirectoryPro"), "\(run)")
        let session = [("Cookie", "iPlanetDirectoryPro=\(cookie.value)"), ("Sec-Fetch-Mode", "navigate")]
        let again = try g.fetch("GET", String(replay.url.dropFirst(g.baseURL.count)), headers: session)
        #expect(again.status == 303 && again.header("Location")?.contains("authIndexType=composite_advice") == true, "\(again)")
        let home = try g.fetch("GET", "/", headers: session)
        #expect(home.bodyText.contains("1 transfer made"), "\(home)")
    }

    /// Issue 24 item 9: the approval page has a way out. "Decline: this wasn't me" refuses the
    /// transaction at once, drops the parked request, and says so; nothing is executed.
    @Test(.timeLimit(.minutes(2)))
    func declineRefusesTheTransferAndNothingIsExecuted() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank { try! Self.config($0, bed: bed, approval: "ConfirmTransaction") }
        let out = try Self.outputFolder("decline")
        let run = try bed.runBrowser(g.baseURL + "/", Self.signInAndSendTransfer(out) + [
            .click("#decline"), .waitForText("Declined. Nothing was approved"),
            .snapshot("declined"), .screenshot(out.appendingPathComponent("3-declined.png")),
            .open(g.baseURL + "/"), .waitForText("0 transfers made"), .snapshot("after"),
        ], timeout: 90)
        #expect(run.ok, "\(run)")
        #expect(run.snapshots["declined"]?.text.contains("Back to Demo Bank") == true, "\(run.snapshots["declined"]?.text ?? "")")
        #expect(run.scriptErrors.isEmpty, "\(run.scriptErrors)")
        let declined = g.logLines().first { $0["msg"] as? String == "transaction declined" }
        #expect(declined?["user"] as? String == "demo", "\(g.process.stderr)")
        // The approval URL the browser was sent to no longer approves anything.
        let txid = try #require(declined?["txid"] as? String)
        #expect(!txid.isEmpty)
    }

    @Test(.timeLimit(.minutes(2)))
    func aTransferSentFromTheFormIsApprovedWithTOTPAndExecutedOnce() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank { try! Self.config($0, bed: bed, approval: "ConfirmTransaction") }
        let out = try Self.outputFolder("totp")
        let code = TOTP(secret: Base32.decode(Self.secret)!).code(at: Int(Date().timeIntervalSince1970) + 5)
        let run = try bed.runBrowser(g.baseURL + "/", Self.signInAndSendTransfer(out) + [
            // A wrong code first: said in words (which failure it was, inside the session), and the
            // approval starts again by itself: no extra click (issue 24 item 9).
            .fill("#cb1", "000000"), .click("#submit"), .waitForText("That code is not right"),
            .waitForElement("input.code"),
            .snapshot("wrong"), .screenshot(out.appendingPathComponent("2b-wrong-code.png")),
            .fill("#cb1", code), .click("#submit"),
        ] + Self.receiptOnce(g, out), timeout: 90)
        try Self.expectApprovedOnce(run, g)
        let wrong = run.snapshots["wrong"]?.text ?? ""
        #expect(wrong.contains("Nothing was approved") && wrong.contains("Approve this transfer"), "\(wrong)")
        // security.maxFailedAttempts is 5 by default: one spent.
        #expect(wrong.contains("That code is not right: 4 attempts left before approvals are locked."), "\(wrong)")
        // The countdown: the policy's ttlS is 180 s.
        let left = try #require(Self.timeLeft(run.snapshots["approval"]?.text ?? ""), "\(run.snapshots["approval"]?.text ?? "")")
        #expect(left > 100 && left <= 180, "\(left)")
        let approval = run.snapshots["approval"]
        #expect(approval?.text.contains("One Time Password") == true, "\(approval?.text ?? "")")
        #expect(!g.process.stderr.contains(code) && !g.process.stderr.contains(Self.password))
    }

    /// Issue 24 item 9: each wrong code says how many attempts are left before approvals are
    /// locked (`detail.attemptsLeft`); the one that locks says so, and for how long, and the page
    /// asks for no more codes. Nothing is executed.
    @Test(.timeLimit(.minutes(2)))
    func wrongCodesSayHowManyAttemptsAreLeftAndTheLastOneLocks() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank {
            try! Self.config($0, bed: bed, approval: "ConfirmTransaction", security: ["maxFailedAttempts": 2, "lockoutDurationS": 240])
        }
        let out = try Self.outputFolder("attempts-left")
        let run = try bed.runBrowser(g.baseURL + "/", Self.signInAndSendTransfer(out) + [
            .fill("#cb1", "000000"), .click("#submit"), .waitForText("That code is not right: 1 attempt left before approvals are locked."),
            .waitForElement("input.code"), .snapshot("one-left"),
        ] + Self.screenshots(out, "3-one-attempt-left") + [
            .fill("#cb1", "000000"), .click("#submit"), .waitForText("that was the last attempt"),
            .waitForElement("#back"), .snapshot("locked"),
        ] + Self.screenshots(out, "4-locked") + [
            .open(g.baseURL + "/"), .waitForText("0 transfers made"),
        ], timeout: 90)
        #expect(run.ok, "\(run)")
        let oneLeft = run.snapshots["one-left"]?.text ?? ""
        #expect(oneLeft.contains("locked. Nothing was approved. Enter the code"), "\(oneLeft)")
        let locked = run.snapshots["locked"]?.text ?? ""
        for text in ["approvals are locked for up to 4 minutes", "Nothing was approved", "Try again later", "Back to Demo Bank"] {
            #expect(locked.contains(text), "the locked page lacks '\(text)': \(locked)")
        }
        #expect(!locked.contains("attempt left") && !locked.contains("Decline") && !locked.contains("Time left"), "\(locked)")
        #expect(run.scriptErrors.isEmpty, "\(run.scriptErrors)")
    }

    /// Issue 24 item 9: the approval page counts down the time left (the transaction's
    /// expiry, from the server) and at zero says that the approval expired and what to do,
    /// by itself: no request goes to the server to find out (the journey is not failed).
    @Test(.timeLimit(.minutes(2)))
    func theApprovalCountsDownAndSaysWhenItHasExpired() throws {
        let bed = try Testbed.current
        let ttl = 25
        let (g, _) = try bed.startGatewayWithBank { try! Self.config($0, bed: bed, approval: "ConfirmTransaction", transferTtlS: ttl) }
        let out = try Self.outputFolder("expiry")
        let run = try bed.runBrowser(g.baseURL + "/", Self.signInAndSendTransfer(out) + [
            .waitForText("Time left to approve: 0:"), .snapshot("t1"), .pause(2.5), .snapshot("t2"),
        ] + Self.screenshots(out, "3-counting-down") + [
            .waitForText("This approval has expired", timeout: Double(ttl) + 5), .waitForElement("#back"), .snapshot("expired"),
        ] + Self.screenshots(out, "4-expired") + [
            .open(g.baseURL + "/"), .waitForText("0 transfers made"),
        ], timeout: 100)
        #expect(run.ok, "\(run)")
        let t1 = try #require(Self.timeLeft(run.snapshots["t1"]?.text ?? ""), "\(run.snapshots["t1"]?.text ?? "")")
        let t2 = try #require(Self.timeLeft(run.snapshots["t2"]?.text ?? ""), "\(run.snapshots["t2"]?.text ?? "")")
        #expect(t1 <= ttl && t2 < t1 && t1 - t2 <= 4, "the countdown went from \(t1) to \(t2)")
        let expired = run.snapshots["expired"]?.text ?? ""
        for text in ["This approval has expired. Nothing was approved. Go back to Demo Bank and send the request again.",
                     "Back to Demo Bank", "Approve this transfer", "Mallory Ltd"] {
            #expect(expired.contains(text), "the expired page lacks '\(text)': \(expired)")
        }
        #expect(!expired.contains("Time left") && !expired.contains("Decline") && !expired.contains("One Time Password"), "\(expired)")
        #expect(run.scriptErrors.isEmpty, "\(run.scriptErrors)")
        // The page found out by itself: no journey failed, nothing was refused.
        let failures = g.logLines().filter { ["login failed", "journey step rejected"].contains($0["msg"] as? String) }
        #expect(failures.isEmpty, "\(failures)")
    }

    @Test(.timeLimit(.minutes(2)))
    func aTransferApprovedWithAnEmailedCodeIsExecutedOnce() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank { try! Self.config($0, bed: bed, approval: "EmailConfirm") }
        let out = try Self.outputFolder("email-otp")
        let outbox = bed.dir.url.appendingPathComponent("outbox").path
        let run = try bed.runBrowser(g.baseURL + "/", Self.signInAndSendTransfer(out) + [
            .fillFromFile("#cb1", glob: outbox + "/*.eml", pattern: #"Your one-time code is ([0-9]{6})\."#),
            .click("#submit"),
        ] + Self.receiptOnce(g, out), timeout: 90)
        try Self.expectApprovedOnce(run, g)
    }

    /// A transfer approved by a link opened in a second browser (another profile: none of the
    /// first one's cookies): the link approves; the second browser, signed in as the same user,
    /// is where the parked transfer is executed, once.
    @Test(.timeLimit(.minutes(2)))
    func aTransferApprovedByALinkInASecondBrowserIsExecutedOnceThere() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank { try! Self.config($0, bed: bed, approval: "MagicApprove") }
        let out = try Self.outputFolder("magic-link-approval")
        let first = try bed.runBrowser(g.baseURL + "/", [
            .waitForElement("#cb1"), .fill("#cb0", "demo"), .fill("#cb1", Self.password), .click("#submit"),
            .waitForText("Everyday account"),
            .fill("#amount", "75.50"), .fill("#payee", "Alice"), .click("#send"),
            .waitForElement("#approval"), .waitForText("An email has been sent"), .snapshot("waiting"),
            .screenshot(out.appendingPathComponent("1-approval-waiting-for-link.png")),
            // The page waits: its session is live already, and going on before the approval
            // would only ask for it again (and send another email).
            .pause(5), .waitForText("An email has been sent"), .waitForText("Time left to approve"),
        ])
        #expect(first.ok, "\(first)")
        #expect(first.network.filter { $0.url.contains("authIndexType=composite_advice") && $0.type == "Document" }.count == 1, "\(first)")
        let waiting = first.snapshots["waiting"]?.text ?? ""
        #expect(waiting.contains("Approve this transfer") && waiting.contains("75.50") && waiting.contains("Alice"), "\(waiting)")
        let folder = bed.dir.url.appendingPathComponent("outbox")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        #expect(files.count == 1, "\(files)")
        let link = try #require(try ReceivedEmail(file: folder.appendingPathComponent(files.last ?? "")).magicLink()?.link)

        let second = try bed.runBrowser(link, [
            .waitForElement("#cb1"), .snapshot("signin"),
            .fill("#cb0", "demo"), .fill("#cb1", Self.password), .click("#submit"),
            .waitForPath("/receipt"), .waitForText("Transfer executed"), .snapshot("receipt"),
            .screenshot(out.appendingPathComponent("2-receipt-in-second-browser.png")),
            .reload, .open(g.baseURL + "/"), .waitForText("1 transfer made"),
        ], timeout: 60)
        #expect(second.ok, "\(second)")
        let receipt = second.snapshots["receipt"]?.text ?? ""
        #expect(receipt.contains("Alice") && receipt.contains("75.50 EUR"), "\(receipt)")
        #expect(receipt.range(of: #"Transfer number\s+1\b"#, options: .regularExpression) != nil, "\(receipt)")
        // The link approved (no session in that browser yet), then the parked transfer's URL sent it to sign in.
        #expect(second.network.contains { $0.url.hasPrefix(g.baseURL + "/transfer?_txid=") && $0.status == 307 }, "\(second)")
        #expect(second.scriptErrors.isEmpty, "\(second.scriptErrors)")
    }

    /// A magic link asked for in one browser and opened in another (a second profile: no
    /// cookie of the first): the second browser is signed in and lands on `defaultGoto`, demo-bank's
    /// home page. The same link again says, in words, that it is used up.
    @Test(.timeLimit(.minutes(2)))
    func aMagicLinkOpenedInASecondBrowserLandsOnTheHomePage() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank { try! Self.config($0, bed: bed, approval: "ConfirmTransaction") }
        let out = try Self.outputFolder("magic-link")
        let asked = try bed.runBrowser(g.baseURL + "/am/XUI/?authIndexType=service&authIndexValue=MagicLink", [
            .fill("#cb0", "demo"), .click("#submit"), .waitForText("An email has been sent"), .snapshot("sent"),
        ])
        #expect(asked.ok, "\(asked)")
        let files = try FileManager.default.contentsOfDirectory(atPath: bed.dir.url.appendingPathComponent("outbox").path)
        let email = try ReceivedEmail(file: bed.dir.url.appendingPathComponent("outbox/" + (files.sorted().last ?? "")))
        let link = try #require(email.magicLink()?.link, "\(email)")

        let opened = try bed.runBrowser(link, [
            .waitForPath("/"), .waitForText("Everyday account"), .snapshot("home"),
            .screenshot(out.appendingPathComponent("1-home-after-link.png")),
            .open(link), .waitForText("has expired or has already been used"), .snapshot("used"),
            .screenshot(out.appendingPathComponent("2-link-used.png")),
        ])
        #expect(opened.ok, "\(opened)")
        #expect(opened.cookie("iPlanetDirectoryPro") != nil, "\(opened)")
        #expect(asked.cookie("iPlanetDirectoryPro") == nil, "the first browser was signed in: \(asked)")
        let used = try #require(opened.snapshots["used"], "\(opened)")
        #expect(!used.text.contains("SuspendedAuthSessionException"), "\(used.text)")
        #expect(used.text.contains("Sign in again"), "\(used.text)")
        #expect(opened.scriptErrors.isEmpty, "\(opened.scriptErrors)")
    }

    /// Issue 24 item 12: the sign-in page offers a magic link; the tab that asked for it waits
    /// on "check your email" and, when the link is opened in another tab of the same browser
    /// (which signs the browser in), moves on by itself to where the sign-in was going.
    /// "Send another link" asks again for the same journey, the name filled in.
    @Test(.timeLimit(.minutes(2)))
    func theTabWaitingForAMagicLinkMovesOnWhenTheLinkIsOpenedInAnotherTab() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank { try! Self.config($0, bed: bed, approval: "ConfirmTransaction") }
        let out = try Self.outputFolder("magic-link-polling")
        let outbox = bed.dir.url.appendingPathComponent("outbox").path
        let run = try bed.runBrowser(g.baseURL + "/", [
            .waitForElement("#magic-link"), .click("#magic-link"),
            .waitForURLContaining("authIndexValue=MagicLink"), .waitForElement("#cb0"), .fill("#cb0", "demo"), .click("#submit"),
            .waitForText("An email has been sent"), .waitForElement("#resend"),
            .click("#resend"), .waitForElement("#cb0"), .click("#submit"),
            .waitForText("An email has been sent"), .waitForElement("#resend"), .snapshot("waiting"),
        ] + Self.screenshots(out, "1-check-your-email") + [
            .openFromFile(glob: outbox + "/*.eml", pattern: #"(https?://\S*[?&]suspendedId=[A-Za-z0-9_-]+)"#, inNewTab: true),
            .waitForPath("/"), .waitForText("Everyday account"), .snapshot("link-tab"),
            .switchTab(0), .waitForPath("/", timeout: 15), .waitForText("Everyday account"), .snapshot("first-tab"),
        ] + Self.screenshots(out, "2-first-tab-signed-in"), timeout: 90)
        #expect(run.ok, "\(run)")
        let waiting = run.snapshots["waiting"]?.text ?? ""
        #expect(waiting.contains("Send another link") && !waiting.contains("Sign-in failed"), "\(waiting)")
        let files = try FileManager.default.contentsOfDirectory(atPath: outbox).filter { $0.hasSuffix(".eml") }
        #expect(files.count == 2, "the resend sent no second link: \(files)")
        #expect(run.snapshots["first-tab"]?.url == g.baseURL + "/", "\(run)")
        // The first tab looked for the session the link made (and, on the home page, found it).
        #expect(run.network.contains { $0.url.contains("/sessions?_action=validate") && $0.status == 200 }, "\(run)")
        #expect(run.cookie("iPlanetDirectoryPro")?.httpOnly == true, "\(run)")
        #expect(run.scriptErrors.isEmpty, "\(run.scriptErrors)")
    }

    /// The JS SDK's read of the challenge, from a page on another origin (a static page served
    /// by python's http.server on its own port): a listed origin's script reads
    /// `WWW-Authenticate` from the gateway's 401 after the preflight; an origin not listed
    /// cannot read the answer at all.
    @Test(.timeLimit(.minutes(2)))
    func aScriptOnAListedOriginReadsTheChallengeHeader() throws {
        let bed = try Testbed.current
        let python = try #require(BinaryLocator.onPath("python3"), "python3 is not installed")
        try FileManager.default.createDirectory(at: bed.dir.url.appendingPathComponent("site"), withIntermediateDirectories: true)
        try bed.dir.write("site/sdk.html", Self.sdkPage)
        var origins: [String] = []
        for _ in 0..<2 {
            let port = try Ports.free()
            let server = try bed.spawn(python, ["-m", "http.server", String(port), "--bind", "127.0.0.1", "--directory",
                                                bed.dir.url.appendingPathComponent("site").path], name: "http.server")
            try server.waitForPort(port)
            origins.append("http://127.0.0.1:\(port)")
        }
        let (g, _) = try bed.startGatewayWithBank { base in
            var c = try! Self.config(base, bed: bed, approval: "ConfirmTransaction")
            c["cors"] = ["allowedOrigins": [origins[0]], "allowCredentials": true]
            return c
        }
        for (n, origin) in origins.enumerated() {
            let run = try bed.runBrowser("\(origin)/sdk.html?gw=\(Query.encode(g.baseURL))", [
                .waitForText("done", in: "#state"), .snapshot("page"),
            ])
            #expect(run.ok, "\(run)")
            let text = run.snapshots["page"]?.text ?? ""
            if n == 0 {
                #expect(text.contains("status 401"), "\(text)")
                #expect(text.contains(#"SSOADVICE realm="/",advices=""#) && text.contains("am_uri="), "\(text)")
            } else {
                #expect(text.contains("blocked") && !text.contains("SSOADVICE"), "an origin not listed read the answer: \(text)")
            }
        }
    }

    /// What the JS SDK does on a protected call: `x-authenticate-response: header` (which needs a
    /// preflight), then read the 401's `WWW-Authenticate`.
    static let sdkPage = """
        <!doctype html><html><body><p id="out">...</p><p id="state">running</p><script>
        var gw = new URLSearchParams(location.search).get("gw");
        function show(t) { document.getElementById("out").textContent = t; document.getElementById("state").textContent = "done"; }
        fetch(gw + "/transfer", {method: "POST", credentials: "include",
          headers: {"x-authenticate-response": "header", "Content-Type": "application/json"},
          body: JSON.stringify({amount: 1, currency: "EUR", payee: "Bob"})})
          .then(function (r) { show("status " + r.status + " " + r.headers.get("WWW-Authenticate")); },
                function (e) { show("blocked: " + e); });
        </script></body></html>
        """
}
