import Foundation
import Testing
import TxGateCore
import TxGateCrypto
import TestSupport

/// The OAuth 2.0 / OpenID Connect provider driven by a real client library (authlib, from
/// PyPI), bearer clients completing a transaction through `authorize?txid=`, and Transaction
/// Tokens that demo-bank verifies (WIRE-EXTENSIONS.md §7, §9).
@Suite(.testbed) struct OAuthTests {
    typealias Kit = OAuthKit

    /// Discovery, code + PKCE (after the login page), ID token checked against the JWK Set,
    /// userinfo, refresh rotation, revoke, introspect, end session; and each refusal.
    @Test(.timeLimit(.minutes(2))) func authlibDrivesTheProviderAndEveryRefusalHolds() throws {
        let bed = try Testbed.current
        _ = try bed.dir.write("backend.secret", "s3cret-backend-value-0123456789\n")
        var config = Kit.config()
        var oauth = config["oauth2"] as? [String: Any] ?? [:]
        oauth["clients"] = (oauth["clients"] as? [[String: Any]] ?? []) + [[
            "clientId": "backend", "clientSecretFile": "backend.secret", "redirectUris": ["https://backend.example/cb"], "scopes": ["openid"],
        ]]
        config["oauth2"] = oauth
        let (g, _) = try bed.startGatewayWithBank(config: config)
        let base = "http://127.0.0.1:\(g.port)"
        let r = try Kit.runClient(bed, g, scenario: "provider")

        let disc = try #require(r["discovery"] as? [String: Any])
        #expect(disc["issuer"] as? String == base + Kit.issuerPath)
        #expect(disc["code_challenge_methods_supported"] as? [String] == ["S256"])
        #expect(disc["id_token_signing_alg_values_supported"] as? [String] == ["ES256"])
        let keys = try #require((r["jwks"] as? [String: Any])?["keys"] as? [[String: Any]])
        #expect(keys.count == 1 && keys[0]["kty"] as? String == "EC" && keys[0]["crv"] as? String == "P-256", "\(keys)")
        #expect(keys.allSatisfy { $0["d"] == nil }, "a private key part is published")

        // Without a session, authorize sends the user to the login page and back.
        let noSession = try #require(r["noSession"] as? [String: Any])
        #expect(noSession["status"] as? Int == 302)
        #expect((noSession["location"] as? String)?.hasPrefix(base + "/am/XUI/?goto=" + Query.encode(base + Kit.issuerPath + "/authorize?")) == true,
                "\(noSession)")
        let code = try #require(r["codeRedirect"] as? [String: Any])
        #expect((code["location"] as? String)?.hasPrefix("http://127.0.0.1/callback?code=") == true, "\(code)")
        #expect((code["location"] as? String)?.contains("&state=") == true)

        let id = try #require(r["idToken"] as? [String: Any])
        #expect(id["sub"] as? String == "demo" && id["acr"] as? String == "Login" && id["alg"] as? String == "ES256", "\(id)")
        #expect(id["email"] as? String == "demo@example.com")
        let at = try #require(r["accessToken"] as? [String: Any])
        #expect(at["typ"] as? String == "at+jwt" && at["kid"] as? String == keys[0]["kid"] as? String, "\(at)")
        for claim in ["iss", "sub", "aud", "exp", "iat", "jti", "client_id", "scope", "acr", "auth_time"] {
            #expect(at[claim] != nil, "RFC 9068 claim \(claim) missing: \(at)")
        }
        #expect(at["aud"] as? String == base && at["client_id"] as? String == "app")
        #expect((r["userinfo"] as? [String: Any])?["email"] as? String == "demo@example.com", "\(r["userinfo"] ?? "")")

        #expect(r["refreshRotated"] as? Bool == true)
        #expect(r["reusedRefresh"] as? String == "invalid_grant")
        #expect(r["familyAfterReuse"] as? String == "invalid_grant", "reuse must revoke the successor too")
        #expect(r["wrongVerifier"] as? String == "invalid_grant")
        #expect(r["codeAfterWrongVerifier"] as? String == "invalid_grant", "a code is spent by a failed redemption")
        #expect(r["reusedCode"] as? String == "invalid_grant")
        let unregistered = try #require(r["unregisteredRedirect"] as? [String: Any])
        #expect(unregistered["status"] as? Int == 400 && unregistered["location"] is NSNull, "\(unregistered)")
        #expect((unregistered["body"] as? [String: Any])?["error"] as? String == "invalid_request")

