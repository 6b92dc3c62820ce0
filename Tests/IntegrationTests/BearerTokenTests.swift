import Foundation
import Testing
import TxGateCore
import TxGateCrypto
import TestSupport

/// Access tokens the gateway issued, as subjects at the PEP (WIRE-EXTENSIONS.md §7): a valid one
/// wins, one that does not verify never hides a valid session cookie, and step-up policies
/// answer bearer clients with RFC 9470's acr_values and max_age.
@Suite(.testbed) struct BearerTokenTests {
    typealias Kit = OAuthKit

    /// OAuthKit's, plus GET /echo behind a step-up that must be at most 120 s old.
    static func config() -> [String: Any] {
        var c = Kit.config()
        c["policies"] = (c["policies"] as? [[String: Any]] ?? []) + [
            ["name": "strong", "resources": ["/echo"], "actions": ["GET"], "subjects": "authenticated",
             "stepUp": ["journey": "ConfirmTransaction", "maxAgeS": 120]],
        ]
        return c
    }

    @Test func aValidAccessTokenIsASubjectAndABadOneNeverHidesTheCookie() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Self.config())
        let session = try TransactionKit.login(g)
        let token = try Kit.accessToken(g, session: session)

        let byToken = try g.fetch("GET", "/accounts", headers: [("Authorization", "Bearer \(token)")])
        #expect(byToken.status == 200, "\(byToken)")
        // Access lines reach the log within 100 ms (the worker's buffer).
        #expect(Timing.poll(timeout: 3) { g.logLines().contains { $0["path"] as? String == "/accounts" && $0["user"] as? String == "demo" } })

        // A tampered token (another sub, the old signature) is no subject …
        let parts = token.split(separator: ".")
        var claims = Kit.claims(token)
        claims["sub"] = "other"
        let forgedClaims = Base64URL.encode(Array(try JSONSerialization.data(withJSONObject: claims)))
        let forged = "\(parts[0]).\(forgedClaims).\(parts[2])"
        let alone = try g.fetch("GET", "/accounts", headers: [("Authorization", "Bearer \(forged)")])
        #expect(alone.status == 401, "\(alone)")
        #expect(alone.header("WWW-Authenticate")?.hasPrefix(#"Bearer error="invalid_token""#) == true, "\(alone.headerSummary)")
        // … and does not hide the browser's valid session cookie.
        let withCookie = try g.fetch("GET", "/accounts", headers: [("Authorization", "Bearer \(forged)"),
                                                                   ("Cookie", "iPlanetDirectoryPro=\(session)")])
        #expect(withCookie.status == 200, "\(withCookie)")
        // A token signed by a key the gateway does not publish is no subject either.
        let foreignKey = try #require(ECSigningKey.generate())
        let foreign = JWS.sign(claims.compactMapValues { v -> JSONValue? in
            if let s = v as? String { return .string(s) }
            if let n = v as? Int { return .number(n) }
            return nil
        }, typ: "at+jwt", kid: PublishedKey(foreignKey.publicKey).kid, key: foreignKey)
        #expect(try g.fetch("GET", "/accounts", headers: [("Authorization", "Bearer \(foreign)")]).status == 401)
    }

    @Test func stepUpAsksBearerClientsForTheJourneyAndMaxAge() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Self.config())
        let session = try TransactionKit.login(g)
        let login = try Kit.accessToken(g, session: session)
        let r = try g.fetch("GET", "/echo", headers: [("Authorization", "Bearer \(login)")])
        #expect(r.status == 401)
        #expect(r.header("WWW-Authenticate") == #"Bearer error="insufficient_user_authentication", error_description="A different authentication level is required", acr_values="ConfirmTransaction", max_age="120""#,
                "\(r.headerSummary)")

        // authorize?acr_values=ConfirmTransaction sends the session through that journey first …
        let challenge = PKCE.s256(Kit.verifier)
        let step = try g.fetch("GET", Kit.issuerPath + "/authorize?client_id=app&response_type=code&scope=openid"
            + "&redirect_uri=\(Query.encode("http://127.0.0.1/callback"))&code_challenge=\(challenge)&code_challenge_method=S256"
            + "&acr_values=ConfirmTransaction", headers: [("Cookie", "iPlanetDirectoryPro=\(session)")])
        #expect(step.status == 302)
        let location = try #require(step.header("Location"))
        #expect(location.contains("authIndexType=composite_advice") && location.contains("AuthenticateToServiceConditionAdvice"), "\(location)")
        // … and once the session has it, the token carries acr=ConfirmTransaction and passes.
        var codes = TransactionKit.Codes()
        let advice = try #require(Query(target: location)["authIndexValue"])
        let start = try TransactionKit.post(g, TransactionKit.authPath + "?authIndexType=composite_advice&authIndexValue=\(Query.encode(advice))",
                                            nil, headers: [("iPlanetDirectoryPro", session)])
        let done = try TransactionKit.post(g, TransactionKit.authPath, TransactionKit.answer(try start.json(), [codes.next(TransactionKit.demoSecret)]),
                                           headers: [("iPlanetDirectoryPro", session)])
        #expect(done.status == 200, "\(done)")
        let strong = try Kit.accessToken(g, session: session, extra: "&acr_values=ConfirmTransaction")
        #expect(Kit.claims(strong)["acr"] as? String == "ConfirmTransaction")
        let passed = try g.fetch("GET", "/echo", headers: [("Authorization", "Bearer \(strong)")])
        #expect(passed.status == 200, "\(passed)")
        // The gateway's own credential does not travel to the backend.
        let echoed = try passed.json()["headers"] as? [[String: String]] ?? []
        #expect(!echoed.contains { $0["name"]?.lowercased() == "authorization" }, "\(echoed)")
    }
}

