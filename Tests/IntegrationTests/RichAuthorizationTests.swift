import Foundation
import Testing
import TestSupport
import TxGateCore
import TxGateCrypto

/// Issue 28 item 2, RFC 9396 Rich Authorization Requests: an agent asks, ahead of the request
/// it is about to send, for the person's approval of exactly that payment (CIBA, or PAR and
/// `authorize`); the person sees its fields; the token carries them; the gateway lets through
/// one request with those values, and demo-bank checks the Txn-Token that says them.
@Suite("Rich Authorization Requests", .testbed)
struct RichAuthorizationTests {
    typealias Kit = TransactionKit
    typealias A = ApprovalKit
    static let secret = "agent-secret-0123456789"
    static let issuer = "/am/oauth2/realms/root"
    static let payment = #"[{"type":"payment_initiation","amount":100,"currency":"EUR","payee":"Bob"}]"#
    static var mapping: [String: Any] { ["type": "payment_initiation", "fields": ["/amount": "/amount", "/currency": "/currency", "/payee": "/payee"]] }

    /// demo-bank refusing transfers without a Txn-Token of the gateway; /transfer and /echo both
    /// open to a `payment_initiation` approved ahead.
    /// `approver`: the journey that approves a `payment_initiation`.
    func start(approver: String = "ApproverConfirm") throws -> (GatewayInstance, DemoBankInstance) {
        let bed = try Testbed.current
        let secretFile = try bed.dir.write("agent.secret", Self.secret)
        let bankPort = try Ports.free()
        let bind: [String: Any] = ["body": ["/amount", "/currency", "/payee"]]
        let g = try bed.startGateway(upstream: "http://127.0.0.1:\(bankPort)", config: A.config(approver: "ApproverConfirm", [
            "policies": [
                ["name": "transfer", "resources": ["/transfer"], "actions": ["POST"], "subjects": "authenticated",
                 "transaction": ["journey": "ConfirmTransaction", "bind": bind, "display": "Approve {amount} {currency} to {payee}?",
                                 "authorizationDetails": Self.mapping]],
                ["name": "echo", "resources": ["/echo"], "actions": ["POST"], "subjects": "authenticated",
                 "transaction": ["journey": "ConfirmTransaction", "bind": bind, "authorizationDetails": Self.mapping]],
            ],
            "txnTokens": ["enabled": true, "audience": "demo-bank"],
            "oauth2": [
                "clients": [["clientId": "agent", "clientSecretFile": secretFile.path, "scopes": ["openid"],
                             "redirectUris": ["https://agent.example/cb"], "ciba": ["users": ["demo"]]]],
                "ciba": ["approverJourney": "ApproverConfirm", "channels": ["email"], "expiresInS": 60, "intervalS": 1],
                "authorizationDetailsTypes": ["payment_initiation": [
                    "journey": approver, "display": "Pay {amount} {currency} to {payee}", "ttlS": 300,
                    "schema": ["type": "object", "required": ["amount", "currency", "payee"], "additionalProperties": false,
                               "properties": ["amount": ["type": "number", "minimum": 0.01, "maximum": 10000],
                                              "currency": ["type": "string", "enum": ["EUR", "USD"]],
                                              "payee": ["type": "string", "maxLength": 64]]],
                ]],
            ],
        ]))
        let bank = try bed.startDemoBank(port: bankPort, arguments: ["--txn-token-jwks", "http://127.0.0.1:\(g.port)\(Self.issuer)/connect/jwk_uri"])
        return (g, bank)
    }

    func post(_ g: GatewayInstance, _ path: String, _ form: [(String, String)]) throws -> HTTPResponse {
        let body = form.map { "\($0.0)=\(Query.encode($0.1))" }.joined(separator: "&")
        return try g.fetch("POST", Self.issuer + path, headers: [
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Authorization", "Basic " + Data("agent:\(Self.secret)".utf8).base64EncodedString()),
        ], body: Array(body.utf8))
    }

    func transfer(_ g: GatewayInstance, _ path: String = "/transfer", token: String, _ body: String) throws -> HTTPResponse {
        try g.fetch("POST", path, headers: [("Authorization", "Bearer \(token)"), ("Content-Type", "application/json")], body: Array(body.utf8))
    }

    func json(_ text: String) throws -> Any { try JSONSerialization.jsonObject(with: Data(text.utf8)) }

