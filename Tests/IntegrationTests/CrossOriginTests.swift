import Foundation
import Testing
import TxGateCore
import TestSupport

/// What a single-page app on another origin, and a browser holding both a session cookie and
/// an SDK's bearer token, see on the wire: CORS preflights answered by the gateway for `/am/`
/// and proxied routes, `WWW-Authenticate` exposed to listed origins only, `session.sameSite`,
/// `loginPage.defaultGoto`, and a bearer token that identifies no one not hiding the cookie.
@Suite(.testbed) struct CrossOriginTests {
    typealias Kit = TransactionKit
    static let app = "http://app.example.test:3000"
    static var cors: [String: Any] { ["cors": ["allowedOrigins": [app], "allowCredentials": true, "maxAgeS": 120]] }

    static func preflight(_ g: GatewayInstance, _ target: String, origin: String, method: String = "POST") throws -> HTTPResponse {
        try g.fetch("OPTIONS", target, headers: [
            ("Origin", origin), ("Access-Control-Request-Method", method),
            ("Access-Control-Request-Headers", "content-type, x-authenticate-response, accept-api-version"),
        ])
    }

    @Test func preflightsFromAListedOriginAreAnsweredByTheGateway() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config(Self.cors))
        for target in ["/echo", "/transfer", "/am/json/realms/root/authenticate"] {
            let r = try Self.preflight(g, target, origin: Self.app)
            #expect(r.status == 204, "\(target):\n\(r)")
            #expect(r.header("Access-Control-Allow-Origin") == Self.app, "\(r)")
            #expect(r.header("Access-Control-Allow-Credentials") == "true", "\(r)")
            #expect(r.header("Access-Control-Allow-Methods") == "POST", "\(r)")
            #expect(r.header("Access-Control-Allow-Headers") == "content-type, x-authenticate-response, accept-api-version", "\(r)")
            #expect(r.header("Access-Control-Max-Age") == "120", "\(r)")
            #expect(r.header("Vary") == "Origin", "\(r)")
            #expect(r.body.isEmpty, "\(target): the preflight reached demo-bank's /echo? \(r)")
        }
    }

    @Test func aPreflightFromAnOriginNotListedIsRefused() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config(Self.cors))
        for origin in ["http://evil.example.test:3000", "http://app.example.test:3001", "https://app.example.test:3000", "null"] {
            let r = try Self.preflight(g, "/transfer", origin: origin)
            #expect(r.status == 403, "\(origin):\n\(r)")
            #expect(r.header("Access-Control-Allow-Origin") == nil, "\(r)")
            #expect((try? r.json()["message"] as? String)??.contains("cors.allowedOrigins") == true, "\(r)")
        }
        // Without a cors section, there is no CORS answer at all.
        let (plain, _) = try bed.startGatewayWithBank(config: Kit.config())
        let r = try Self.preflight(plain, "/transfer", origin: Self.app)
        #expect(r.header("Access-Control-Allow-Origin") == nil, "\(r)")
    }

    @Test func aListedOriginReadsTheChallengeAndMayAuthenticate() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config(Self.cors))
        let token = try Kit.login(g)

        let challenged = try g.fetch("POST", "/transfer", headers: Kit.apiHeaders(token) + [("Origin", Self.app)], body: Kit.transferBody)
        #expect(challenged.status == 401, "\(challenged)")
        #expect(challenged.header("Access-Control-Allow-Origin") == Self.app)
        #expect(challenged.header("Access-Control-Allow-Credentials") == "true")
        let exposed = challenged.header("Access-Control-Expose-Headers")?.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(exposed?.contains("WWW-Authenticate") == true, "\(challenged)")

        // A proxied answer gets the gateway's CORS headers too.
        let proxied = try g.fetch("GET", "/accounts", headers: [("iPlanetDirectoryPro", token), ("Origin", Self.app)])
        #expect(proxied.status == 200 && proxied.header("Access-Control-Allow-Origin") == Self.app, "\(proxied)")

        // The authentication API: a listed origin may start a journey, any other is refused (login CSRF).
        let start = try Kit.post(g, Kit.authPath, nil, headers: [("Origin", Self.app)])
        #expect(start.status == 200 && start.header("Access-Control-Allow-Origin") == Self.app, "\(start)")
        let evil = try Kit.post(g, Kit.authPath, nil, headers: [("Origin", "http://evil.example.test")])
        #expect(evil.status == 403 && evil.header("Access-Control-Allow-Origin") == nil, "\(evil)")
        let unlisted = try g.fetch("POST", "/transfer", headers: Kit.apiHeaders(token) + [("Origin", "http://evil.example.test")],
                                   body: Kit.transferBody)
        #expect(unlisted.header("Access-Control-Allow-Origin") == nil && unlisted.header("Access-Control-Expose-Headers") == nil)
    }

    @Test func sameSiteIsConfigurableAndNoneNeedsHTTPS() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config(["session": ["sameSite": "Strict"]]))
        let start = try Kit.post(g, Kit.authPath, nil)
        let done = try Kit.post(g, Kit.authPath, Kit.answer(try start.json(), ["demo", Kit.password]))
        let cookie = try #require(done.header("Set-Cookie"), "\(done)")
        #expect(cookie.contains("; SameSite=Strict") && cookie.contains("HttpOnly"), "\(cookie)")

        let none = try bed.check(configText: #"{"upstream": {"url": "http://127.0.0.1:9"}, "session": {"sameSite": "None"}}"#)
        #expect(none.status != 0 && none.stderr.contains("session.sameSite") && none.stderr.contains("Secure"), "\(none)")
        let bad = try bed.check(configText: #"{"upstream": {"url": "http://127.0.0.1:9"}, "session": {"sameSite": "lax"}}"#)
        #expect(bad.status != 0 && bad.stderr.contains("'lax' is not one of Lax, Strict, None"), "\(bad)")
        let https = try bed.check(configText: #"{"upstream": {"url": "http://127.0.0.1:9"}, "publicUrl": "https://gw.example.com", "session": {"sameSite": "None"}}"#)
        #expect(https.status == 0, "\(https)")
    }

    @Test func aLoginWithNoGotoLandsOnDefaultGoto() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config(["loginPage": ["defaultGoto": "/accounts"]]))
        let start = try Kit.post(g, Kit.authPath, nil)
        let done = try Kit.post(g, Kit.authPath, Kit.answer(try start.json(), ["demo", Kit.password]))
        #expect(try done.json()["successUrl"] as? String == "/accounts", "\(done)")

        let off = try bed.check(configText: #"{"upstream": {"url": "http://127.0.0.1:9"}, "loginPage": {"defaultGoto": "https://evil.example.com/"}}"#)
        #expect(off.status != 0 && off.stderr.contains("loginPage.defaultGoto"), "\(off)")
    }

    /// The SDKs add `Authorization: Bearer` whenever they hold OAuth tokens: one the gateway
    /// cannot validate must not hide the session cookie; one it can wins over the cookie.
    @Test func aBearerThatIdentifiesNoOneDoesNotHideTheSessionCookie() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config())
        let demo = try Kit.login(g)
        let other = try Kit.login(g, user: "other")

        let withCookie = try g.fetch("GET", "/accounts", headers: [
            ("Authorization", "Bearer eyJhbGciOiJSUzI1NiJ9.not-ours.sig"), ("Cookie", "iPlanetDirectoryPro=\(demo)"),
        ])
        #expect(withCookie.status == 200, "an unknown bearer hid the session cookie:\n\(withCookie)")

        let bearerWins = try g.fetch("GET", "/accounts", headers: [
            ("Authorization", "Bearer \(other)"), ("Cookie", "iPlanetDirectoryPro=\(demo)"), ("X-Request-Id", "bearer-wins-1"),
        ])
        #expect(bearerWins.status == 200, "\(bearerWins)")
        var line: [String: Any]?
        Timing.poll(timeout: 3) {  // access lines reach the log within 100 ms (the worker's buffer)
            line = g.logLines().first { $0["request_id"] as? String == "bearer-wins-1" && $0["log"] as? String == "access" }
            return line != nil
        }
        #expect(line?["user"] as? String == "other", "the valid bearer must win: \(String(describing: line))")

        // Alone, an unknown bearer is still told so (RFC 6750), never served.
        let alone = try g.fetch("GET", "/accounts", headers: [("Authorization", "Bearer not-ours")])
        #expect(alone.status == 401, "\(alone)")
        #expect(alone.header("WWW-Authenticate")?.contains(#"error="invalid_token""#) == true, "\(alone)")
    }

    /// The approval page shows the bound fields only to the session that must approve them,
    /// under a CSP that still allows nothing but its own script (and a data: logo).
    @Test func theApprovalRowsAreShownOnlyToTheirUserUnderTheStrictCSP() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config(["loginPage": ["title": "Demo Bank", "approvalTitle": "Approve this transfer"]]))
        let demo = try Kit.login(g)
        let other = try Kit.login(g, user: "other")
        let body = Array(#"{"amount":2500,"currency":"EUR","payee":"<b>Mallory</b> Ltd"}"#.utf8)
        let txid = try Kit.challengeTxid(try Kit.transfer(g, token: demo, body: body))
        let page = "/am/XUI/?goto=%2Ftransfer&authIndexType=composite_advice&authIndexValue=\(Query.encode(Kit.adviceXML(txid)))"

        let mine = try g.fetch("GET", page, headers: [("Cookie", "iPlanetDirectoryPro=\(demo)")])
        #expect(mine.status == 200, "\(mine)")
        for text in ["<h1 id=\"heading\">Approve this transfer</h1>", "<dt>Amount</dt><dd>2500\u{00A0}EUR</dd>",
                     "<dt>Payee</dt><dd>&lt;b&gt;Mallory&lt;/b&gt; Ltd</dd>", "<span>Demo Bank</span>"] {
            #expect(mine.bodyText.contains(text), "\(text) not in:\n\(mine.bodyText.prefix(3000))")
        }
        let csp = try #require(mine.header("Content-Security-Policy"))
        #expect(csp.hasPrefix("default-src 'none'; script-src 'sha256-") && csp.contains("img-src data:;"), "\(csp)")
        #expect(!csp.contains("unsafe-eval") && !csp.contains("http") && !csp.contains("*"), "\(csp)")
        #expect(mine.bodyText.components(separatedBy: "<script").count == 2, "one inline script, no other")
        #expect(!mine.bodyText.contains("src=\"http") && !mine.bodyText.contains("href=\"http"), "an external asset")

        for headers in [[("Cookie", "iPlanetDirectoryPro=\(other)")], []] {
            let theirs = try g.fetch("GET", page, headers: headers)
            #expect(theirs.status == 200, "\(theirs)")
            #expect(!theirs.bodyText.contains("Mallory") && !theirs.bodyText.contains("2500"), "another user saw the approval")
            #expect(theirs.bodyText.contains("<h1 id=\"heading\">Sign in</h1>"))
        }
    }
}

