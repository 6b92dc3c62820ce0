import Foundation
import Testing
import TxGateCore
import TxGateCrypto
import TestSupport

/// The login page (`/am/XUI/`) in a real browser: Debian's headless Chromium, driven by
/// browser/drive.py. A person opens a protected page, is sent to the login page, signs in and
/// lands where they were going. Serialized: one Chromium at a time is plenty for 2 cores.
@Suite(.serialized, .testbed, .enabled(if: Browser.isInstalled, Comment(rawValue: Browser.notInstalled)))
struct BrowserTests {
    static let password = "Ch4ngeMe!"
    static let hash = PasswordHash.hash(password)
    static let cookieName = "iPlanetDirectoryPro"

    /// Users, a Login journey and policies: /accounts needs a session, /health does not.
    /// `publicUrl` is the gateway's real URL, so redirects and `goto` use it.
    static func config(_ baseURL: String) -> [String: Any] {
        [
            "publicUrl": baseURL,
            "users": [
                ["username": "demo", "passwordHash": hash, "email": "demo@example.com"],
            ],
            "journeys": ["Login": [["type": "UsernamePassword"]]],
            "policies": [
                ["name": "accounts", "resources": ["/accounts"], "actions": ["GET"], "subjects": "authenticated"],
                ["name": "health", "resources": ["/health"], "actions": ["GET"], "subjects": "anyone"],
            ],
        ]
    }

    static func loginPage(_ g: GatewayInstance, goto: String) -> String {
        "\(g.baseURL)/am/XUI/?goto=\(Query.encode(goto))&authIndexType=service&authIndexValue=Login"
    }

    /// a. No session → 307 to the login page → username and password → back on /accounts.
    @Test(.timeLimit(.minutes(1)))
    func aPersonSignsInThroughThePageAndLandsOnGoto() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(configForURL: Self.config)
        let target = g.baseURL + "/accounts"

        let run = try bed.runBrowser(target, [
            .waitForElement("#cb0"),
            .waitForElement("#cb1"),
            .snapshot("login"),
            .fill("#cb0", "demo"),
            .fill("#cb1", Self.password),
            .click("#submit"),
            .waitForPath("/accounts"),
            .waitForText("acc-001"),
        ])
        #expect(run.ok, "\(run)")

        // The first answer was the gateway's browser challenge: 307 to its login page with goto.
        let redirect = run.network.first { $0.url == target }
        #expect(redirect?.status == 307, "\(run)")
        #expect(redirect?.location == "\(g.baseURL)/am/XUI/?goto=\(Query.encode(target))", "\(run)")
        let login = try #require(run.snapshots["login"], "\(run)")
        #expect(login.path == "/am/XUI/")
        #expect(login.url.hasPrefix("\(g.baseURL)/am/XUI/?goto="))
        #expect(login.redirectCount == 1, "the login page was reached by one redirect")
        #expect(login.text.contains("Sign in") && login.text.contains("User Name") && login.text.contains("Password"))

        // It landed on goto, and demo-bank answered through the gateway.
        #expect(run.url == target, "\(run)")
        #expect(run.text.contains("acc-001"), "\(run)")

        // The session cookie: set, HttpOnly (a script cannot read it), and a valid session of demo's.
        let cookie = try #require(run.cookie(Self.cookieName), "no \(Self.cookieName) cookie: \(run)")
        #expect(cookie.httpOnly, "\(cookie)")
        #expect(!cookie.secure, "plain http: the cookie cannot be Secure")
        #expect(cookie.sameSite == "Lax", "\(cookie)")
        #expect(!run.documentCookie.contains(Self.cookieName), "document.cookie: \(run.documentCookie)")
        let valid = try g.fetch("POST", "/am/json/realms/root/sessions?_action=validate",
                                headers: [("Content-Type", "application/json"), ("Accept-API-Version", "resource=2.0, protocol=1.0"),
                                          (Self.cookieName, cookie.value)], body: Array("{}".utf8))
        #expect(try valid.json()["valid"] as? Bool == true, "\(valid)")
        #expect(try valid.json()["uid"] as? String == "demo", "\(valid)")