        #expect((r["introspectBefore"] as? [String: Any])?["active"] as? Bool == true)
        // RFC 7662 §2.1: a public client that only names itself is not an authenticated caller (issue 23 item 10).
        let publicIntrospect = try #require(r["introspectPublic"] as? [String: Any])
        #expect(publicIntrospect["status"] as? Int == 401 && (publicIntrospect["body"] as? [String: Any])?["error"] as? String == "invalid_client",
                "\(publicIntrospect)")
        #expect(r["revokeStatus"] as? Int == 200)
        #expect((r["introspectAfter"] as? [String: Any])?["active"] as? Bool == false)
        #expect(r["refreshAfterRevoke"] as? String == "invalid_grant")
        #expect(r["userinfoAfterRevoke"] as? Int == 401)
        #expect(r["endSessionUnregistered"] as? Int == 400)
        let end = try #require(r["endSession"] as? [String: Any])
        #expect(end["status"] as? Int == 302 && end["location"] as? String == "http://127.0.0.1/bye?state=s1", "\(end)")
        #expect((r["afterLogout"] as? [String: Any])?["location"].map { "\($0)".hasPrefix(base + "/am/XUI/") } == true,
                "the session must be gone after end session")
        #expect(r["refreshAfterLogout"] as? String == "invalid_grant", "ending the session revokes its refresh families")
        #expect(r["userinfoAfterLogout"] as? Int == 401)
    }

    /// 401 RFC 9470 with txid → authorize with acr_values and txid → approve → token with `txn`
    /// → retry → 201 (demo-bank verifying the Transaction Token); the same token again → a new challenge.
    @Test(.timeLimit(.minutes(2))) func aBearerClientCompletesATransferThroughAuthorizeWithTheTxid() throws {
        let bed = try Testbed.current
        let (g, _) = try startWithVerifyingBank(bed)
        var codes = TransactionKit.Codes()
        let r = try Kit.runClient(bed, g, scenario: "transfer", code: codes.next(TransactionKit.demoSecret))

        let first = try #require(r["first"] as? [String: Any])
        #expect(first["status"] as? Int == 401)
        let txid = try #require(r["txid"] as? String)
        #expect(first["challenge"] as? String == #"Bearer error="insufficient_user_authentication", error_description="A different authentication level is required", acr_values="ConfirmTransaction", txid="\#(txid)""#)
        let approval = try #require((r["approvalRedirect"] as? [String: Any])?["location"] as? String)
        #expect(approval.contains("authIndexType=composite_advice"), "\(approval)")
        #expect(r["shown"] as? [String] == ["Approve 100 EUR to Bob?"])
        #expect(r["approved"] as? Int == 200)
        #expect(r["txn"] as? String == txid)
        // Issue 23 item 3: the approval completes the transaction, nothing more: the token keeps the
        // acr and auth_time of the login that happened, and a refresh does not carry the txn.
        let before = try #require(r["authBefore"] as? [String: Any])
        let after = try #require(r["authAfter"] as? [String: Any])
        #expect(after["acr"] as? String == before["acr"] as? String && before["acr"] as? String == "Login", "\(before) → \(after)")
        #expect((after["auth_time"] as? Int) == (before["auth_time"] as? Int), "the approval refreshed auth_time: \(before) → \(after)")
        if let refreshed = r["authRefreshed"] as? [String: Any] {
            #expect(refreshed["acr"] as? String == "Login" && refreshed["txn"] as? String == nil, "\(refreshed)")
        }
        let retry = try #require(r["retry"] as? [String: Any])
        #expect(retry["status"] as? Int == 201, "\(retry)")
        #expect((retry["body"] as? [String: Any])?["status"] as? String == "executed")
        let again = try #require(r["again"] as? [String: Any])
        #expect(again["status"] as? Int == 401)
        let challenge = try #require(again["challenge"] as? String)
        #expect(challenge.contains("txid=") && !challenge.contains(txid), "the consumed TxId must not come back: \(challenge)")
    }

    /// demo-bank with --txn-token-jwks runs a transfer only with a Txn-Token from the gateway's
    /// keys, in time, for its audience, approving exactly this body.
    @Test func demoBankRefusesMissingExpiredForeignAndOtherAmountTokens() throws {
        let bed = try Testbed.current
        let (_, bank) = try startWithVerifyingBank(bed)
        let key = try Kit.gatewayKey(bed)
        let bound: [String: JSONValue] = ["/amount": 100, "/currency": "EUR", "/payee": "Bob"]
        func transfer(_ token: String?, body: [UInt8] = TransactionKit.transferBody) throws -> HTTPResponse {
            try RawHTTPClient.fetch(port: bank.port, "POST", "/transfer",
                                    headers: [("Content-Type", "application/json")] + (token.map { [("Txn-Token", $0)] } ?? []), body: body)
        }
        let valid = Kit.txnToken(key: key, bound: bound)
        #expect(try transfer(valid).status == 201)
        let replayed = try transfer(valid)
        #expect(replayed.status == 403 && replayed.bodyText.contains("already used"), "a Txn-Token works once: \(replayed)")
        let missing = try transfer(nil)
        #expect(missing.status == 401 && missing.bodyText.contains("needs a Txn-Token"), "\(missing)")
        let expired = try transfer(Kit.txnToken(key: key, bound: bound, exp: Int(Date().timeIntervalSince1970) - 5))
        #expect(expired.status == 401 && expired.bodyText.contains("expired"), "\(expired)")
        let foreign = try transfer(Kit.txnToken(key: try #require(ECSigningKey.generate()), bound: bound))
        #expect(foreign.status == 401, "\(foreign)")
        let otherAudience = try transfer(Kit.txnToken(key: key, bound: bound, audience: "another-bank"))
        #expect(otherAudience.status == 401, "\(otherAudience)")
        let otherAmount = try transfer(Kit.txnToken(key: key, bound: bound), body: Array(#"{"amount":1000,"currency":"EUR","payee":"Bob"}"#.utf8))
        #expect(otherAmount.status == 403 && otherAmount.bodyText.contains("/amount"), "\(otherAmount)")
    }

    /// A browser's transfer is a form (replayed from its parked request): demo-bank reads its
    /// fields as the gateway bound them (strings) and runs it only as approved.
    @Test func demoBankChecksAFormTransferAgainstTheApprovedFields() throws {
        let bed = try Testbed.current
        let (_, bank) = try startWithVerifyingBank(bed)
        let key = try Kit.gatewayKey(bed)
        let bound: [String: JSONValue] = ["/amount": "2500", "/currency": "EUR", "/payee": "Mallory Ltd"]
        func transfer(_ form: String) throws -> HTTPResponse {
            try RawHTTPClient.fetch(port: bank.port, "POST", "/transfer",
                                    headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Txn-Token", Kit.txnToken(key: key, bound: bound))],
                                    body: Array(form.utf8))
        }
        let approved = try transfer("amount=2500&currency=EUR&payee=Mallory+Ltd")
        #expect(approved.status == 303 && approved.header("Location")?.hasPrefix("/receipt") == true, "\(approved)")
        let other = try transfer("amount=9999&currency=EUR&payee=Mallory+Ltd")
        #expect(other.status == 403 && other.bodyText.contains("/amount"), "\(other)")
    }

    /// The gateway sends a Txn-Token for a consumed transaction (and for every allowed request
    /// with forAll), and never forwards one the client sent.
    @Test func theGatewaySignsTxnTokensAndDropsClientSentOnes() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config([
            "txnTokens": ["enabled": true, "audience": "demo-bank", "forAll": true],
            "policies": [["name": "echo-get", "resources": ["/echo"], "actions": ["GET"], "subjects": "authenticated"]],
        ]))
        let token = try TransactionKit.login(g)
        let echoed = try g.fetch("GET", "/echo", headers: [("iPlanetDirectoryPro", token), ("Txn-Token", "forged.by.client")])
        #expect(echoed.status == 200, "\(echoed)")
        let headers = try #require(try echoed.json()["headers"] as? [[String: String]])
        let values = headers.filter { $0["name"]?.lowercased() == "txn-token" }.compactMap { $0["value"] }
        #expect(values.count == 1 && values.first != "forged.by.client", "\(values)")
        let jwt = try #require(values.first)
        #expect(Kit.header(jwt)["typ"] as? String == "txntoken+jwt" && Kit.header(jwt)["alg"] as? String == "ES256")
        let claims = Kit.claims(jwt)
        #expect(claims["sub"] as? String == "demo" && claims["aud"] as? String == "demo-bank", "\(claims)")
        #expect(claims["txn"] as? String == echoed.header("X-Request-Id"), "without a transaction, txn is the request id: \(claims)")
        let exp = try #require(claims["exp"] as? Int), iat = try #require(claims["iat"] as? Int)
        #expect(exp - iat == 60)
        #expect((claims["rctx"] as? [String: Any])?["req_ip"] as? String == "127.0.0.1")
        // It verifies with the published keys.
        let jwks = try g.fetch("GET", Kit.issuerPath + "/connect/jwk_uri")
        let keys = try #require(PublishedKey.parseSet(jwks.body))
        #expect(throws: Never.self) {
            try JWS.verify(jwt, typ: "txntoken+jwt", now: Int(Date().timeIntervalSince1970), keys: { kid in keys.first { $0.kid == kid }?.key })
        }
    }

    /// demo-bank verifying Transaction Tokens from the gateway's JWK Set; the gateway sends them
    /// for consumed transactions.
    private func startWithVerifyingBank(_ bed: Testbed) throws -> (GatewayInstance, DemoBankInstance) {
        let bankPort = try Ports.free()
        let g = try bed.startGateway(upstream: "http://127.0.0.1:\(bankPort)",
                                     config: Kit.config(["txnTokens": ["enabled": true, "audience": "demo-bank"]]))
        let bank = try bed.startDemoBank(port: bankPort, arguments: [
            "--txn-token-jwks", "http://127.0.0.1:\(g.port)\(Kit.issuerPath)/connect/jwk_uri",
        ])
        return (g, bank)
    }
}

