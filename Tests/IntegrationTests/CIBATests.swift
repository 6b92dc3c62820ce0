import Foundation
import Testing
import TestSupport
import TxGateCore
import TxGateCrypto

/// Issue 28 item 1, poll mode: an agent (a confidential client) asks on the back channel for
/// demo's approval; the person approves on the approval page (the emailed link, the approver
/// journey); the agent's poll gets tokens once, and a transaction approved so runs once.
@Suite("CIBA, poll mode", .testbed)
struct CIBATests {
    typealias Kit = TransactionKit
    typealias A = ApprovalKit
    static let secret = "agent-secret-0123456789"
    static let bcPath = "/am/oauth2/realms/root/bc-authorize", tokenPath = "/am/oauth2/realms/root/access_token"

    /// An EC P-256 key of the `signed` client (private_key_jwt): its PEM for authlib, its public JWK Set for the gateway.
    static func clientKey(_ bed: Testbed) throws -> (pem: URL, jwks: URL) {
        let pem = bed.dir.url.appendingPathComponent("signed.pem")
        let gen = try bed.runTool("openssl", ["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", pem.path])
        guard gen.status == 0 else { throw HarnessError("openssl: \(gen)") }
        let pkcs8 = try bed.runTool("openssl", ["pkcs8", "-topk8", "-nocrypt", "-in", pem.path, "-out", pem.path + ".p8"])
        guard pkcs8.status == 0 else { throw HarnessError("openssl: \(pkcs8)") }
        let jwk = try bed.runTool("python3", ["-c", """
            import json, sys
            from authlib.jose import JsonWebKey
            key = JsonWebKey.import_key(open(sys.argv[1]).read(), {"kty": "EC", "kid": "k1", "use": "sig"})
            print(json.dumps({"keys": [key.as_dict(is_private=False)]}))
            """, pem.path + ".p8"])
        guard jwk.status == 0 else { throw HarnessError("authlib jwk: \(jwk)") }
        let jwks = try bed.dir.write("signed.jwks.json", jwk.stdout)
        return (URL(fileURLWithPath: pem.path + ".p8"), jwks)
    }

    func start(pingTo: String = "http://127.0.0.1:9/cb") throws -> GatewayInstance {
        let bed = try Testbed.current
        let secretFile = try bed.dir.write("agent.secret", Self.secret)
        let jwks = try Self.clientKey(bed).jwks
        let (g, _) = try bed.startGatewayWithBank(config: A.config(approver: "ApproverConfirm", [
            "oauth2": [
                "clients": [
                    ["clientId": "agent", "clientSecretFile": secretFile.path, "scopes": ["openid"], "redirectUris": ["https://agent.example/cb"],
                     "ciba": ["users": ["demo"]]],
                    ["clientId": "other", "clientSecretFile": secretFile.path, "scopes": ["openid"], "redirectUris": ["https://other.example/cb"],
                     "ciba": ["users": ["*"]]],
                    ["clientId": "pinger", "clientSecretFile": secretFile.path, "scopes": ["openid"], "redirectUris": ["https://pinger.example/cb"],
                     "ciba": ["users": ["demo"], "notificationEndpoint": pingTo]],
                    ["clientId": "signed", "jwksFile": jwks.path, "scopes": ["openid"], "redirectUris": ["https://signed.example/cb"],
                     "ciba": ["users": ["demo"]]],
                ],
                "ciba": ["approverJourney": "ApproverConfirm", "channels": ["email"], "expiresInS": 60, "intervalS": 2],
            ],
        ]))
        return g
    }

    func basic(_ client: String, _ secret: String = CIBATests.secret) -> (String, String) {
        ("Authorization", "Basic " + Data("\(client):\(secret)".utf8).base64EncodedString())
    }

    func post(_ g: GatewayInstance, _ path: String, _ form: String, client: String = "agent", secret: String = CIBATests.secret) throws -> HTTPResponse {
        try g.fetch("POST", path, headers: [("Content-Type", "application/x-www-form-urlencoded"), basic(client, secret)], body: Array(form.utf8))
    }

    func poll(_ g: GatewayInstance, _ id: String, client: String = "agent") throws -> HTTPResponse {
        try post(g, Self.tokenPath, "grant_type=urn%3Aopenid%3Aparams%3Agrant-type%3Aciba&auth_req_id=\(id)", client: client)
    }