        // The browser's own /favicon.ico request gets the gateway's 403 (no policy names it);
        // anything else in the console is the page's fault.
        let errors = run.consoleErrors.filter { !$0.contains("/favicon.ico ") }
        #expect(errors.isEmpty, "the page logged errors: \(errors)")
        #expect(!g.process.stderr.contains(Self.password))
    }

    /// b. A wrong password: the page says so and stays the login page, with no session.
    @Test(.timeLimit(.minutes(1)))
    func aWrongPasswordIsShownOnThePage() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(configForURL: Self.config)
        let start = Self.loginPage(g, goto: g.baseURL + "/accounts")

        let run = try bed.runBrowser(start, [
            .fill("#cb0", "demo"),
            .fill("#cb1", "not-the-password"),
            .click("#submit"),
            .waitForText("Sign-in failed.", in: "#status"),
            .pause(1),  // and nothing else happens: no navigation
            .snapshot("refused"),
            // The page offers to start again, with a fresh journey.
            .click("form#step button"),
            .waitForElement("#cb0"),
            .waitForElement("#cb1"),
        ])
        #expect(run.ok, "\(run)")
        let refused = try #require(run.snapshots["refused"], "\(run)")
        #expect(refused.url == start, "\(run)")
        #expect(refused.text.contains("Sign-in failed."))
        #expect(run.url == start, "\(run)")
        #expect(run.path == "/am/XUI/")
        #expect(run.cookie(Self.cookieName) == nil, "\(run)")
        #expect(!run.network.contains { $0.type == "Document" && $0.url.contains("/accounts") }, "\(run)")
        // The refused POST shows as the browser's own "Failed to load resource: 401" line; no
        // script error.
        #expect(run.scriptErrors.isEmpty, "the page logged errors: \(run.scriptErrors)")
        #expect(run.network.contains { $0.type == "Fetch" && $0.status == 401 }, "\(run)")
    }

    /// c. A login link whose goto leads to another site shows the refusal page and goes nowhere.
    @Test(.timeLimit(.minutes(1)))
    func anOpenRedirectIsRefusedOnThePage() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(configForURL: Self.config)
        let refusal = "This login link is not valid: it would send you to another site."
        let gotos = ["https://evil.example.com/", "//evil.example.com/", "/\\evil.example.com/",
                     "javascript:alert(1)", "http://127.0.0.1:\(g.port + 1)/accounts"]
        let urls = gotos.map { "\(g.baseURL)/am/XUI/?goto=\(Query.encode($0))" }

        var steps: [BrowserStep] = []
        for (n, url) in urls.enumerated() {
            if n > 0 { steps.append(.open(url)) }
            steps += [.waitForText(refusal), .pause(n == 0 ? 1.5 : 0.3), .snapshot("\(n)")]
        }
        let run = try bed.runBrowser(urls[0], steps)
        #expect(run.ok, "\(run)")
        for (n, url) in urls.enumerated() {
            let s = try #require(run.snapshots["\(n)"], "\(run)")
            #expect(s.url == url, "goto \(gotos[n]): the browser moved to \(s.url)")
            #expect(s.text.contains(refusal), "goto \(gotos[n]): \(s.text)")
            #expect(!s.text.contains("User Name"), "goto \(gotos[n]): the form was shown")
        }
        // Each was answered 400 with the page, and the browser asked for nothing else.
        let documents = run.network.filter { $0.type == "Document" && $0.url.hasPrefix("http") }
        #expect(documents.map(\.url) == urls, "\(run)")
        #expect(documents.allSatisfy { $0.status == 400 }, "\(run)")
        #expect(!run.network.contains { $0.url.contains("evil.example.com") && $0.type != "Document" }, "\(run)")
        #expect(!run.network.contains { $0.type == "Fetch" }, "the refusal page has no script: \(run)")
        #expect(run.scriptErrors.isEmpty, "\(run.scriptErrors)")
        #expect(run.cookie(Self.cookieName) == nil)
    }
}
