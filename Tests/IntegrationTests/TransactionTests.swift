import Foundation
import Testing
import TxGateCore
import TxGateCrypto
#if canImport(Glibc)
import Glibc
#endif
import TestSupport

/// One-shot transactional authorization end to end (WIRE.md §1–3, §7, §8): the challenge in
/// each of its three forms, the composite-advice journey that approves it, and the retry that
/// is allowed exactly once — and never for another user, another body, too late, or twice.
@Suite(.testbed) struct TransactionTests {
    typealias Kit = TransactionKit

    // MARK: 1. The whole flow, as an SDK runs it: TxGateTests' TransactionFlowTests (in process and live)

    // MARK: 2. The SSOADVICE header, read the way each SDK reads it

    @Test func ssoAdviceHeaderParsesLikeIOSAndroidAndJS() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config())
        let token = try Kit.login(g)
        let pub = Kit.publicURL(g)

        // Several challenges, so that several TxIds (and base64 alignments) are seen.
        for i in 0..<5 {
            let body = Array(#"{"amount":\#(10 + i),"currency":"EUR","payee":"Bob"}"#.utf8)
            let r = try Kit.transfer(g, token: token, body: body)
            #expect(r.status == 401, "\(r)")
            #expect(r.headerValues("WWW-Authenticate").count == 1, "\(r.headerSummary)")
            let header = try #require(r.header("WWW-Authenticate"))
            let expectedAdvices = try Kit.bodyAdvices(r)
            try Kit.expectSDKsAgree(header, expected: expectedAdvices, amURI: pub + "/am/")
        }
    }

    // MARK: 3. The browser form: 303 (a POST) to the login page with the advice XML

    @Test func browserRedirectCarriesGotoAndExactAdviceXMLAndBase64urlCompletes() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config())
        let token = try Kit.login(g)
        let pub = Kit.publicURL(g)
        var codes = Kit.Codes()
        let cookie = ("Cookie", "theme=dark; iPlanetDirectoryPro=\(token)")

        let r = try g.fetch("POST", "/transfer?ref=inv-42", headers: [cookie, ("Content-Type", "application/json"),
                                                                   ("Sec-Fetch-Mode", "navigate")],
                            body: Kit.transferBody)
        // 303, not 307: the browser must not re-send its body to the login page (the request is
        // parked instead, ParkedRequestTests).
        #expect(r.status == 303, "browser first try:\n\(r)")
        let location = try #require(r.header("Location"), "no Location on:\n\(r)")
        let prefix = pub + "/am/XUI/?"
        #expect(location.hasPrefix(prefix), "Location: \(location)")
        let query = String(location.dropFirst(prefix.count))
        let pairs = Kit.queryPairs(query)
        #expect(pairs.map(\.name) == ["goto", "realm", "authIndexType", "authIndexValue"], "Location: \(location)")
        let q = Dictionary(pairs.map { ($0.name, $0.value) }, uniquingKeysWith: { a, _ in a })
        #expect(q["realm"] == "/")
        #expect(q["authIndexType"] == "composite_advice")
        let xml = try #require(q["authIndexValue"])
        let xmlPattern = #"^<Advices><AttributeValuePair><Attribute name="TransactionConditionAdvice"/><Value>([0-9a-fA-F-]{36})</Value></AttributeValuePair></Advices>$"#
        let match = try #require(xml.firstMatch(of: try Regex<(Substring, Substring)>(xmlPattern)), "advice XML: \(xml)")
        let txid = String(match.output.1)
        #expect(Kit.isUUID(txid))
        #expect(q["goto"] == "\(pub)/transfer?ref=inv-42&_txid=\(txid)", "goto: \(q["goto"] ?? "nil")")
        // Encoded values must not leak separators into the outer query.
        for raw in query.split(separator: "&") {
            #expect(raw.split(separator: "=", omittingEmptySubsequences: false).count == 2, "unencoded '=' in '\(raw)'")
        }
        #expect(try Kit.bodyAdvices(r) == ["TransactionConditionAdvice": [txid]])

        // Some clients send authIndexValue as unpadded base64url of the XML.
        let b64url = Kit.base64url(Array(xml.utf8))
        #expect(!b64url.contains("=") && !b64url.contains("+") && !b64url.contains("/"))
        let start = try Kit.post(g, Kit.authPath + "?authIndexType=composite_advice&authIndexValue=\(b64url)", nil, headers: [cookie])
        #expect(start.status == 200, "composite_advice with base64url:\n\(start)")
        let step = try start.json()
        let callbacks = try #require(step["callbacks"] as? [[String: Any]])
        #expect(Kit.output(callbacks.first, "message") as? String == "Approve 100 EUR to Bob?", "\(callbacks)")
        let done = try Kit.post(g, Kit.authPath, Kit.answer(step, [codes.next(Kit.demoSecret)]), headers: [cookie])
        #expect(done.status == 200, "\(done)")

        // A client that re-sends its request itself to goto (which already carries _txid) is
        // allowed too.
        let gotoURL = try #require(q["goto"])
        let target = String(gotoURL.dropFirst(pub.count))
        let retry = try g.fetch("POST", target, headers: [cookie, ("Content-Type", "application/json")], body: Kit.transferBody)
        #expect(retry.status == 201, "following goto:\n\(retry)")
        #expect(try retry.json()["status"] as? String == "executed")
    }

    // MARK: 4. _txid and _idtoken never reach the backend; the body arrives untouched

    @Test func theSessionCookieAndTxIdStayAtTheGateway() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config())
        let token = try Kit.login(g)
        var codes = Kit.Codes()
        let body = Array("{\"x\":1}".utf8)
        let cookie = ("Cookie", "theme=dark; iPlanetDirectoryPro=\(token)")
        let first = try g.fetch("POST", "/echo", headers: [("x-authenticate-response", "header"), cookie], body: body)
        let txid = try Kit.challengeTxid(first)
        try Kit.approve(g, txid: txid, token: token, code: codes.next(Kit.demoSecret))
        let retry = try g.fetch("POST", "/echo", headers: [("X-TxID", txid), cookie], body: body)
        #expect(retry.status == 200, "\(retry)")
        let seen = try EchoedRequest(retry)
        #expect(seen.header("Cookie") == "theme=dark")
        #expect(!seen.hasHeader("X-TxID"))
        #expect(!seen.headers.contains { $0.value.contains(token) }, "the session token reached the backend")
    }

    @Test func retryParametersAreStrippedAndTheBodyIsForwardedByteForByte() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config())
        let token = try Kit.login(g)
        var codes = Kit.Codes()
        // Insignificant whitespace, a non-ASCII character and an escape: must arrive unchanged.
        let body = Array("{ \"note\" : \"caf\u{e9} \\u00e9\",\n  \"n\":1.50 }\n".utf8)
        let headers = [("x-authenticate-response", "header"), ("iPlanetDirectoryPro", token),
                       ("Content-Type", "application/json")]

        let first = try g.fetch("POST", "/echo?keep=1&z=a%2Fb", headers: headers, body: body)
        #expect(first.status == 401, "\(first)")
        let txid = try Kit.challengeTxid(first)
        try Kit.approve(g, txid: txid, token: token, code: codes.next(Kit.demoSecret))

        let idtoken = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJkZW1vIn0."
        let retry = try g.fetch("POST", "/echo?keep=1&_txid=\(txid)&_idtoken=\(idtoken)&z=a%2Fb", headers: headers, body: body)
        #expect(retry.status == 200, "retry through /echo:\n\(retry)")
        let seen = try EchoedRequest(retry)
        #expect(seen.method == "POST")
        #expect(seen.uri == "/echo?keep=1&z=a%2Fb", "backend saw \(seen.uri)")
        #expect(!seen.uri.contains("_txid") && !seen.uri.contains("_idtoken") && !seen.uri.contains(txid))
        #expect(seen.body == body, "backend body: \(String(decoding: seen.body, as: UTF8.self).debugDescription)")
        #expect(seen.bodyLength == body.count)
        #expect(seen.bodySha256 == Kit.sha256Hex(body))
        // The gateway's credentials stay at the gateway: no session token, no TxId upstream.
        #expect(!seen.hasHeader("iPlanetDirectoryPro"), "the session token reached the backend")
        #expect(!seen.headers.contains { $0.value.contains(token) }, "the session token reached the backend")

        // The same with _txid alone (the query disappears), and the token as a cookie.
        let bare = try g.fetch("POST", "/echo", headers: headers, body: body)
        let txid2 = try Kit.challengeTxid(bare)
        #expect(txid2 != txid)
        try Kit.approve(g, txid: txid2, token: token, code: codes.next(Kit.demoSecret))
        let retry2 = try g.fetch("POST", "/echo?_txid=\(txid2)", headers: headers, body: body)
        #expect(retry2.status == 200, "\(retry2)")
        let seen2 = try EchoedRequest(retry2)
        #expect(seen2.uri == "/echo", "backend saw \(seen2.uri)")
        #expect(seen2.body == body)
    }

    // MARK: 5. Another user can neither approve nor use demo's transaction

    @Test func anotherUserCanNeitherApproveNorUseTheTransaction() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config())
        let demo = try Kit.login(g, user: "demo")
        let other = try Kit.login(g, user: "other")
        var codes = Kit.Codes()

        let first = try Kit.transfer(g, token: demo, body: Kit.transferBody)
        let txid = try Kit.challengeTxid(first)

        // other's session cannot start (let alone finish) the approval of demo's transaction.
        let hijack = try Kit.startComposite(g, txid: txid, session: .header(other))
        #expect(hijack.status == 401, "other approving demo's transaction:\n\(hijack)")
        #expect((try? hijack.json())?["authId"] == nil, "a step was offered to the wrong user: \(hijack)")
        #expect((try? hijack.json())?["tokenId"] == nil)

        // demo approves it; other's session then retries with it: a new challenge, for other.
        try Kit.approve(g, txid: txid, token: demo, code: codes.next(Kit.demoSecret))
        let stolen = try Kit.transfer(g, token: other, body: Kit.transferBody, query: "?_txid=\(txid)")
        #expect(stolen.status == 401, "other retrying with demo's approved TxId:\n\(stolen)")
        let otherTxid = try Kit.challengeTxid(stolen)
        #expect(otherTxid != txid)
        #expect(!stolen.bodyText.contains("executed"))
        // The new transaction is other's: demo cannot approve it.
        #expect(try Kit.startComposite(g, txid: otherTxid, session: .header(demo)).status == 401)

        // Nothing reached demo-bank: demo's own retry is the first transfer it executes.
        let mine = try Kit.transfer(g, token: demo, body: Kit.transferBody, query: "?_txid=\(txid)")
        #expect(mine.status == 201, "demo's own retry after the refused attempt:\n\(mine)")
        #expect((try? mine.json())?["sequence"] as? NSNumber == 1, "demo-bank had already executed a transfer: \(mine)")
    }

    // MARK: 6. PSD2 dynamic linking: a changed amount or payee is not what was approved

    /// A body whose bound fields cannot be read unambiguously is refused, never challenged or
    /// approved: {"amount":1,"amount":1000} is 1 to some parsers and 1000 to others.
    @Test func aBodyThatCannotBeBoundIsA400() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config())
        let token = try Kit.login(g)
        for body in [#"{"amount":1,"currency":"EUR","payee":"Bob","amount":1000}"#, "amount=1000", #"{"amount":1"#] {
            let r = try Kit.transfer(g, token: token, body: Array(body.utf8))
            #expect(r.status == 400, "\(body):\n\(r)")
            #expect(r.header("WWW-Authenticate") == nil && !r.bodyText.contains("executed"), "\(r)")
            #expect(r.bodyText.contains("one JSON document without repeated keys"), "\(r)")
        }
        // The same transfer, well-formed, is challenged as usual.
        _ = try Kit.challengeTxid(try Kit.transfer(g, token: token, body: Kit.transferBody))
    }

    @Test func aChangedAmountOrPayeeOnTheRetryIsANewChallenge() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config())
        let token = try Kit.login(g)
        var codes = Kit.Codes()

        let txid = try Kit.approvedTransfer(g, token: token, codes: &codes)

        let changed = Array(#"{"amount":10000,"currency":"EUR","payee":"Bob"}"#.utf8)
        let r1 = try Kit.transfer(g, token: token, body: changed, query: "?_txid=\(txid)")
        #expect(r1.status == 401, "retry with a changed amount:\n\(r1)")
        let n1 = try Kit.challengeTxid(r1)
        #expect(n1 != txid)
        #expect(!r1.bodyText.contains("executed"))

        let otherPayee = Array(#"{"amount":100,"currency":"EUR","payee":"Mallory"}"#.utf8)
        let r2 = try Kit.transfer(g, token: token, body: otherPayee, query: "?_txid=\(txid)")
        #expect(r2.status == 401, "retry with a changed payee:\n\(r2)")
        let n2 = try Kit.challengeTxid(r2)
        #expect(n2 != txid && n2 != n1)
        // The new challenge shows the new values.
        let step = try Kit.startComposite(g, txid: n1, session: .header(token)).json()
        let callbacks = step["callbacks"] as? [[String: Any]]
        #expect(Kit.output(callbacks?.first, "message") as? String == "Approve 10000 EUR to Bob?", "\(step)")

        // The approved values (same fields, other key order and spacing) are still allowed, and
        // this is the first transfer demo-bank executes: the changed ones never reached it.
        let same = Array(#"{ "payee": "Bob", "currency": "EUR", "amount": 100 }"#.utf8)
        let ok = try Kit.transfer(g, token: token, body: same, query: "?_txid=\(txid)")
        #expect(ok.status == 201, "retry with the approved values:\n\(ok)")
        #expect((try? ok.json())?["sequence"] as? NSNumber == 1, "demo-bank executed something before: \(ok)")
    }

    // MARK: 7. An approval expires with its transaction: TxGateTests' TransactionFlowTests (in process, on its clock)

    // MARK: 8. Fifty concurrent retries: exactly one is allowed

    @Test func fiftyConcurrentRetriesAllowExactlyOne() throws {
        let bed = try Testbed.current
        // Several workers, so that the retries race on different event loops; a pending limit
        // high enough that the 49 refusals are challenges rather than 429s.
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config([
            "workers": 4, "security": ["maxPendingTransactions": 200],
        ]))
        let token = try Kit.login(g)
        var codes = Kit.Codes()
        let txid = try Kit.approvedTransfer(g, token: token, codes: &codes)

        let n = 50
        let port = g.port
        let burst = Burst.simultaneous(n, within: 60, connect: { _ in try RawHTTPClient(port: port, timeout: 20) }) { _, client in
            try client.request("POST", "/transfer?_txid=\(txid)", headers: Kit.apiHeaders(token), body: Kit.transferBody)
        }
        #expect(burst.finished, "the retries did not finish within 60 s")

        let all = burst.results
        #expect(all.count == n)
        var allowed: [HTTPResponse] = []
        var challenged: [String] = []
        var other: [String] = []
        for r in all {
            switch r {
            case .failure(let e): other.append("error: \(e)")
            case .success(let resp) where resp.status == 201 || resp.status == 200: allowed.append(resp)
            case .success(let resp) where resp.status == 401:
                if let t = try? Kit.challengeTxid(resp) { challenged.append(t) } else { other.append("\(resp)") }
            case .success(let resp): other.append("\(resp)")
            }
        }
        #expect(allowed.count == 1, "allowed \(allowed.count) times:\n\(allowed.map(\.description).joined(separator: "\n---\n"))")
        #expect(challenged.count == n - 1, "challenged \(challenged.count); others:\n\(other.prefix(5).joined(separator: "\n---\n"))")
        #expect(other.isEmpty, "unexpected answers (\(other.count)):\n\(other.prefix(5).joined(separator: "\n---\n"))")
        #expect(!challenged.contains(txid), "the consumed TxId was offered again")
        // The same request challenged again while its transaction waits: one TxId for all 49.
        #expect(Set(challenged).count == 1, "49 refusals of one request got \(Set(challenged).count) TxIds")
        if let winner = allowed.first {
            #expect((try? winner.json())?["sequence"] as? NSNumber == 1)
        }
        // demo-bank executed exactly one transfer: the next allowed one is number 2.
        let probeTxid = try Kit.approvedTransfer(g, token: token, codes: &codes)
        let next = try Kit.transfer(g, token: token, body: Kit.transferBody, query: "?_txid=\(probeTxid)")
        #expect(next.status == 201, "\(next)")
        #expect((try? next.json())?["sequence"] as? NSNumber == 2, "demo-bank executed more than one of the 50: \(next)")
    }

    // MARK: 9. An approval survives a restart, and is still good once only

    @Test func anApprovalSurvivesARestartAndIsUsableOnce() throws {
        let bed = try Testbed.current
        let bank = try bed.startDemoBank()
        let g1 = try bed.startGateway(upstream: bank.url, config: Kit.config())
        let token = try Kit.login(g1)
        var codes = Kit.Codes()
        let txid = try Kit.approvedTransfer(g1, token: token, codes: &codes)

        g1.process.terminate()
        #expect(g1.process.waitForExit(timeout: 15) == 0, "exit after SIGTERM; stderr:\n\(g1.process.stderrTail())")

        // Same configuration file, same port (so the same public URL and resource), same temp dir.
        let p = try bed.spawn(try BinaryLocator.txgate, ["serve", "--config", g1.configURL.path], name: "txgate")
        try p.waitForPort(g1.port)
        let g2 = GatewayInstance(process: p, port: g1.port, configURL: g1.configURL, config: g1.config)

        let retry = try Kit.transfer(g2, token: token, body: Kit.transferBody, query: "?_txid=\(txid)")
        #expect(retry.status == 201, "retry after the restart:\n\(retry)")
        #expect((try? retry.json())?["status"] as? String == "executed")
        let again = try Kit.transfer(g2, token: token, body: Kit.transferBody, query: "?_txid=\(txid)")
        #expect(again.status == 401, "second retry after the restart:\n\(again)")
        #expect(try Kit.challengeTxid(again) != txid)
    }

    // MARK: 10. No session, open routes, and no policy

    @Test func noSessionOpenRouteAndUnmatchedPath() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config())
        let pub = Kit.publicURL(g)

        // A browser: to the login page, coming back to where it was going.
        let browser = try g.fetch("GET", "/accounts?view=all")
        #expect(browser.status == 307, "browser without a session:\n\(browser)")
        let location = try #require(browser.header("Location"))
        let prefix = pub + "/am/XUI/?"
        #expect(location.hasPrefix(prefix), "Location: \(location)")
        let q = Kit.queryPairs(String(location.dropFirst(prefix.count)))
        #expect(q.first?.name == "goto", "Location: \(location)")
        #expect(q.first?.value == pub + "/accounts?view=all", "Location: \(location)")
        #expect(!location.contains("_txid"))

        // An API client: 401 SSOADVICE asking for the login tree.
        let api = try g.fetch("GET", "/accounts", headers: [("x-authenticate-response", "header")])
        #expect(api.status == 401, "API client without a session:\n\(api)")
        let header = try #require(api.header("WWW-Authenticate"))
        let expected = ["AuthenticateToServiceConditionAdvice": ["/:Login"]]
        try Kit.expectSDKsAgree(header, expected: expected, amURI: pub + "/am/")
        #expect(try Kit.bodyAdvices(api) == expected)
        // The same for the transaction route: no transaction is created without a subject.
        let apiTransfer = try g.fetch("POST", "/transfer", headers: [("x-authenticate-response", "header"), ("Content-Type", "application/json")],
                                      body: Kit.transferBody)
        #expect(apiTransfer.status == 401)
        #expect(try Kit.bodyAdvices(apiTransfer) == expected, "\(apiTransfer)")

        // An open route needs no session.
        let health = try g.fetch("GET", "/health")
        #expect(health.status == 200, "\(health)")
        #expect(try health.json()["status"] as? String == "ok")

        // With a session: no policy for the path (or the method) is a plain 403.
        let token = try Kit.login(g)
        let unmatched = try g.fetch("GET", "/admin/users", headers: [("iPlanetDirectoryPro", token)])
        expectGatewayError(unmatched, 403)
        #expect(!unmatched.hasHeader("WWW-Authenticate") && !unmatched.hasHeader("Location"))
        let wrongMethod = try g.fetch("DELETE", "/accounts", headers: [("iPlanetDirectoryPro", token)])
        expectGatewayError(wrongMethod, 403)
        // And the session does open what it should.
        #expect(try g.fetch("GET", "/accounts", headers: [("iPlanetDirectoryPro", token)]).status == 200)
    }

    // MARK: 11. RFC 9470 for bearer clients

    @Test func bearerClientsGetTheRFC9470ChallengeWithTxid() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config())
        let token = try Kit.login(g)
        var codes = Kit.Codes()
        let bearer = [("Authorization", "Bearer \(token)"), ("Content-Type", "application/json")]

        let r = try g.fetch("POST", "/transfer", headers: bearer, body: Kit.transferBody)
        #expect(r.status == 401, "bearer first try:\n\(r)")
        let values = r.headerValues("WWW-Authenticate")
        #expect(values.count == 1, "\(r.headerSummary)")
        let header = try #require(values.first)
        let pattern = #"^Bearer error="insufficient_user_authentication", error_description="A different authentication level is required", acr_values="ConfirmTransaction", txid="([0-9a-fA-F-]{36})"$"#
        let match = try #require(header.firstMatch(of: try Regex<(Substring, Substring)>(pattern)), "WWW-Authenticate: \(header)")
        let txid = String(match.output.1)
        #expect(Kit.isUUID(txid))
        #expect(!header.contains("SSOADVICE"))

        // The txid it names is the one to approve, and the bearer retry is then allowed once.
        try Kit.approve(g, txid: txid, token: token, code: codes.next(Kit.demoSecret))
        let retry = try g.fetch("POST", "/transfer?_txid=\(txid)", headers: bearer, body: Kit.transferBody)
        #expect(retry.status == 201, "bearer retry:\n\(retry)")
        let again = try g.fetch("POST", "/transfer?_txid=\(txid)", headers: bearer, body: Kit.transferBody)
        #expect(again.status == 401)
        #expect(again.header("WWW-Authenticate")?.contains(#"txid="\#(txid)""#) == false, "\(again)")
    }

    // MARK: 12. The gateway as a PDP: AM's policy evaluation

    @Test func policiesEvaluateAnswersInAMsShape() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config())
        let token = try Kit.login(g)
        let pub = Kit.publicURL(g)
        let path = "/am/json/realms/root/policies?_action=evaluate"
        let headers = [("iPlanetDirectoryPro", token), ("Accept-API-Version", "resource=2.0,protocol=1.0")]
        func request(_ resource: String) -> [String: Any] {
            ["resources": [resource], "application": "iPlanetAMWebAgentService",
             "subject": ["ssoToken": token], "environment": [String: Any]()]
        }

        let accounts = try Kit.post(g, path, request(pub + "/accounts"), headers: headers)
        #expect(accounts.status == 200, "\(accounts)")
        let a = try Kit.jsonArray(accounts)
        #expect(a.count == 1)
        #expect(a.first?["resource"] as? String == pub + "/accounts")
        #expect(a.first?["actions"] as? [String: Bool] == ["GET": true], "\(accounts.bodyText)")
        #expect((a.first?["attributes"] as? [String: Any])?.isEmpty == true, "\(accounts.bodyText)")
        #expect((a.first?["advices"] as? [String: Any])?.isEmpty == true, "\(accounts.bodyText)")

        let transfer = try Kit.post(g, path, request(pub + "/transfer"), headers: headers)
        #expect(transfer.status == 200, "\(transfer)")
        let t = try Kit.jsonArray(transfer)
        #expect(t.count == 1)
        #expect(t.first?["resource"] as? String == pub + "/transfer")
        #expect((t.first?["actions"] as? [String: Any])?.isEmpty == true, "\(transfer.bodyText)")
        let advices = t.first?["advices"] as? [String: [String]]
        #expect(advices?.keys.sorted() == ["TransactionConditionAdvice"], "\(transfer.bodyText)")
        #expect(advices?["TransactionConditionAdvice"]?.count == 1)
        #expect(advices?["TransactionConditionAdvice"]?.first.map(Kit.isUUID) == true, "\(transfer.bodyText)")
        #expect((t.first?["attributes"] as? [String: Any])?.isEmpty == true)

        // No caller token: AM's 401.
        let anonymous = try Kit.post(g, path, request(pub + "/accounts"), headers: [("Accept-API-Version", "resource=2.0,protocol=1.0")])
        #expect(anonymous.status == 401, "\(anonymous)")
        #expect((try? anonymous.json())?["code"] as? NSNumber == 401)
        // A caller token that is no session: 401 too.
        let bogus = try Kit.post(g, path, request(pub + "/accounts"), headers: [("iPlanetDirectoryPro", "not-a-session")])
        #expect(bogus.status == 401, "\(bogus)")
    }

    // MARK: 13. Pending transactions per user are bounded

    @Test func theFourthPendingTransactionIsRateLimited() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config(["security": ["maxPendingTransactions": 3]]))
        let demo = try Kit.login(g, user: "demo")
        let other = try Kit.login(g, user: "other")
        var txids: [String] = []
        for i in 0..<3 {
            let r = try Kit.transfer(g, token: demo, body: IdempotentChallengeTests.amount(i + 1))
            #expect(r.status == 401, "challenge \(i + 1):\n\(r)")
            txids.append(try Kit.challengeTxid(r))
        }
        #expect(Set(txids).count == 3)
        // One of them again is no new transaction: the same TxId, within the limit.
        #expect(try Kit.challengeTxid(try Kit.transfer(g, token: demo, body: IdempotentChallengeTests.amount(1))) == txids[0])
        let fourth = try Kit.transfer(g, token: demo, body: Kit.transferBody)
        expectGatewayError(fourth, 429)
        #expect(!fourth.hasHeader("WWW-Authenticate"), "\(fourth)")
        #expect((try? fourth.json())?["advices"] == nil)
        // Per user: other is not limited by demo's transactions.
        let theirs = try Kit.transfer(g, token: other, body: Kit.transferBody)
        #expect(theirs.status == 401, "other's first challenge:\n\(theirs)")
        // The browser form is limited too.
        let browser = try g.fetch("POST", "/transfer", headers: [("Cookie", "iPlanetDirectoryPro=\(demo)"), ("Content-Type", "application/json")],
                                  body: Kit.transferBody)
        expectGatewayError(browser, 429)
    }

    /// The limit counts transactions waiting for approval: approved ones no longer count.
    @Test func approvedTransactionsNoLongerCountAsPending() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config(["security": ["maxPendingTransactions": 1]]))
        let token = try Kit.login(g)
        var codes = Kit.Codes()
        for round in 1...2 {
            let challenge = try Kit.transfer(g, token: token, body: Kit.transferBody)
            #expect(challenge.status == 401, "round \(round): with the earlier one approved, a new one may wait:\n\(challenge)")
            let txid = try Kit.challengeTxid(challenge)
            try Kit.approve(g, txid: txid, token: token, code: codes.next(Kit.demoSecret))
            #expect(try Kit.transfer(g, token: token, body: Kit.transferBody, query: "?_txid=\(txid)").status == 201)
        }
        // One left waiting fills the limit (the same request again is that one, not another).
        _ = try Kit.challengeTxid(try Kit.transfer(g, token: token, body: Kit.transferBody))
        expectGatewayError(try Kit.transfer(g, token: token, body: IdempotentChallengeTests.amount(7)), 429)
    }

    // MARK: 14. Retries that must never be allowed, and the X-TxID header form

    @Test func unknownUncompletedAndForeignTxIdsAreNeverAllowed() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config())
        let token = try Kit.login(g)
        var codes = Kit.Codes()
        let body = Array(#"{"memo":"rent"}"#.utf8)
        let headers = Kit.apiHeaders(token)

        let txid = try Kit.challengeTxid(try g.fetch("POST", "/echo", headers: headers, body: body))
        // Not yet approved.
        let early = try g.fetch("POST", "/echo?_txid=\(txid)", headers: headers, body: body)
        #expect(early.status == 401, "retry before approval:\n\(early)")
        #expect(try Kit.challengeTxid(early) == txid, "the same request while its transaction waits: the same TxId")
        // Unknown, and not a TxId at all.
        for bogus in [UUID().uuidString.lowercased(), "not-a-txid", "", "../../etc"] {
            let r = try g.fetch("POST", "/echo?_txid=\(Kit.percentEncode(bogus))", headers: headers, body: body)
            #expect(r.status == 401, "_txid=\(bogus):\n\(r)")
            #expect(try Kit.challengeTxid(r) != bogus)
        }

        try Kit.approve(g, txid: txid, token: token, code: codes.next(Kit.demoSecret))
        // Approved for POST /echo: not usable for POST /transfer, nor for another spelling of it.
        let elsewhere = try Kit.transfer(g, token: token, body: Kit.transferBody, query: "?_txid=\(txid)")
        #expect(elsewhere.status == 401, "/echo's TxId on /transfer:\n\(elsewhere)")
        #expect(try Kit.challengeTxid(elsewhere) != txid)
        let upper = try g.fetch("POST", "/echo?_txid=\(txid.uppercased())", headers: headers, body: body)
        #expect(upper.status == 401, "upper-case TxId:\n\(upper)")
        let otherQuery = try g.fetch("POST", "/echo?extra=1&_txid=\(txid)", headers: headers, body: body)
        #expect(otherQuery.status == 401, "another query string is another resource:\n\(otherQuery)")

        // The X-TxID header names the transaction as _txid does, once.
        let viaHeader = try g.fetch("POST", "/echo", headers: headers + [("X-TxID", txid)], body: body)
        #expect(viaHeader.status == 200, "retry with X-TxID:\n\(viaHeader)")
        #expect(try EchoedRequest(viaHeader).uri == "/echo")
        let twice = try g.fetch("POST", "/echo", headers: headers + [("X-TxID", txid)], body: body)
        #expect(twice.status == 401, "X-TxID again:\n\(twice)")
        #expect(try Kit.challengeTxid(twice) != txid)
    }
}

