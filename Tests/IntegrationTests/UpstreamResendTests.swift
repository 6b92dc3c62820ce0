import Foundation
import Testing
import TestSupport
import TxGateCrypto

/// Issue 22 item 1: the gateway never executes a request twice itself. A kept-alive upstream
/// connection that fails before any response byte may have carried a request the backend
/// committed: only a request whose repetition changes nothing goes again, and never one that
/// spends an approval.
@Suite("Upstream re-sends", .testbed)
struct UpstreamResendTests {
    typealias Kit = TransactionKit
    static let ok = Array("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}".utf8)

    /// A backend that answers the first request of each connection and commits the second,
    /// then resets the connection without an answer.
    static func committingBackend() throws -> RawUpstream {
        try RawUpstream(responses: [ok], resetOnConnectionRequest: 2)
    }

    static func count(_ upstream: RawUpstream, _ requestLine: String) -> Int {
        upstream.receivedRequests.filter { $0.hasPrefix(requestLine + " HTTP/1.1\r\n") }.count
    }

    @Test("a POST the backend committed before losing the kept-alive connection is sent once; its outcome is unknown")
    func committedPostIsNotResent() throws {
        let upstream = try Self.committingBackend()
        defer { upstream.stop() }
        let g = try Testbed.current.startGateway(upstream: upstream.url)
        #expect(try g.fetch("GET", "/warm").status == 200)  // leaves a kept-alive connection in the pool

        let r = try g.fetch("POST", "/transfer", headers: [("Content-Type", "application/json")],
                            body: Array(#"{"amount":100}"#.utf8))
        expectGatewayError(r, 502)
        #expect((try? r.json())?["outcome"] as? String == "unknown", "\(r)")
        #expect(Self.count(upstream, "POST /transfer") == 1, "the backend executed the POST \(Self.count(upstream, "POST /transfer")) times")

        let failed = g.logLines().first { $0["msg"] as? String == "upstream request failed" }
        #expect(failed?["outcome"] as? String == "unknown", "\(g.process.stderr)")
        #expect(!g.logLines().contains { $0["msg"] as? String == "upstream request re-sent on a new connection" })
    }

    @Test("a GET that met a stale kept-alive connection is re-sent once, logged and counted")
    func idempotentRequestIsResentAndCounted() throws {
        let upstream = try Self.committingBackend()
        defer { upstream.stop() }
        let g = try Testbed.current.startGateway(upstream: upstream.url, config: ["metrics": ["allowFrom": ["127.0.0.1/32"]]])
        #expect(try g.fetch("GET", "/warm").status == 200)
        let r = try g.fetch("GET", "/again", headers: [("X-Request-Id", "resend-test-0001")])
        #expect(r.status == 200, "\(r)")
        #expect(Self.count(upstream, "GET /again") == 2)

        let resent = g.logLines().filter { $0["msg"] as? String == "upstream request re-sent on a new connection" }
        #expect(resent.count == 1, "\(g.process.stderr)")
        #expect(resent.first?["request_id"] as? String == "resend-test-0001")
        #expect(resent.first?["method"] as? String == "GET")
        let metrics = try g.fetch("GET", "/-/metrics").bodyText
        let counted = metrics.split(separator: "\n").contains("txgate_upstream_resends_total 1")
        #expect(counted, "txgate_upstream_resends_total is not 1")
    }

    @Test("an approved request is sent once even with an idempotent method, and carries Idempotency-Key: its TxId")
    func approvedRequestCarriesItsTxIdAndGoesOnce() throws {
        let upstream = try Self.committingBackend()
        defer { upstream.stop() }
        let config = Kit.config(["policies": Kit.config()["policies"] as! [[String: Any]] + [
            ["name": "put", "resources": ["/put"], "actions": ["PUT"], "subjects": "authenticated",
             "transaction": ["journey": "ConfirmTransaction", "bind": ["body": true]]],
        ]])
        let g = try Testbed.current.startGateway(upstream: upstream.url, config: config)
        let token = try Kit.login(g)
        var codes = Kit.Codes()
        #expect(try g.fetch("GET", "/health").status == 200)  // the kept-alive connection

        let body = Array(#"{"amount":100}"#.utf8)
        let txid = try Kit.challengeTxid(try g.fetch("PUT", "/put", headers: Kit.apiHeaders(token), body: body))
        try Kit.approve(g, txid: txid, token: token, code: codes.next(Kit.demoSecret))
        let r = try g.fetch("PUT", "/put?_txid=\(txid)", headers: Kit.apiHeaders(token) + [("Idempotency-Key", "\"the-client's\"")],
                            body: body)
        expectGatewayError(r, 502)
        #expect((try? r.json())?["outcome"] as? String == "unknown", "\(r)")
        #expect(Self.count(upstream, "PUT /put") == 1, "the approved PUT was executed \(Self.count(upstream, "PUT /put")) times")

        let sent = upstream.receivedRequests.first { $0.hasPrefix("PUT /put ") } ?? ""
        let keys = sent.split(separator: "\r\n").filter { $0.lowercased().hasPrefix("idempotency-key:") }
        #expect(keys == ["Idempotency-Key: \"\(txid)\""], "\(sent)")
        // The operator can tell which approval has an unknown outcome (masked, as every TxId in the log).
        let failed = g.logLines().first { $0["msg"] as? String == "upstream request failed" }
        #expect((failed?["txid"] as? String)?.hasPrefix(String(txid.prefix(4))) == true, "\(g.process.stderr)")
        #expect(failed?["txid"] as? String != txid)
    }

    @Test("a connection idle longer than upstream.idleTimeoutMs is not reused")
    func idleTimeoutBoundsReuse() throws {
        let bank = try Testbed.current.startDemoBank()
        let g = try Testbed.current.startGateway(upstream: bank.url, config: ["upstream": ["idleTimeoutMs": 300]])
        func connection() throws -> Int {
            let r = try g.fetch("GET", "/conn")
            return try #require((try r.json())["connection"] as? Int, "\(r)")
        }
        let first = try connection()
        #expect(try connection() == first, "a connection idle for a moment was not reused")
        Thread.sleep(forTimeInterval: 0.6)
        #expect(try connection() != first, "a connection idle for 600 ms was reused with idleTimeoutMs 300")
    }
}

extension UpstreamResendTests {
    @Test("demo-bank executes a transfer once per Idempotency-Key and answers a repetition with the first answer")
    func demoBankHonoursIdempotencyKey() throws {
        let bank = try Testbed.current.startDemoBank()
        let json = [("Content-Type", "application/json")]
        func transfer(_ key: String?, _ body: String) throws -> HTTPResponse {
            try RawHTTPClient.fetch(port: bank.port, "POST", "/transfer", headers: json + (key.map { [("Idempotency-Key", $0)] } ?? []),
                                    body: Array(body.utf8))
        }
        func balance() throws -> Double {
            let accounts = try RawHTTPClient.fetch(port: bank.port, "GET", "/accounts").json()["accounts"] as? [[String: Any]]
            return try #require((accounts?.first?["balance"] as? NSNumber)?.doubleValue)
        }
        let before = try balance()
        let body = #"{"amount":10,"currency":"EUR","payee":"Bob"}"#
        let first = try transfer("\"tx-1\"", body)
        #expect(first.status == 201, "\(first)")
        let again = try transfer("\"tx-1\"", body)
        #expect(again.status == 201 && again.bodyText == first.bodyText, "\(again)")
        #expect(again.header("Idempotent-Replayed") == "true")
        #expect(try balance() == before - 10, "a repeated key executed the transfer again")

        expectGatewayError(try transfer("\"tx-1\"", #"{"amount":99,"currency":"EUR","payee":"Bob"}"#), 422)
        expectGatewayError(try transfer("\"unterminated", body), 400)
        // A whole number is a number (JSONSerialization on Linux took 1 for a Bool).
        #expect(try transfer("\"tx-one\"", #"{"amount":1,"currency":"EUR","payee":"Bob"}"#).status == 201)
        #expect(try balance() == before - 11)
        // Another key, or none, is another transfer.
        #expect(try transfer("\"tx-2\"", body).status == 201)
        #expect(try transfer(nil, body).status == 201)
        #expect(try balance() == before - 31)
    }
}

/// Issue 24 item 11: the demo bank operators copy shows who is signed in, signs out to a page,
/// and recognizes the same form sent twice.
@Suite(.testbed) struct DemoBankPageTests {
    typealias Kit = TransactionKit

    @Test func theBankShowsWhoIsSignedInAndSignsOutToAPage() throws {
        // The sign-out button ends the session at the OIDC end-session endpoint (oauth2, as gateway.json has).
        var config = OAuthKit.config()
        config["policies"] = [["name": "home", "resources": ["/"], "actions": ["GET"], "subjects": "authenticated"]]
            + (config["policies"] as? [[String: Any]] ?? [])
        let (g, _) = try Testbed.current.startGatewayWithBank(config: config)
        let token = try Kit.login(g)
        let cookie = ("Cookie", "iPlanetDirectoryPro=\(token)")
        let home = try g.fetch("GET", "/", headers: [cookie])
        #expect(home.status == 200, "\(home)")
        #expect(home.bodyText.contains(#"<span id="signed-in">demo</span>"#), "\(home.bodyText)")
        #expect(home.bodyText.contains(#"action="/am/oauth2/realms/root/connect/endSession""#))
        // The page reloads when restored from the back/forward cache: its script is allowed by hash.
        let csp = try #require(home.header("Content-Security-Policy"))
        let script = try #require(home.bodyText.range(of: #"<script>(.*)</script>"#, options: .regularExpression)
            .map { String(home.bodyText[$0].dropFirst(8).dropLast(9)) })
        #expect(script.contains("persisted") && csp.contains("'sha256-\(Data(Crypto.sha256(Array(script.utf8))).base64EncodedString())'"), "\(csp)")
        // A client cannot name itself: its own X-TxGate-User is replaced by the verified user.
        let forged = try g.fetch("GET", "/", headers: [cookie, ("X-TxGate-User", "admin")])
        #expect(forged.bodyText.contains(#"<span id="signed-in">demo</span>"#) && !forged.bodyText.contains("admin"), "\(forged.bodyText)")

        // The sign-out button: a same-origin form post, ending on the sign-in page.
        let out = try g.fetch("POST", "/am/oauth2/realms/root/connect/endSession",
                              headers: [cookie, ("Origin", "http://127.0.0.1:\(g.port)"), ("Accept", "text/html,*/*;q=0.8"),
                                        ("Content-Type", "application/x-www-form-urlencoded")], body: [])
        #expect(out.status == 303 && out.header("Location") == "http://127.0.0.1:\(g.port)/am/XUI/", "\(out)")
        #expect(try g.fetch("GET", "/", headers: [cookie, ("x-authenticate-response", "header")]).status == 401)
    }

    @Test func theSameFormSentTwiceIsExecutedOnce() throws {
        let bank = try Testbed.current.startDemoBank()
        let home = try RawHTTPClient.fetch(port: bank.port, "GET", "/")
        let token = try #require(home.bodyText.range(of: #"name="formToken" value="[^"]+""#, options: .regularExpression)
            .map { String(home.bodyText[$0].split(separator: "\"")[3]) })
        let form = [("Content-Type", "application/x-www-form-urlencoded")]
        let body = Array("formToken=\(token)&amount=25.50&currency=EUR&payee=Bob".utf8)
        let first = try RawHTTPClient.fetch(port: bank.port, "POST", "/transfer", headers: form, body: body)
        #expect(first.status == 303 && first.header("Location") == "/receipt?seq=1", "\(first)")
        let again = try RawHTTPClient.fetch(port: bank.port, "POST", "/transfer", headers: form, body: body)
        #expect(again.status == 409 && again.bodyText.contains("You already sent this transfer"), "\(again)")
        #expect(again.bodyText.contains(#"href="/receipt?seq=1""#))
        let after = try RawHTTPClient.fetch(port: bank.port, "GET", "/")
        #expect(after.bodyText.contains("1 transfer made"), "\(after.bodyText)")
        // Another form (a new token) is another transfer.
        let other = Array("formToken=another&amount=1&currency=EUR&payee=Bob".utf8)
        #expect(try RawHTTPClient.fetch(port: bank.port, "POST", "/transfer", headers: form, body: other).status == 303)
    }
}
