import Foundation
import Testing
import TestSupport

/// Security review, issue 11, the high items (1, 2, 3, and 5's missing field): the path policy decides on is the path the
/// backend receives, and a transaction's approval binds the media type and the exact numbers.
extension SecurityReviewTests {
    /// TransactionKit's policies, an open `/pub/**` first and an open `GET /echo` last.
    func traversalGateway() throws -> GatewayInstance {
        var c = Kit.config()
        var policies = c["policies"] as? [[String: Any]] ?? []
        policies.insert(["name": "pub", "resources": ["/pub/**"], "actions": ["GET"], "subjects": "anyone"], at: 0)
        policies.append(["name": "echo-get", "resources": ["/echo"], "actions": ["GET"], "subjects": "anyone"])
        c["policies"] = policies
        return try Testbed.current.startGatewayWithBank(config: c).0
    }

    @Test("dot segments and encoded traversal cannot climb out of an open prefix")
    func traversalIsNormalizedBeforePolicy() throws {
        let g = try traversalGateway()
        for target in ["/pub/../accounts", "/pub/%2e%2e/accounts", "/pub/.%2E/accounts", "/pub/./../accounts"] {
            let r = try g.fetch("GET", target)
            #expect(r.status == 307, "\(target) was not decided as /accounts:\n\(r)")
            #expect(r.header("Location")?.contains("XUI") == true, "\(target):\n\(r)")
        }
        for target in ["/accounts/..%2ftransfer", "/pub/..%2F..%2Faccounts", "/pub/%5c..%5caccounts", "/pub/a%00", "/../accounts"] {
            expectGatewayError(try g.fetch("GET", target), 400)
        }
        // The backend receives the normalized path that policy decided on.
        for target in ["/pub/../echo?q=1", "//echo?q=1", "/%65cho?q=1", "/x/./y/../../echo?q=1"] {
            let r = try g.fetch("GET", target)
            #expect(r.status == 200, "\(target):\n\(r)")
            #expect(try EchoedRequest(r).uri == "/echo?q=1", "\(target) reached the backend as:\n\(r.bodyText)")
        }
    }

    @Test("an approved JSON body retried as a form is not executed; a bound body needs a media type")
    func mediaTypeIsBound() throws {
        let g = try kitGateway()
        let token = try Kit.login(g)
        var codes = Kit.Codes()
        let txid = try Kit.challengeTxid(try Kit.transfer(g, token: token, body: Kit.transferBody))
        try Kit.approve(g, txid: txid, token: token, code: codes.next(Kit.demoSecret))

        var formHeaders = Kit.apiHeaders(token).filter { $0.0 != "Content-Type" }
        formHeaders.append(("Content-Type", "application/x-www-form-urlencoded"))
        let asForm = try g.fetch("POST", "/transfer?_txid=\(txid)", headers: formHeaders, body: Kit.transferBody)
        #expect(asForm.status == 400 || asForm.status == 401, "the JSON approval opened a form request:\n\(asForm)")
        #expect(!asForm.bodyText.contains("executed"), "\(asForm)")

        let none = try g.fetch("POST", "/transfer", headers: Kit.apiHeaders(token).filter { $0.0 != "Content-Type" }, body: Kit.transferBody)
        expectGatewayError(none, 415)

        // The approval was not spent on the form request: the JSON retry it was for goes through.
        let retry = try Kit.transfer(g, token: token, body: Kit.transferBody, query: "?_txid=\(txid)")
        #expect(retry.status == 201, "\(retry)")

        // A form body binds as a form.
        let form = Array("amount=100&currency=EUR&payee=Bob".utf8)
        let challenged = try g.fetch("POST", "/transfer", headers: formHeaders, body: form)
        #expect(challenged.status == 401, "\(challenged)")
        let repeated = try g.fetch("POST", "/transfer", headers: formHeaders, body: Array("amount=100&currency=EUR&payee=Bob&payee=Mallory".utf8))
        expectGatewayError(repeated, 400)
    }

