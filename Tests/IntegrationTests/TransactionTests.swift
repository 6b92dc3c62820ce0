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

    // MARK: 1. The whole flow, as an SDK runs it

    @Test func fullFlowChallengeApproveRetryOnceThenNewChallenge() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config())
        let token = try Kit.login(g)
        var codes = Kit.Codes()

        // The first try: 401 SSOADVICE naming a fresh transaction.
        let first = try Kit.transfer(g, token: token, body: Kit.transferBody)
        #expect(first.status == 401, "first try:\n\(first)")
        let header = try #require(first.header("WWW-Authenticate"), "no WWW-Authenticate on:\n\(first)")
        #expect(header.hasPrefix("SSOADVICE "), "\(header)")
        let params = try Kit.ssoAdviceParams(header)
        let advices = try Kit.decodeAdviceJSON(try #require(params["advices"]))
        #expect(Array(advices.keys) == ["TransactionConditionAdvice"], "\(advices)")
        let txids = try #require(advices["TransactionConditionAdvice"])
        #expect(txids.count == 1)
        let txid = try #require(txids.first)
        #expect(Kit.isUUID(txid), "TxId '\(txid)' is not a UUID")
        #expect(try Kit.bodyAdvices(first) == advices, "body advices differ from the header's")
        #expect(!first.bodyText.contains("executed"))

        // The journey the advice asks for shows what is approved, then asks for the code.
        let start = try Kit.startComposite(g, txid: txid, session: .header(token))
        #expect(start.status == 200, "composite_advice start:\n\(start)")
        let step = try start.json()
        let callbacks = try #require(step["callbacks"] as? [[String: Any]])
        #expect(callbacks.map { $0["type"] as? String } == ["TextOutputCallback", "PasswordCallback"], "\(callbacks)")
        #expect(Kit.output(callbacks.first, "message") as? String == "Approve 100 EUR to Bob?", "\(callbacks)")
        #expect(Kit.output(callbacks.first, "messageType") as? String == "0")

        let done = try Kit.post(g, Kit.authPath, Kit.answer(step, [codes.next(Kit.demoSecret)]), headers: [("iPlanetDirectoryPro", token)])
        #expect(done.status == 200, "answering the TOTP step:\n\(done)")
        #expect(try done.json()["tokenId"] as? String == token, "the approval must answer with the same session")

        // The retry with _txid is allowed, and reaches demo-bank.
        let retry = try Kit.transfer(g, token: token, body: Kit.transferBody, query: "?_txid=\(txid)")
        #expect(retry.status == 201, "retry with _txid:\n\(retry)")
        let executed = try retry.json()
        #expect(executed["status"] as? String == "executed")
        #expect((executed["amount"] as? NSNumber)?.intValue == 100)
        #expect(executed["payee"] as? String == "Bob")
        #expect((executed["sequence"] as? NSNumber)?.intValue == 1)

        // Once only: the same retry again is a new challenge with a new TxId.
        let again = try Kit.transfer(g, token: token, body: Kit.transferBody, query: "?_txid=\(txid)")
        #expect(again.status == 401, "second retry with the consumed TxId:\n\(again)")
        let newTxid = try Kit.challengeTxid(again)
        #expect(newTxid != txid, "a consumed TxId was offered again")
        #expect(Kit.isUUID(newTxid))
        #expect(!again.bodyText.contains("executed"))
    }

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

    // MARK: 7. An approval expires with its transaction

    @Test func anExpiredTransactionIsANewChallenge() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config(transferTtlS: 1))
        let token = try Kit.login(g)
        var codes = Kit.Codes()

        // The TTL is in whole seconds: start just after a second boundary so that the approval
        // surely lands inside the one second the transaction lives.
        Kit.waitForFreshSecond()
        let txid = try Kit.approvedTransfer(g, token: token, codes: &codes)

        Thread.sleep(forTimeInterval: 2.5)
        let late = try Kit.transfer(g, token: token, body: Kit.transferBody, query: "?_txid=\(txid)")
        #expect(late.status == 401, "retry 2.5 s after an approval with ttlS 1:\n\(late)")
        let newTxid = try Kit.challengeTxid(late)
        #expect(newTxid != txid)
        #expect(!late.bodyText.contains("executed"))
    }

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

// MARK: - Helpers