// MARK: - The three SDK parsers

/// How the iOS, Android and JS SDKs read the SSOADVICE header, to check the gateway's against all three.
extension TransactionKit {
    /// iOS: split on ",", then each part on "=" (at the first one); the key must be exactly
    /// `advices`; quotes stripped; Foundation base64.
    static func iosAdvices(_ header: String) -> Data? {
        for part in header.components(separatedBy: ",") {
            guard let eq = part.firstIndex(of: "=") else { continue }
            let key = part[..<eq]
            guard key == "advices" else { continue }
            let value = part[part.index(after: eq)...].trimmingCharacters(in: CharacterSet(charactersIn: "\""))
            return Data(base64Encoded: value)
        }
        return nil
    }

    /// Android: every ","-segment is destructured as key=value (a segment without "=" throws);
    /// the value is base64-decoded with the URL-safe alphabet, which skips "+" and "/".
    static func androidAdvices(_ header: String) throws -> Data? {
        let body = header.hasPrefix("SSOADVICE ") ? String(header.dropFirst("SSOADVICE ".count)) : header
        var map: [String: String] = [:]
        for segment in body.split(separator: ",", omittingEmptySubsequences: false) {
            let kv = segment.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard kv.count == 2 else { throw HarnessError("Android: segment '\(segment)' has no '='") }
            map[String(kv[0]).trimmingCharacters(in: .whitespaces)] = String(kv[1]).replacingOccurrences(of: "\"", with: "")
        }
        return map["advices"].map { Data(urlSafeLenientBase64Decode($0)) }
    }

