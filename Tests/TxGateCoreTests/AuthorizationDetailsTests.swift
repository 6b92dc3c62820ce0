import Foundation
import Testing
@testable import TxGateCore

/// RFC 9396 `authorization_details`: the schema subset, the checks of a request's entries, and
/// the transaction an approval asked for ahead becomes, which opens exactly the request with
/// the approved values.
@Suite struct AuthorizationDetailsTests {
    static let schemaJSON = #"""
        {"type": "object", "required": ["amount", "currency", "payee"], "additionalProperties": false,
         "properties": {"amount": {"type": "number", "minimum": 0.01, "maximum": 10000},
                        "currency": {"type": "string", "enum": ["EUR", "USD"]},
                        "payee": {"type": "string", "minLength": 1, "maxLength": 16},
                        "tags": {"type": "array", "maxItems": 2, "items": {"type": "string", "maxLength": 8}},
                        "creditor": {"type": "object", "properties": {"iban": {"type": "string"}}}}}
        """#

    static var schema: DetailsSchema {
        get throws { try DetailsSchema.parse(try #require(JSONValue.parse(Array(schemaJSON.utf8)))).get() }
    }

    static var types: [String: AuthorizationDetailsType] {
        get throws { ["payment_initiation": AuthorizationDetailsType(schema: try schema, journey: "Confirm", display: "Pay {amount} {currency} to {payee}")] }
    }

    static let mapping = DetailsMapping(type: "payment_initiation", fields: ["/amount": "/amount", "/currency": "/currency", "/payee": "/payee"])

    func json(_ s: String) throws -> JSONValue { try #require(JSONValue.parse(Array(s.utf8))) }

    @Test("the schema subset refuses keywords it does not check, and malformed ones")
    func schemaKeywords() throws {
        func problems(_ s: String) throws -> [String] {
            if case .failure(let p) = DetailsSchema.parse(try json(s)) { return p.messages }
            return []
        }
        #expect(try problems(#"{"type": "object", "pattern": "^a"}"#) == [
            "/pattern: 'pattern' is not a keyword this gateway checks (additionalProperties, const, description, enum, items, maxItems, "
                + "maxLength, maximum, minItems, minLength, minimum, properties, required, title, type)",
        ])
        #expect(try problems(#"{"properties": {"a": {"type": "decimal"}}}"#) == [
            "/properties/a/type: must be one of object, array, string, number, integer, boolean, null",
        ])
        #expect(try problems(#"{"additionalProperties": {"type": "string"}}"#) == ["/additionalProperties: only true or false"])
        #expect(try problems(#"{"maxLength": -1, "enum": []}"#) == ["/enum: must be a non-empty list", "/maxLength: must be a whole number, 0 or more"])
        #expect(try problems(#"[]"#) == ["/: a schema is an object"])
    }

    @Test("values are checked: required, type, enum, lengths, bounds, items, no extra field")
    func violations() throws {
        let s = try Self.schema
        func why(_ v: String) throws -> String? { s.violation(try json(v)) }
        #expect(try why(#"{"amount": 100, "currency": "EUR", "payee": "Bob"}"#) == nil)
        #expect(try why(#"{"amount": 100, "currency": "EUR"}"#) == "/payee is required")
        #expect(try why(#"{"amount": "100", "currency": "EUR", "payee": "Bob"}"#) == "/amount must be a number")
        #expect(try why(#"{"amount": 100, "currency": "GBP", "payee": "Bob"}"#) == #"/currency must be one of "EUR", "USD""#)
        #expect(try why(#"{"amount": 0, "currency": "EUR", "payee": "Bob"}"#) == "/amount must be at least 0.01")
        #expect(try why(#"{"amount": 10000.5, "currency": "EUR", "payee": "Bob"}"#) == "/amount must be at most 10000")
        #expect(try why(#"{"amount": 1, "currency": "EUR", "payee": ""}"#) == "/payee must be at least 1 characters")
        #expect(try why(#"{"amount": 1, "currency": "EUR", "payee": "Bob the Builder Ltd"}"#) == "/payee must be at most 16 characters")
        #expect(try why(#"{"amount": 1, "currency": "EUR", "payee": "B", "note": "x"}"#) == "/note is not a field of this type")
        #expect(try why(#"{"amount": 1, "currency": "EUR", "payee": "B", "tags": ["a", "b", "c"]}"#) == "/tags must have at most 2 items")
        #expect(try why(#"{"amount": 1, "currency": "EUR", "payee": "B", "tags": ["a", "toolongtag"]}"#) == "/tags/1 must be at most 8 characters")
        #expect(try why(#"{"amount": 1, "currency": "EUR", "payee": "B", "creditor": {"iban": 5}}"#) == "/creditor/iban must be a string")
        #expect(s.requires("/amount") && !s.requires("/creditor/iban") && !s.requires("/tags"))
        #expect(Set(s.declaredPointers) == ["/amount", "/currency", "/payee", "/tags", "/creditor", "/creditor/iban"])
    }

    @Test("a request's authorization_details: an array of known, valid, displayable entries")
    func parse() throws {
        let types = try Self.types
        func error(_ text: String) -> String? {
            if case .failure(let e) = AuthorizationDetails.parse(text, types: types) { return "\(e.code): \(e.description)" }
            return nil
        }
        let good = #"[{"type":"payment_initiation","amount":100,"currency":"EUR","payee":"Bob"}]"#
        #expect(error(good) == nil)
        #expect(error(#"{"type":"payment_initiation"}"#) == "invalid_authorization_details: authorization_details must be a JSON array of objects, without repeated keys")
        #expect(error("[]") == "invalid_authorization_details: authorization_details must hold 1 to 8 objects")
        #expect(error(#"[{"type":"x"}]"#) == "invalid_authorization_details: authorization_details[0]: unknown type 'x'")
        #expect(error(#"[{"amount":1}]"#) == "invalid_authorization_details: authorization_details[0] must be an object with a string type")
        #expect(error(#"[{"type":"payment_initiation","amount":100,"currency":"EUR"}]"#)
            == "invalid_authorization_details: authorization_details[0] (payment_initiation): /payee is required")
        // A bidi override would make the payee read otherwise on the approval page.
        #expect(error(#"[{"type":"payment_initiation","amount":100,"currency":"EUR","payee":"\u202Ebob"}]"#)
            == "invalid_authorization_details: authorization_details[0]: the value of '/payee' contains the invisible formatting character U+202E")
        #expect(error(#"[{"type":"payment_initiation","amount":1,"currency":"EUR","payee":"B","payee":"M"}]"#) != nil, "a repeated key")
        #expect(error(String(repeating: " ", count: 8193)) == "invalid_authorization_details: authorization_details is longer than 8192 bytes")
        let entries = try AuthorizationDetails.parse(good, types: types).get()
        #expect(AuthorizationDetails.display(entries, types: types) == "Pay 100 EUR to Bob")
        #expect(AuthorizationDetails.shown(entries) == ["/amount": 100, "/currency": "EUR", "/payee": "Bob"])
    }

    @Test("one entry at most opens a request; its mapped fields are what the request must carry")
    func binding() throws {
        let types = try Self.types
        let mappings = ["payment_initiation": Self.mapping]
        let one = try AuthorizationDetails.parse(#"[{"type":"payment_initiation","amount":100,"currency":"EUR","payee":"Bob"}]"#, types: types).get()
        let b = try #require(try AuthorizationDetails.binding(one, mappings: mappings).get())
        #expect(b.type == "payment_initiation" && b.bound == ["/amount": 100, "/currency": "EUR", "/payee": "Bob"])
        #expect(try AuthorizationDetails.binding(one, mappings: [:]).get() == nil, "no policy maps the type: it opens nothing")
        guard case .failure(let e) = AuthorizationDetails.binding(one + one, mappings: mappings) else {
            Issue.record("two payments in one approval")
            return
        }
        #expect(e.code == "invalid_authorization_details")
    }

    func rule() -> TransactionRule {
        var r = TransactionRule(journey: "Confirm", bindFields: ["/amount", "/currency", "/payee"])
        r.authorizationDetails = Self.mapping
        return r
    }

    func request(_ body: String, type: String = "application/json", subject: String = "alice") -> TransactionBinding {
        TransactionBinding(realm: "/", resource: "https://gw/transfer", method: "POST", subject: subject, rule: rule(),
                           body: Array(body.utf8), contentType: type)
    }

    func record(_ entries: String, subject: String = "alice") throws -> TransactionRecord {
        let e = try AuthorizationDetails.parse(entries, types: try Self.types).get()
        let b = try #require(try AuthorizationDetails.binding(e, mappings: ["payment_initiation": Self.mapping]).get())
        var r = TransactionRecord.fromDetails(txid: "8d3f1c2e-0000-4000-8000-000000000001", entries: e, type: b.type, bound: b.bound,
                                              realm: "/", subject: subject, journey: "Confirm", display: nil, expires: 2_000_000_000)
        r.state = .completed
        return r
    }

    @Test("an approval asked for ahead opens the request with the approved values only, for its subject")
    func sealed() throws {
        let tx = try record(#"[{"type":"payment_initiation","amount":100,"currency":"EUR","payee":"Bob"}]"#)
        let same = request(#"{"payee":"Bob","amount":100.0,"currency":"EUR","memo":"rent"}"#)
        #expect(tx.seal == same.detailsSeal(type: "payment_initiation"))
        #expect(ConditionalTake.matches(TransactionRecord.decode(tx.encoded)!.encoded,
                                        TransactionRecord.consumable(seal: same.detailsSeal(type: "payment_initiation"))))
        #expect(tx.mismatch(same, now: 0) == nil)
        let more = request(#"{"payee":"Bob","amount":1000,"currency":"EUR"}"#)
        #expect(tx.seal != more.detailsSeal(type: "payment_initiation") && tx.mismatch(more, now: 0) == .bodyDiffers)
        // A form binds strings: "100" is not the number approved.
        let form = request("amount=100&currency=EUR&payee=Bob", type: "application/x-www-form-urlencoded")
        #expect(tx.seal != form.detailsSeal(type: "payment_initiation"))
        #expect(tx.mismatch(request(#"{"payee":"Bob","amount":100,"currency":"EUR"}"#, subject: "mallory"), now: 0) == .anotherSubject)
        // Never the request's own seal: an approval ahead is not a challenge's.
        #expect(tx.seal != same.seal)
        #expect(TransactionRecord.decode(tx.encoded) == tx, "the record keeps its authorization_details")
    }

    @Test("the decider consumes with the details seal only for an access token's approval ahead")
    func decider() throws {
        let policy = Policy(name: "transfer", resources: [try #require(ResourcePattern("/transfer"))], actions: ["POST"], subjects: .authenticated,
                            requirement: .transaction(rule()))
        let decider = PolicyDecider(policies: PolicySet([policy]), loginJourney: "Login", maxPending: 5)
        let alice = Subject(uid: "alice", realm: "/", journeys: ["Login"], attributes: [:], token: "t")
        let body = Array(#"{"amount":100,"currency":"EUR","payee":"Bob"}"#.utf8)
        var q = DecisionQuery(realm: "/", path: "/transfer", resource: "https://gw/transfer", method: "POST", subject: alice,
                              txid: "8d3f1c2e-0000-4000-8000-000000000001", body: { body }, contentType: "application/json")
        let tx = try record(#"[{"type":"payment_initiation","amount":100,"currency":"EUR","payee":"Bob"}]"#)
        guard case .consume(_, let own) = decider.decide(q, nowMs: 0) else { Issue.record("no consume"); return }
        #expect(!ConditionalTake.matches(tx.encoded, TransactionRecord.consumable(seal: own.seal)), "a _txid retry is not an approval ahead")
        q.txidApprovedAhead = true
        guard case .consume(_, let ahead) = decider.decide(q, nowMs: 0) else { Issue.record("no consume"); return }
        #expect(ConditionalTake.matches(tx.encoded, TransactionRecord.consumable(seal: ahead.seal)))
        // Not taken: the challenge that follows is this request's own.
        guard case .open(_, let next, _, _, _) = decider.afterConsume(ahead, txid: "t", .absent, nowMs: 0) else { Issue.record("no challenge"); return }
        #expect(next.seal == next.binding.seal)
    }

    @Test("configuration: a mapped type is declared, its fields required by the schema, every bound field mapped")
    func configuration() throws {
        func errors(_ policy: String, types: String = "") -> [String] {
            let json = #"""
                {"upstream": {"url": "http://127.0.0.1:9"}, "journeys": {"Login": [{"type": "UsernamePassword"}], "Confirm": [{"type": "Confirm"}]},
                 "users": [],
                 "oauth2": {"authorizationDetailsTypes": {"payment_initiation": {"journey": "Confirm", "display": "Pay {amount}",
                    "schema": {"type": "object", "required": ["amount", "payee"], "properties": {"amount": {"type": "number"}, "payee": {"type": "string"}, "memo": {"type": "string"}}}}\#(types)}},
                 "policies": [{"name": "t", "resources": ["/t"], "actions": ["POST"], "subjects": "authenticated",
                               "transaction": {"journey": "Confirm", "bind": {"body": ["/amount", "/payee"]}, "authorizationDetails": \#(policy)}}]}
                """#
            do { _ = try ConfigLoader.decode(Data(json.utf8), folder: "/tmp") } catch { return error.errors.map(\.description) }
            return []
        }
        #expect(errors(#"{"type": "payment_initiation", "fields": {"/amount": "/amount", "/payee": "/payee"}}"#) == [])
        #expect(errors(#"{"type": "payment", "fields": {"/amount": "/amount", "/payee": "/payee"}}"#)
            == ["policies[0].transaction.authorizationDetails.type: 'payment' is not in oauth2.authorizationDetailsTypes"])
        #expect(errors(#"{"type": "payment_initiation", "fields": {"/amount": "/amount"}}"#)
            == ["policies[0].transaction.authorizationDetails: fields must map every field of bind.body (/amount, /payee), and only those"])
        #expect(errors(#"{"type": "payment_initiation", "fields": {"/amount": "/amount", "/payee": "/memo"}}"#)
            == ["policies[0].transaction.authorizationDetails.fields: '/memo' is not a field the schema of 'payment_initiation' requires (each step in `required`)"])
        #expect(errors(#"{"type": "payment_initiation", "fields": {"/amount": "/amount", "/payee": "/payee"}}"#,
                       types: #", "other": {"journey": "Nope", "display": "{x}", "schema": {"type": "object"}}"#)
            == ["oauth2.authorizationDetailsTypes.other.display: unknown placeholder '{x}': not a field the schema declares",
                "oauth2.authorizationDetailsTypes.other.journey: journey 'Nope' is not in journeys"])
    }

    @Test("the code's grant and the refresh record keep the approved details (a refresh's token says them, without txn)")
    func grantsKeepThem() throws {
        let details = try json(#"[{"type":"payment_initiation","amount":100,"currency":"EUR","payee":"Bob"}]"#)
        var g = AuthorizationGrant(clientId: "agent", redirectUri: "https://a/cb", codeChallenge: "c", uid: "demo", realm: "/", scope: ["openid"],
                                   nonce: nil, acr: "Login", authTime: 1, txn: "8d3f1c2e-0000-4000-8000-000000000001")
        g.authorizationDetails = details
        #expect(AuthorizationGrant.decode(g.encoded)?.authorizationDetails == details)
        var r = RefreshRecord(family: "f", clientId: "agent", uid: "demo", realm: "/", scope: ["openid"], acr: "Login", authTime: 1, expires: 9)
        r.authorizationDetails = details
        #expect(RefreshRecord.decode(r.encoded)?.authorizationDetails == details)
        let claims = TokenClaims.accessToken(issuer: "i", audience: "a", uid: "demo", clientId: "agent", scope: [], acr: "Login", authTime: 1,
                                             jti: "j", now: 1, ttlS: 60, txn: nil, authorizationDetails: details)
        #expect(claims["authorization_details"] == details && claims["txn"] == nil)
    }
}