/// Logging in, challenging, approving and reading challenges, as the SDKs do.
enum TransactionKit: JourneyClient {
    static let password = "S3cure-Transf3r!"
    static let hash = PasswordHash.hash(password)
    static let demoSecret = "JBSWY3DPEHPK3PXP"
    static let otherSecret = "GEZDGNBVGY3TQOJQ"
    static let transferBody = Array(#"{"amount":100,"currency":"EUR","payee":"Bob"}"#.utf8)

    /// demo-bank's policies (health, accounts, transfer) plus /echo bound to the whole body.
    static func config(transferTtlS: Int = 180, _ extra: [String: Any] = [:]) -> [String: Any] {
        deepMerge([
            "users": [
                ["username": "demo", "passwordHash": hash, "email": "demo@example.com", "totpSecret": demoSecret],
                ["username": "other", "passwordHash": hash, "email": "other@example.com", "totpSecret": otherSecret],
            ],
            "loginJourney": "Login",
            "journeys": [
                "Login": [["type": "UsernamePassword"]],
                "ConfirmTransaction": [["type": "TOTP", "prompt": "One Time Password"]],
            ],
            "policies": [
                ["name": "health", "resources": ["/health"], "actions": ["GET"], "subjects": "anyone"],
                ["name": "accounts", "resources": ["/accounts", "/accounts/*"], "actions": ["GET"], "subjects": "authenticated"],
                ["name": "transfer", "resources": ["/transfer"], "actions": ["POST"], "subjects": "authenticated",
                 "transaction": ["journey": "ConfirmTransaction", "ttlS": transferTtlS,
                                 "bind": ["body": ["/amount", "/currency", "/payee"]],
                                 "display": "Approve {amount} {currency} to {payee}?"]],
                ["name": "echo", "resources": ["/echo"], "actions": ["POST"], "subjects": "authenticated",
                 "transaction": ["journey": "ConfirmTransaction", "bind": ["body": true]]],
            ],
        ], extra)
    }

    /// The gateway's public URL: derived from `listen` (no publicUrl in the config).
    static func publicURL(_ g: GatewayInstance) -> String { "http://127.0.0.1:\(g.port)" }

    /// Logs in through the Login journey and returns the session token.
    static func login(_ g: GatewayInstance, user: String = "demo") throws -> String {
        let start = try post(g, authPath, nil)
        guard start.status == 200 else { throw HarnessError("login start failed: \(start)") }
        let done = try post(g, authPath, answer(try start.json(), [user, password]))
        guard done.status == 200, let token = try done.json()["tokenId"] as? String else {
            throw HarnessError("login as \(user) failed: \(done)")
        }
        return token
    }

    /// TOTP codes for one test. Each code is accepted once per user, so every approval takes
    /// the next 30 s step from a fixed base (base, base+30: both within the ±1 step window
    /// for the next 30 s).
    struct Codes {
        let base = Int(Date().timeIntervalSince1970)
        private var used: [String: Int] = [:]
        mutating func next(_ secret: String) -> String {
            let n = used[secret, default: 0]
            precondition(n < 2, "at most two TOTP approvals per user per test")
            used[secret] = n + 1
            return TOTP(secret: Base32.decode(secret)!).code(at: base + 30 * n)
        }
    }

    static func apiHeaders(_ token: String) -> [(String, String)] {
        [("x-authenticate-response", "header"), ("iPlanetDirectoryPro", token), ("Content-Type", "application/json")]
    }

    /// POST /transfer as an SDK does (x-authenticate-response: header).
    static func transfer(_ g: GatewayInstance, token: String, body: [UInt8], query: String = "") throws -> HTTPResponse {
        try g.fetch("POST", "/transfer" + query, headers: apiHeaders(token), body: body)
    }

    enum SessionCarrier {
        case header(String)
        case cookie(String)
        var pair: (String, String) {
            switch self {
            case .header(let t): return ("iPlanetDirectoryPro", t)
            case .cookie(let t): return ("Cookie", "iPlanetDirectoryPro=\(t)")
            }
        }
    }

    static func adviceXML(_ txid: String) -> String {
        #"<Advices><AttributeValuePair><Attribute name="TransactionConditionAdvice"/><Value>\#(txid)</Value></AttributeValuePair></Advices>"#
    }

    /// Starts the composite-advice journey for a transaction (authIndexValue URL-encoded XML).
    static func startComposite(_ g: GatewayInstance, txid: String, session: SessionCarrier) throws -> HTTPResponse {
        try post(g, authPath + "?authIndexType=composite_advice&authIndexValue=\(percentEncode(adviceXML(txid)))", nil,
                 headers: [session.pair])
    }

    /// POST /transfer, challenged, then approved with the next code: the step-up every retry
    /// test starts from. Returns the approved TxId.
    /// `approveOn`: the instance that runs the approval (default: `g`).
    static func approvedTransfer(_ g: GatewayInstance, approveOn h: GatewayInstance? = nil, token: String,
                                 codes: inout Codes, body: [UInt8] = transferBody) throws -> String {
        let txid = try challengeTxid(try transfer(g, token: token, body: body))
        try approve(h ?? g, txid: txid, token: token, code: codes.next(demoSecret))
        return txid
    }

    /// Runs the approval journey with `code`; throws unless it answers 200 with a tokenId.
    static func approve(_ g: GatewayInstance, txid: String, token: String, code: String) throws {
        let start = try startComposite(g, txid: txid, session: .header(token))
        guard start.status == 200 else { throw HarnessError("approval of \(txid) did not start: \(start)") }
        let done = try post(g, authPath, answer(try start.json(), [code]), headers: [("iPlanetDirectoryPro", token)])
        guard done.status == 200, (try? done.json())?["tokenId"] as? String == token else {
            throw HarnessError("approval of \(txid) failed: \(done)")
        }
    }

    /// The TxId of a 401 SSOADVICE challenge (from its header, checked against its body).
    static func challengeTxid(_ r: HTTPResponse) throws -> String {
        guard r.status == 401, let header = r.header("WWW-Authenticate"), header.hasPrefix("SSOADVICE ") else {
            throw HarnessError("not a 401 SSOADVICE challenge:\n\(r)")
        }
        guard let b64 = try ssoAdviceParams(header)["advices"] else { throw HarnessError("no advices in \(header)") }
        let advices = try decodeAdviceJSON(b64)
        guard let list = advices["TransactionConditionAdvice"], list.count == 1, let txid = list.first, isUUID(txid) else {
            throw HarnessError("no single TransactionConditionAdvice in \(advices)")
        }
        guard try bodyAdvices(r) == advices else { throw HarnessError("header and body advices differ:\n\(r)") }
        return txid
    }

    /// `SSOADVICE k="v",k="v"` → [k: v], strictly: values quoted, no space after commas.
    static func ssoAdviceParams(_ header: String) throws -> [String: String] {
        guard header.hasPrefix("SSOADVICE ") else { throw HarnessError("not SSOADVICE: \(header)") }
        var out: [String: String] = [:]
        for segment in header.dropFirst("SSOADVICE ".count).split(separator: ",", omittingEmptySubsequences: false) {
            let kv = segment.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard kv.count == 2, kv[1].count >= 2, kv[1].first == "\"", kv[1].last == "\"" else {
                throw HarnessError("segment '\(segment)' of '\(header)' is not key=\"value\"")
            }
            out[String(kv[0])] = String(kv[1].dropFirst().dropLast())
        }
        return out
    }

    /// Strict base64 (standard alphabet, padded) of the advices JSON → [name: values].
    static func decodeAdviceJSON(_ b64: String) throws -> [String: [String]] {
        guard let data = Data(base64Encoded: b64) else { throw HarnessError("advices '\(b64)' is not padded standard base64") }
        return try adviceObject(data)
    }

    static func adviceObject(_ data: Data) throws -> [String: [String]] {
        guard let obj = try JSONSerialization.jsonObject(with: data) as? [String: [String]] else {
            throw HarnessError("advices JSON is not {name: [strings]}: \(String(decoding: data, as: UTF8.self))")
        }
        return obj
    }

    /// The `advices` object of a challenge's JSON body.
    static func bodyAdvices(_ r: HTTPResponse) throws -> [String: [String]] {
        guard let a = try r.json()["advices"] as? [String: [String]] else {
            throw HarnessError("no advices object in the body: \(r.bodyText.prefix(300))")
        }
        return a
    }

    static func jsonArray(_ r: HTTPResponse) throws -> [[String: Any]] {
        guard let a = try JSONSerialization.jsonObject(with: Data(r.body)) as? [[String: Any]] else {
            throw HarnessError("not a JSON array of objects: \(r.bodyText.prefix(300))")
        }
        return a
    }

    // MARK: The three SDK parsers

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

    // MARK: Encodings and small utilities

    static func isUUID(_ s: String) -> Bool { s.utf8.count == 36 && UUID(uuidString: s) != nil }

    /// RFC 3986 unreserved characters stay; everything else is %XX.
    static func percentEncode(_ s: String) -> String {
        var out = ""
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(b))
            default:
                out += String(format: "%%%02X", b)
            }
        }
        return out
    }

    /// A query string → its pairs, percent-decoded, in order.
    static func queryPairs(_ query: String) -> [(name: String, value: String)] {
        query.split(separator: "&").map { part in
            let kv = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let decode: (Substring) -> String = { String($0).removingPercentEncoding ?? String($0) }
            return (decode(kv[0]), kv.count > 1 ? decode(kv[1]) : "")
        }
    }

    static func base64url(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    static func sha256Hex(_ bytes: [UInt8]) -> String {
        Crypto.hex(Crypto.sha256(bytes))
    }

    /// Sleeps until just after the next whole second.
    static func waitForFreshSecond() {
        let now = Date().timeIntervalSince1970
        let frac = now - now.rounded(.down)
        Thread.sleep(forTimeInterval: 1.0 - frac + 0.02)
    }
}