/// A confidential client (a backend) authenticates with its secret (HTTP Basic or the form) to
/// redeem codes and to introspect tokens; a wrong secret is RFC 6749's 401 invalid_client.
@Suite(.testbed) struct ConfidentialClientTests {
    @Test func aConfidentialClientAuthenticatesWithItsSecret() throws {
        let bed = try Testbed.current
        _ = try bed.dir.write("backend.secret", "s3cret-backend-value-0123456789\n")
        var config = OAuthKit.config()
        var oauth = config["oauth2"] as? [String: Any] ?? [:]
        oauth["clients"] = (oauth["clients"] as? [[String: Any]] ?? []) + [[
            "clientId": "backend", "clientSecretFile": "backend.secret", "redirectUris": ["https://backend.example/cb"], "scopes": ["openid"],
        ]]
        config["oauth2"] = oauth
        let (g, _) = try bed.startGatewayWithBank(config: config)
        let token = try OAuthKit.accessToken(g, session: try TransactionKit.login(g))
        func introspect(_ auth: String?, form: String) throws -> HTTPResponse {
            try g.fetch("POST", OAuthKit.issuerPath + "/introspect",
                        headers: [("Content-Type", "application/x-www-form-urlencoded")] + (auth.map { [("Authorization", $0)] } ?? []),
                        body: Array(form.utf8))
        }
        let basic = "Basic " + Base64.encode(Array("backend:s3cret-backend-value-0123456789".utf8))
        let ok = try introspect(basic, form: "token=\(token)")
        #expect(try ok.status == 200 && ok.json()["active"] as? Bool == true, "\(ok)")
        #expect(try ok.json()["sub"] as? String == "demo")
        let post = try introspect(nil, form: "token=\(token)&client_id=backend&client_secret=s3cret-backend-value-0123456789")
        #expect(try post.json()["active"] as? Bool == true, "\(post)")
        let wrong = try introspect("Basic " + Base64.encode(Array("backend:guess".utf8)), form: "token=\(token)")
        #expect(wrong.status == 401, "\(wrong)")
        #expect(try wrong.json()["error"] as? String == "invalid_client")
        #expect(wrong.header("WWW-Authenticate")?.hasPrefix("Basic") == true)
        let noSecret = try introspect(nil, form: "token=\(token)&client_id=backend")
        #expect(noSecret.status == 401, "\(noSecret)")
        #expect(!g.process.stderr.contains("s3cret-backend-value"), "the secret must not reach the log")
    }
}