    @Test("numbers are approved by their exact decimal value, and shown exactly")
    func exactNumbers() throws {
        let g = try kitGateway()
        let token = try Kit.login(g)
        var codes = Kit.Codes()
        func body(_ amount: String) -> [UInt8] { Array(#"{"amount":\#(amount),"currency":"EUR","payee":"Bob"}"#.utf8) }
        let txid = try Kit.challengeTxid(try Kit.transfer(g, token: token, body: body("9007199254740992")))
        try Kit.approve(g, txid: txid, token: token, code: codes.next(Kit.demoSecret))
        let other = try Kit.transfer(g, token: token, body: body("9007199254740993"), query: "?_txid=\(txid)")
        #expect(other.status == 401, "an approval of 9007199254740992 opened 9007199254740993:\n\(other)")
        #expect(try Kit.transfer(g, token: token, body: body("9007199254740992.0"), query: "?_txid=\(txid)").status == 201)

        let tiny = try Kit.challengeTxid(try Kit.transfer(g, token: token, body: body("100.000000000000001")))
        let start = try Kit.startComposite(g, txid: tiny, session: .header(token))
        let callbacks = try #require(try start.json()["callbacks"] as? [[String: Any]])
        #expect(Kit.output(callbacks.first, "message") as? String == "Approve 100.000000000000001 EUR to Bob?", "\(callbacks)")
    }

    @Test("a bound field missing from the body, or that would not read as it is, is refused by name")
    func missingFieldIsRefused() throws {
        let g = try kitGateway()
        let token = try Kit.login(g)
        let r = try Kit.transfer(g, token: token, body: Array(#"{"amount":100,"currency":"EUR"}"#.utf8))
        expectGatewayError(r, 400)
        #expect(r.bodyText.contains("/payee"), "\(r.bodyText)")
        // What the user would be shown must read as it is (item 5).
        for payee in ["\u{202E}boB", "Bob\r\nYour one-time code is 000000", "Bob\u{200B}", String(repeating: "B", count: 5000)] {
            let body = try JSONSerialization.data(withJSONObject: ["amount": 100, "currency": "EUR", "payee": payee])
            let shown = try Kit.transfer(g, token: token, body: Array(body))
            expectGatewayError(shown, 400)
            #expect(shown.bodyText.contains("/payee"), "\(shown.bodyText)")
        }
    }
}

/// Issue 24 item 10: a bound field of a declared type is checked before any challenge.
extension SecurityReviewTests {
    @Test("a bound value that is not of its declared type is a 400 naming the field and the rule, before any approval")
    func typedFieldsAreRefusedBeforeTheChallenge() throws {
        var c = Kit.config(["metrics": ["allowFrom": ["127.0.0.1/32"]]])
        var policies = c["policies"] as? [[String: Any]] ?? []
        let i = try #require(policies.firstIndex { $0["name"] as? String == "transfer" })
        var tx = policies[i]["transaction"] as? [String: Any] ?? [:]
        tx["bind"] = ["body": ["/amount", "/currency", "/payee"],
                      "types": ["/amount": ["type": "decimal", "maxScale": 2, "min": "0.01"], "/currency": ["oneOf": ["EUR", "USD"]]]]
        policies[i]["transaction"] = tx
        c["policies"] = policies
        let g = try Testbed.current.startGatewayWithBank(config: c).0
        let token = try Kit.login(g)
        let form = Kit.apiHeaders(token).filter { $0.0 != "Content-Type" } + [("Content-Type", "application/x-www-form-urlencoded")]
        let comma = try g.fetch("POST", "/transfer", headers: form, body: Array("amount=12,50&currency=EUR&payee=Bob".utf8))
        expectGatewayError(comma, 400)
        #expect((try? comma.json())?["message"] as? String == "'/amount' must be a decimal number like 12.50 (digits, one '.' at most), not '12,50'",
                "\(comma.bodyText)")
        let gbp = try Kit.transfer(g, token: token, body: Array(#"{"amount":12.5,"currency":"GBP","payee":"Bob"}"#.utf8))
        expectGatewayError(gbp, 400)
        #expect(gbp.bodyText.contains("one of EUR, USD"), "\(gbp.bodyText)")
        // No approval was asked for: no transaction exists.
        let metrics = try g.fetch("GET", "/-/metrics").bodyText
        #expect(metrics.split(separator: "\n").contains("txgate_transactions_created_total 0"), "a transaction was created")
        // A value of its type is challenged as before.
        #expect(try Kit.transfer(g, token: token, body: Array(#"{"amount":12.5,"currency":"EUR","payee":"Bob"}"#.utf8)).status == 401)
    }
}