    /// JS: the value between `advices="` and the next quote, through `atob` (standard alphabet,
    /// length a multiple of 4, `=` only at the end).
    static func jsAdvices(_ header: String) -> Data? {
        guard let start = header.range(of: #"advices=""#),
              let end = header[start.upperBound...].firstIndex(of: "\"") else { return nil }
        let value = header[start.upperBound..<end]
        let alphabet = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        let body = value.prefix { $0 != "=" }
        let padding = value.dropFirst(body.count)
        guard value.count % 4 == 0, body.allSatisfy(alphabet.contains), padding.count <= 2, padding.allSatisfy({ $0 == "=" })
        else { return nil }
        return Data(base64Encoded: String(value))
    }

    /// android.util.Base64 with URL_SAFE: "-" and "_" are 62 and 63; any other character that
    /// is not in the alphabet (including "+" and "/") is skipped; "=" ends the data.
    static func urlSafeLenientBase64Decode(_ s: String) -> [UInt8] {
        var out: [UInt8] = []
        var acc: UInt32 = 0
        var bits = 0
        for c in s.utf8 {
            let v: UInt32
            switch c {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): v = UInt32(c - UInt8(ascii: "A"))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): v = UInt32(c - UInt8(ascii: "a")) + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = UInt32(c - UInt8(ascii: "0")) + 52
            case UInt8(ascii: "-"): v = 62
            case UInt8(ascii: "_"): v = 63
            case UInt8(ascii: "="): return out
            default: continue
            }
            acc = (acc << 6) | v
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8((acc >> UInt32(bits)) & 0xFF))
                acc &= (1 << UInt32(bits)) - 1
            }
        }
        return out
    }

    /// Every rule of WIRE.md §3a, and the three SDKs decoding the same advices as the body's.
    static func expectSDKsAgree(_ header: String, expected: [String: [String]], amURI: String,
                                sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(header.hasPrefix("SSOADVICE "), "\(header)", sourceLocation: sourceLocation)
        let rest = header.dropFirst("SSOADVICE ".count)
        #expect(!rest.contains(", "), "a space after a comma: \(header)", sourceLocation: sourceLocation)
        let segments = rest.split(separator: ",", omittingEmptySubsequences: false)
        #expect(segments.map { $0.split(separator: "=", maxSplits: 1).first.map(String.init) ?? "" } == ["realm", "advices", "am_uri"],
                "parameters: \(header)", sourceLocation: sourceLocation)
        for s in segments {
            let kv = s.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            #expect(kv.count == 2 && kv[1].count >= 2 && kv[1].first == "\"" && kv[1].last == "\""
                    && !kv[1].dropFirst().dropLast().contains("\""),
                    "'\(s)' is not key=\"value\" in \(header)", sourceLocation: sourceLocation)
        }
        let params = try ssoAdviceParams(header)
        #expect(params["realm"] == "/", sourceLocation: sourceLocation)
        #expect(params["am_uri"] == amURI, "am_uri: \(params["am_uri"] ?? "nil")", sourceLocation: sourceLocation)
        #expect(params["am_uri"]?.hasSuffix("/am/") == true, sourceLocation: sourceLocation)
        let b64 = params["advices"] ?? ""
        #expect(!b64.contains("+") && !b64.contains("/"), "advices base64 has + or /: \(b64)", sourceLocation: sourceLocation)

        let ios = iosAdvices(header)
        let android = try androidAdvices(header)
        let js = jsAdvices(header)
        #expect(ios != nil, "iOS could not decode advices from \(header)", sourceLocation: sourceLocation)
        #expect(js != nil, "atob could not decode advices from \(header)", sourceLocation: sourceLocation)
        #expect(android != nil, "Android found no advices in \(header)", sourceLocation: sourceLocation)
        for (name, data) in [("iOS", ios), ("Android", android), ("JS", js)] {
            guard let data else { continue }
            let obj = try? adviceObject(data)
            #expect(obj == expected, "\(name) decoded \(String(decoding: data, as: UTF8.self).debugDescription), expected \(expected)",
                    sourceLocation: sourceLocation)
        }
        #expect(ios == android && android == js, "the SDKs decode different bytes", sourceLocation: sourceLocation)
    }
}