    func error(_ r: HTTPResponse) -> String? { (try? r.json())?["error"] as? String }

    /// The approval request's id, from the email sent to the person.
    func approvalId(_ g: GatewayInstance, count: Int) throws -> String {
        let outbox = g.configURL.deletingLastPathComponent().appendingPathComponent("var/outbox")
        let mail = try #require(try MailTools.waitForOutbox(outbox, count: count, timeout: 20).last)
        return try #require(A.requestId(inLink: mail.body), "\(mail.body)")
    }

    @Test("pending, slow_down, then approved on the approval page: tokens once, for demo")
    func approved() throws {
        let g = try start()
        let asked = try post(g, Self.bcPath, "scope=openid&login_hint=demo&binding_message=Agent%20login%2042")
        #expect(asked.status == 200, "\(asked)")
        let body = try asked.json()
        let id = try #require(body["auth_req_id"] as? String)
        #expect(body["expires_in"] as? Int == 60 && body["interval"] as? Int == 2, "\(body)")
        #expect(error(try poll(g, id)) == "slow_down", "a poll before the interval")
        Thread.sleep(forTimeInterval: 7.2)  // the interval is now 7 s
        #expect(error(try poll(g, id)) == "authorization_pending")
        let approval = try approvalId(g, count: 1)
        let phone = try Kit.login(g)
        let decided = try A.approve(g, id: approval, token: phone, code: "0")
        #expect(decided.status == 200, "\(decided)")
        Thread.sleep(forTimeInterval: 7.2)
        let tokens = try poll(g, id)
        #expect(tokens.status == 200, "\(tokens)")
        let claims = OAuthKit.claims(try #require(try tokens.json()["access_token"] as? String))
        #expect(claims["sub"] as? String == "demo" && claims["acr"] as? String == "ApproverConfirm", "\(claims)")
        #expect(error(try poll(g, id)) == "invalid_grant", "redeemed twice")
        // The ID token names demo as a hint; a token of another kind does not.
        let idToken = try #require(try tokens.json()["id_token"] as? String)
        let byIdToken = try post(g, Self.bcPath, "scope=openid&id_token_hint=\(idToken)")
        let answer = try byIdToken.json()
        #expect(byIdToken.status == 200 && answer["auth_req_id"] is String, "\(byIdToken)")
        #expect(try approvalId(g, count: 2) != approval, "demo was asked again")
        let accessToken = try #require(try tokens.json()["access_token"] as? String)
        #expect(error(try post(g, Self.bcPath, "scope=openid&id_token_hint=\(accessToken)")) == "invalid_request")
        let discovery = try g.fetch("GET", "/am/oauth2/realms/root/.well-known/openid-configuration").json()
        #expect(discovery["backchannel_authentication_endpoint"] as? String == g.baseURL + Self.bcPath)
        #expect((discovery["grant_types_supported"] as? [String])?.contains("urn:openid:params:grant-type:ciba") == true)
    }

    @Test("a transaction approved through CIBA opens that one request, once")
    func transaction() throws {
        let g = try start()
        let session = try Kit.login(g)
        let txid = try Kit.challengeTxid(try g.fetch("POST", "/transfer", headers: Kit.apiHeaders(session), body: Kit.transferBody))
        let asked = try post(g, Self.bcPath, "scope=openid&login_hint=demo&txid=\(txid)&binding_message=Pay%20Bob")
        let id = try #require(try asked.json()["auth_req_id"] as? String, "\(asked)")
        let decided = try A.approve(g, id: try approvalId(g, count: 1), token: session, code: "0")
        #expect(decided.status == 200, "\(decided)")
        Thread.sleep(forTimeInterval: 2.1)
        let tokens = try poll(g, id)
        let token = try #require(try tokens.json()["access_token"] as? String, "\(tokens)")
        #expect(OAuthKit.claims(token)["txn"] as? String == txid)
        let bearer = [("Authorization", "Bearer \(token)"), ("Content-Type", "application/json")]
        let executed = try g.fetch("POST", "/transfer", headers: bearer, body: Kit.transferBody)
        #expect(executed.status == 201, "\(executed)")
        let again = try g.fetch("POST", "/transfer", headers: bearer, body: Kit.transferBody)
        #expect(again.status == 401, "the approval opened a second request: \(again)")
    }

    @Test("denied, expired, another client's id, a wrong secret, an unknown user: refused, and nothing tells who exists")
    func refusals() throws {
        let g = try start()
        let phone = try Kit.login(g)
        // Denied on the approval page.
        let denied = try #require(try post(g, Self.bcPath, "scope=openid&login_hint=demo").json()["auth_req_id"] as? String)
        #expect(try A.deny(g, id: try approvalId(g, count: 1), token: phone).status == 200)
        Thread.sleep(forTimeInterval: 2.1)
        #expect(error(try poll(g, denied)) == "access_denied")
        // Another client cannot poll it; a wrong secret is no client.
        let mine = try #require(try post(g, Self.bcPath, "scope=openid&login_hint=demo").json()["auth_req_id"] as? String)
        Thread.sleep(forTimeInterval: 2.1)
        #expect(error(try poll(g, mine, client: "other")) == "invalid_grant")
        #expect(error(try poll(g, "no-such-auth-req-id")) == "invalid_grant", "an unknown auth_req_id")
        #expect(try post(g, Self.bcPath, "scope=openid&login_hint=demo", secret: "wrong-secret-0123456789").status == 401)
        // An unknown user, or one out of the client's reach, looks the same, and is never notified.
        let emails = MailTools.outboxFiles(g.configURL.deletingLastPathComponent().appendingPathComponent("var/outbox")).count
        for hint in ["nobody", "other"] {
            let r = try post(g, Self.bcPath, "scope=openid&login_hint=\(hint)&requested_expiry=4")
            let answer = try r.json()
            #expect(r.status == 200 && answer["expires_in"] as? Int == 4, "\(r)")
            let ghost = try #require(answer["auth_req_id"] as? String)
            Thread.sleep(forTimeInterval: 2.1)
            #expect(error(try poll(g, ghost)) == "authorization_pending", "\(hint)")
            Thread.sleep(forTimeInterval: 2.3)  // the store's clock counts whole seconds
            #expect(error(try poll(g, ghost)) == "expired_token", "\(hint)")
        }
        #expect(MailTools.outboxFiles(g.configURL.deletingLastPathComponent().appendingPathComponent("var/outbox")).count == emails)
        // Bad requests.
        #expect(error(try post(g, Self.bcPath, "scope=profile&login_hint=demo")) == "invalid_request")
        #expect(error(try post(g, Self.bcPath, "scope=openid&login_hint=demo&binding_message=%E2%80%AEevil")) == "invalid_binding_message")
        #expect(error(try post(g, Self.bcPath, "scope=openid")) == "invalid_request")
    }

    @Test("ping mode: the client's notification endpoint is told, with its token, once the person decided")
    func ping() throws {
        let receiver = try RawUpstream(responses: [Array("HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n".utf8)])
        defer { receiver.stop() }
        let g = try start(pingTo: "http://127.0.0.1:\(receiver.port)/ciba/notify")
        #expect(error(try post(g, Self.bcPath, "scope=openid&login_hint=demo", client: "pinger")) == "invalid_request",
                "ping mode needs client_notification_token")
        // A transfer waiting for demo's approval, asked for on the back channel.
        let session = try Kit.login(g)
        let txid = try Kit.challengeTxid(try g.fetch("POST", "/transfer", headers: Kit.apiHeaders(session), body: Kit.transferBody))
        let asked = try post(g, Self.bcPath, "scope=openid&login_hint=demo&txid=\(txid)&client_notification_token=notify-me-7", client: "pinger")
        let id = try #require(try asked.json()["auth_req_id"] as? String, "\(asked)")
        #expect(receiver.receivedRequests.isEmpty, "pinged before the person decided")
        let decided = try A.approve(g, id: try approvalId(g, count: 1), token: session, code: "0")
        #expect(decided.status == 200, "\(decided)")
        #expect(Timing.poll(timeout: 10, interval: 0.05) { !receiver.receivedRequests.isEmpty }, "no ping")
        let note = try #require(receiver.receivedRequests.first)
        #expect(note.hasPrefix("POST /ciba/notify HTTP/1.1") && note.contains("Authorization: Bearer notify-me-7")
                && note.contains(#"{"auth_req_id":"\#(id)"}"#), "\(note)")
        Thread.sleep(forTimeInterval: 2.1)
        let tokens = try poll(g, id, client: "pinger")
        let token = try #require(try tokens.json()["access_token"] as? String, "\(tokens)")
        #expect(receiver.receivedRequests.count == 1, "pinged twice: \(receiver.receivedRequests)")
        // The approved transfer runs, once.
        let bearer = [("Authorization", "Bearer \(token)"), ("Content-Type", "application/json")]
        #expect(try g.fetch("POST", "/transfer", headers: bearer, body: Kit.transferBody).status == 201)
        #expect(try g.fetch("POST", "/transfer", headers: bearer, body: Kit.transferBody).status == 401)
    }

    @Test("authlib's private_key_jwt: the back-channel request and the poll authenticate by signed assertions, each used once")
    func privateKeyJWT() throws {
        let bed = try Testbed.current
        let g = try start()
        let key = bed.dir.url.appendingPathComponent("signed.pem.p8").path
        let script = BinaryLocator.packageRoot.appendingPathComponent("Tests/IntegrationTests/oauth/ciba_client.py").path
        func client(_ args: [String]) throws -> [String: Any] {
            let r = try bed.runTool("python3", [script] + args, timeout: 60)
            let last = r.stdout.split(separator: "\n").last.map(String.init) ?? ""
            guard let obj = (try? JSONSerialization.jsonObject(with: Data(last.utf8))) as? [String: Any] else {
                throw HarnessError("ciba_client.py: \(r)\n\(g.process.stderrTail(20))")
            }
            return obj
        }
        let asked = try client(["authorize", g.baseURL, "signed", key, "k1", "demo"])
        #expect(asked["status"] as? Int == 200, "\(asked)")
        #expect(asked["replay_status"] as? Int == 401 && (asked["replay_body"] as? [String: Any])?["error"] as? String == "invalid_client",
                "a client assertion worked twice: \(asked)")
        let id = try #require((asked["body"] as? [String: Any])?["auth_req_id"] as? String)
        let decided = try A.approve(g, id: try approvalId(g, count: 1), token: try Kit.login(g), code: "0")
        #expect(decided.status == 200, "\(decided)")
        let polled = try client(["poll", g.baseURL, "signed", key, "k1", id])
        let token = try #require((polled["token"] as? [String: Any])?["access_token"] as? String, "\(polled)")
        #expect(OAuthKit.claims(token)["sub"] as? String == "demo" && OAuthKit.claims(token)["client_id"] as? String == "signed")
        // An assertion signed by another key is no client.
        #expect(try post(g, Self.bcPath, "scope=openid&login_hint=demo&client_assertion_type=urn%3Aietf%3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer"
                         + "&client_assertion=eyJhbGciOiJFUzI1NiIsImtpZCI6ImsxIn0.eyJpc3MiOiJzaWduZWQifQ.AAAA", client: "x", secret: "y").status == 401)
    }

    @Test("acr_values names the journey the person approves through, and the token's acr; a name that is no journey is refused")
    func acrValues() throws {
        let g = try start()
        #expect(error(try post(g, Self.bcPath, "scope=openid&login_hint=demo&acr_values=NoSuchJourney")) == "invalid_request")
        let id = try #require(try post(g, Self.bcPath, "scope=openid&login_hint=demo&acr_values=ApproverTOTP").json()["auth_req_id"] as? String)
        let approval = try approvalId(g, count: 1)
        let phone = try Kit.login(g)
        // The Yes of the default approver journey is no TOTP code.
        #expect(try A.approve(g, id: approval, token: phone, code: "0").status != 200)
        let code = TOTP(secret: Base32.decode(Kit.demoSecret)!).code(at: Int(Date().timeIntervalSince1970))
        let approved = try A.approve(g, id: approval, token: phone, code: code)
        #expect(approved.status == 200, "\(approved)")
        Thread.sleep(forTimeInterval: 2.1)
        let tokens = try poll(g, id)
        let claims = OAuthKit.claims(try #require(try tokens.json()["access_token"] as? String, "\(tokens)"))
        #expect(claims["acr"] as? String == "ApproverTOTP", "\(claims)")
    }
}