/// Key rotation: a newer key file starts signing after a SIGHUP; an older key stays published
/// while tokens it signed can be alive, and not after.
@Suite(.testbed) struct TokenKeyRotationTests {
    @Test func aNewerKeySignsAfterReloadAndRetiredKeysAreNotPublished() throws {
        let bed = try Testbed.current
        let folder = bed.dir.url.appendingPathComponent("var/token-keys")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let now = Date()
        func writeKey(_ name: String, age: TimeInterval) throws -> ECSigningKey {
            let key = try #require(ECSigningKey.generate())
            let url = folder.appendingPathComponent(name)
            try Data(key.pem).write(to: url)
            try FileManager.default.setAttributes([.modificationDate: now.addingTimeInterval(-age), .posixPermissions: 0o600],
                                                  ofItemAtPath: url.path)
            return key
        }
        // key-1 was replaced by key-2 two days ago: its tokens (300 s at most) are long gone.
        let retired = try writeKey("key-1.pem", age: 3 * 86_400)
        let previous = try writeKey("key-2.pem", age: 2 * 86_400)
        let (g, _) = try bed.startGatewayWithBank(config: OAuthKit.config())
        func kids() throws -> [String] {
            let r = try g.fetch("GET", OAuthKit.issuerPath + "/connect/jwk_uri")
            return try #require(PublishedKey.parseSet(r.body)).map(\.kid)
        }
        let kid = { (k: ECSigningKey) in PublishedKey(k.publicKey).kid }
        #expect(try kids() == [kid(previous)], "key-1 is retired, key-2 signs")

        let newer = try writeKey("key-3.pem", age: 0)
        _ = try ReloadTests.reload(g, until: "config reloaded")
        #expect(try kids() == [kid(newer), kid(previous)], "key-3 signs, key-2's tokens may still be alive")
        #expect(!(try kids()).contains(kid(retired)))
        let token = try OAuthKit.accessToken(g, session: try TransactionKit.login(g))
        #expect(OAuthKit.header(token)["kid"] as? String == kid(newer))
    }
}