    @Test("CIBA: the person approves the payment's fields; the token says them; one transfer with those values runs, once")
    func ciba() throws {
        let (g, _) = try start()
        let refused = try post(g, "/bc-authorize", [("scope", "openid"), ("login_hint", "demo"),
                                                     ("authorization_details", #"[{"type":"payment_initiation","amount":100,"currency":"GBP","payee":"Bob"}]"#)])
        let refusedError = try refused.json()["error"] as? String
        #expect(refused.status == 400 && refusedError == "invalid_authorization_details", "\(refused)")
        let asked = try post(g, "/bc-authorize", [("scope", "openid"), ("login_hint", "demo"), ("authorization_details", Self.payment)])
        let id = try #require(try asked.json()["auth_req_id"] as? String, "\(asked)")
        let outbox = g.configURL.deletingLastPathComponent().appendingPathComponent("var/outbox")
        let mail = try #require(try MailTools.waitForOutbox(outbox, count: 1, timeout: 20).last)
        let approval = try #require(A.requestId(inLink: mail.body))
        #expect(mail.body.contains("Pay 100 EUR to Bob"), "\(mail.body)")
        let phone = try Kit.login(g)
        let shown = try A.status(g, id: approval, token: phone).json()["display"] as? String
        #expect(shown == "Pay 100 EUR to Bob\n/amount: 100\n/currency: EUR\n/payee: Bob", "\(shown ?? "-")")
        #expect(try A.approve(g, id: approval, token: phone, code: "0").status == 200)
        Thread.sleep(forTimeInterval: 1.1)
        let tokens = try post(g, "/access_token", [("grant_type", CIBARequest.grantType), ("auth_req_id", id)])
        let answer = try tokens.json()
        #expect(tokens.status == 200, "\(tokens)")
        let expected = try json(Self.payment) as? NSArray
        #expect(answer["authorization_details"] as? NSArray == expected, "the token response: \(answer)")
        let token = try #require(answer["access_token"] as? String)
        #expect(OAuthKit.claims(token)["authorization_details"] as? NSArray == expected)
        let introspected = try post(g, "/introspect", [("token", token)]).json()
        #expect(introspected["authorization_details"] as? NSArray == expected, "\(introspected)")
        // Other values: not what was approved; the approval is not spent by them.
        let more = try transfer(g, token: token, #"{"amount":1000,"currency":"EUR","payee":"Bob"}"#)
        #expect(more.status == 401, "\(more)")
        let executed = try transfer(g, token: token, #"{"payee":"Bob","amount":100,"currency":"EUR"}"#)
        #expect(executed.status == 201, "demo-bank checked the Txn-Token: \(executed)")
        let again = try transfer(g, token: token, #"{"payee":"Bob","amount":100,"currency":"EUR"}"#)
        #expect(again.status == 401, "the approval opened a second transfer: \(again)")
        let discovery = try g.fetch("GET", Self.issuer + "/.well-known/openid-configuration").json()
        #expect(discovery["authorization_details_types_supported"] as? [String] == ["payment_initiation"])
    }

    @Test("PAR and authorize: the login page shows the fields; the code's tokens open one request, whose Txn-Token carries them")
    func authorize() throws {
        let (g, _) = try start()
        let session = try Kit.login(g)
        let verifier = OAuthKit.verifier
        var form = [("response_type", "code"), ("client_id", "agent"), ("redirect_uri", "https://agent.example/cb"), ("scope", "openid"),
                    ("code_challenge", PKCE.s256(verifier)), ("code_challenge_method", "S256"), ("state", "s1")]
        let bad = try post(g, "/par", form + [("authorization_details", #"[{"type":"payment_initiation","amount":5,"currency":"EUR","payee":"Carol","memo":"x"}]"#)])
        let badError = try bad.json()["error_description"] as? String
        #expect(bad.status == 400 && badError == "authorization_details[0] (payment_initiation): /memo is not a field of this type", "\(bad)")
        let two = #"[{"type":"payment_initiation","amount":5,"currency":"EUR","payee":"Carol"},{"type":"payment_initiation","amount":6,"currency":"EUR","payee":"Dan"}]"#
        let twoError = try post(g, "/par", form + [("authorization_details", two)]).json()["error"] as? String
        #expect(twoError == "invalid_authorization_details")
        let details = #"[{"type":"payment_initiation","amount":5,"currency":"EUR","payee":"Carol"}]"#
        form.append(("authorization_details", details))
        let pushed = try post(g, "/par", form)
        let uri = try #require(try pushed.json()["request_uri"] as? String, "\(pushed)")
        let cookie = [("Cookie", "iPlanetDirectoryPro=\(session)")]
        let first = try g.fetch("GET", Self.issuer + "/authorize?client_id=agent&request_uri=" + Query.encode(uri), headers: cookie)
        let login = try #require(first.header("Location"), "\(first)")
        let back = try #require(Query(target: login)["goto"])
        let txid = try #require(Query(target: back)["txid"], "\(back)")
        let page = try g.fetch("GET", String(login.dropFirst(g.baseURL.count)), headers: cookie)
        #expect(page.bodyText.contains("Pay 5 EUR to Carol") && page.bodyText.contains(">Carol<"), "the fields are on the page")
        try Kit.approve(g, txid: txid, token: session, code: "0")
        let issued = try g.fetch("GET", String(back.dropFirst(g.baseURL.count)), headers: cookie)
        let callback = try #require(issued.header("Location"), "\(issued)")
        let code = try #require(Query(target: callback)["code"], "\(callback)")
        let tokens = try post(g, "/access_token", [("grant_type", "authorization_code"), ("code", code), ("code_verifier", verifier),
                                                   ("redirect_uri", "https://agent.example/cb")])
        let answer = try tokens.json()
        let approved = try json(details) as? NSArray
        #expect(answer["authorization_details"] as? NSArray == approved, "\(tokens)")
        let token = try #require(answer["access_token"] as? String)
        #expect(OAuthKit.claims(token)["txn"] as? String == txid)
        let echoed = try transfer(g, "/echo", token: token, #"{"amount":5,"currency":"EUR","payee":"Carol"}"#)
        #expect(echoed.status == 200, "\(echoed)")
        let headers = try #require(try echoed.json()["headers"] as? [[String: String]])
        let txn = try #require(headers.first { $0["name"]?.lowercased() == "txn-token" }?["value"])
        let tctx = try #require(OAuthKit.claims(txn)["tctx"] as? [String: Any])
        #expect(tctx["authorization_details"] as? NSArray == approved, "\(tctx)")
        #expect(tctx["bound"] as? NSDictionary == ["/amount": 5, "/currency": "EUR", "/payee": "Carol"] as NSDictionary)
        // Spent on /echo: the same approval does not open /transfer too.
        #expect(try transfer(g, token: token, #"{"amount":5,"currency":"EUR","payee":"Carol"}"#).status == 401)
    }
}

/// The CIBA approval of `authorization_details` made as a person makes it: the emailed link
/// opened in headless Chromium (a fresh profile: the person's phone), signed in, the payment's
/// fields read on the approval page, approved with a TOTP code through the type's journey.
@Suite(.serialized, .testbed, .enabled(if: Browser.isInstalled, Comment(rawValue: Browser.notInstalled)))
struct RichAuthorizationBrowserTests {
    typealias Kit = TransactionKit

    @Test(.timeLimit(.minutes(2)))
    func thePersonReadsThePaymentOnTheApprovalPageAndApprovesIt() throws {
        let bed = try Testbed.current
        let rar = RichAuthorizationTests()
        let (g, _) = try rar.start(approver: "ApproverTOTP")
        let asked = try rar.post(g, "/bc-authorize", [("scope", "openid"), ("login_hint", "demo"), ("binding_message", "Agent 7"),
                                                      ("authorization_details", RichAuthorizationTests.payment)])
        let id = try #require(try asked.json()["auth_req_id"] as? String, "\(asked)")
        let outbox = g.configURL.deletingLastPathComponent().appendingPathComponent("var/outbox")
        let mail = try #require(try MailTools.waitForOutbox(outbox, count: 1).last)
        let approval = try #require(ApprovalKit.requestId(inLink: mail.body), "\(mail)")
        let totp = TOTP(secret: Base32.decode(Kit.demoSecret)!).code(at: Int(Date().timeIntervalSince1970))
        let run = try bed.runBrowser(g.baseURL + "/am/XUI/approval?id=" + approval, [
            .waitForURLContaining("/am/XUI/?goto="), .waitForElement("#cb1"), .fill("#cb0", "demo"), .fill("#cb1", Kit.password),
            .click("#submit"),
            .waitForPath("/am/XUI/approval"), .waitForElement("#approve"), .waitForText("Agent 7", in: "#code"), .snapshot("request"),
            .click("#approve"),
            .waitForElement("input.code"), .fill("input.code", totp), .click("#submit"),
            .waitForPath("/am/XUI/approval"), .waitForText("Approved."),
        ], timeout: 60)
        #expect(run.ok, "\(run)")
        let request = try #require(run.snapshots["request"], "\(run)")
        for text in ["Pay 100 EUR to Bob", "/amount: 100", "/currency: EUR", "/payee: Bob", "Agent 7"] {
            #expect(request.text.contains(text), "the approval page lacks '\(text)': \(request.text)")
        }
        #expect(run.scriptErrors.isEmpty, "\(run.scriptErrors)")
        Thread.sleep(forTimeInterval: 1.1)
        let tokens = try rar.post(g, "/access_token", [("grant_type", CIBARequest.grantType), ("auth_req_id", id)])
        let token = try #require(try tokens.json()["access_token"] as? String, "\(tokens)")
        let executed = try rar.transfer(g, token: token, #"{"amount":100,"currency":"EUR","payee":"Bob"}"#)
        #expect(executed.status == 201, "\(executed)")
        #expect(try rar.transfer(g, token: token, #"{"amount":100,"currency":"EUR","payee":"Bob"}"#).status == 401)
    }
}