extension OAuthTests {
    /// Issue 23 item 10: `connect/endSession` without `id_token_hint` does not log the user out
    /// from any page's navigation (logout CSRF): it asks, and the POST must come from the
    /// gateway's own origin.
    @Test func endSessionWithoutAHintAsksFirst() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config())
        let token = try TransactionKit.login(g)
        let cookie = ("Cookie", "iPlanetDirectoryPro=\(token)")
        let endSession = Kit.issuerPath + "/connect/endSession"
        func alive() throws -> Bool {
            try g.fetch("GET", "/accounts", headers: [cookie, ("x-authenticate-response", "header")]).status == 200
        }
        let asked = try g.fetch("GET", endSession, headers: [cookie])
        #expect(asked.status == 200 && asked.header("Content-Type")?.hasPrefix("text/html") == true, "\(asked)")
        #expect(asked.bodyText.contains("<form method=\"post\""), "\(asked.bodyText)")
        #expect(try alive(), "a GET without id_token_hint ended the session")

        let form = [cookie, ("Content-Type", "application/x-www-form-urlencoded")]
        let crossSite = try g.fetch("POST", endSession, headers: form + [("Origin", "https://evil.example")], body: [])
        expectGatewayError(crossSite, 403)
        #expect(try alive(), "a cross-site POST ended the session")
        let noOrigin = try g.fetch("POST", endSession, headers: form, body: [])
        expectGatewayError(noOrigin, 403)

        let confirmed = try g.fetch("POST", endSession, headers: form + [("Origin", "http://127.0.0.1:\(g.port)")], body: [])
        #expect(confirmed.status == 200 && confirmed.bodyText.contains("loggedOut"), "\(confirmed)")
        #expect(try !alive(), "the confirmed logout left the session alive")
    }
}

/// Issue 28 item 3: with `bearer.transactionChallenge: scope`, a client of the gateway's own
/// audience is asked for a transaction as MCP clients are (403 insufficient_scope), re-authorizes
/// with the scope it names, and its transfer runs once. Without it, RFC 9470's 401 (above).
extension OAuthTests {
    @Test(.timeLimit(.minutes(2))) func aScopeChallengeIsAnsweredByAuthorizingTheTransactionScope() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config(["bearer": ["transactionChallenge": "scope"]]))
        let session = try TransactionKit.login(g)
        let first = try Kit.accessToken(g, session: session)
        let bearer = [("Authorization", "Bearer \(first)"), ("Content-Type", "application/json")]
        let challenged = try g.fetch("POST", "/transfer", headers: bearer, body: TransactionKit.transferBody)
        #expect(challenged.status == 403, "\(challenged)")
        let header = try #require(challenged.header("WWW-Authenticate"))
        let scope = try #require(header.firstMatch(of: /scope="([^"]+)"/)?.output.1).split(separator: " ").map(String.init)
        #expect(header.hasPrefix(#"Bearer error="insufficient_scope", scope="openid profile transaction:"#)
                && header.hasSuffix(#"resource_metadata="\#(g.baseURL)/.well-known/oauth-protected-resource""#), "\(header)")
        let txid = try #require(scope.last.map { String($0.dropFirst("transaction:".count)) })
        var codes = TransactionKit.Codes()
        try TransactionKit.approve(g, txid: txid, token: session, code: codes.next(TransactionKit.demoSecret))
        let approved = try Kit.accessToken(g, session: session, scope: scope.joined(separator: " "))
        #expect(Kit.claims(approved)["txn"] as? String == txid)
        let retry = [("Authorization", "Bearer \(approved)"), ("Content-Type", "application/json")]
        #expect(try g.fetch("POST", "/transfer", headers: retry, body: TransactionKit.transferBody).status == 201)
        #expect(try g.fetch("POST", "/transfer", headers: retry, body: TransactionKit.transferBody).status == 403, "the approval opened a second transfer")
        // A session token sent as a bearer (no access token) keeps RFC 9470's form.
        let plain = try g.fetch("POST", "/transfer", headers: [("Authorization", "Bearer \(session)"), ("Content-Type", "application/json")],
                                body: TransactionKit.transferBody)
        #expect(plain.status == 401 && plain.header("WWW-Authenticate")?.contains("insufficient_user_authentication") == true, "\(plain)")
    }
}
