import Foundation
import Testing
@testable import TxGateCore

@Suite struct PolicyTests {
    @Test func resourcePatterns() throws {
        let exact = try #require(ResourcePattern("/accounts"))
        #expect(exact.matches("/accounts"))
        #expect(!exact.matches("/accounts/1"))
        let one = try #require(ResourcePattern("/accounts/*"))
        #expect(one.matches("/accounts/1"))
        #expect(!one.matches("/accounts/1/tx"))
        #expect(!one.matches("/accounts"))
        let deep = try #require(ResourcePattern("/api/**"))
        #expect(deep.matches("/api/a/b/c"))
        #expect(deep.matches("/api/a"))
        #expect(!deep.matches("/apix/a"))
        #expect(ResourcePattern("accounts") == nil)
        #expect(ResourcePattern("/a/**/b") == nil)
        #expect(ResourcePattern("/a?x=1") == nil)
    }

    @Test func policiesDecodeStrictly() throws {
        let json = #"""
        {"upstream": {"url": "http://a"}, "journeys": {"Login": [{"type": "UsernamePassword"}], "ConfirmTransaction": [{"type": "TOTP"}]},
         "policies": [
          {"name": "health", "resources": ["/health"], "actions": ["get"], "subjects": "anyone"},
          {"name": "transfer", "resources": ["/transfer"], "actions": ["POST"], "subjects": "authenticated",
           "transaction": {"journey": "ConfirmTransaction", "ttlS": 60, "bind": {"body": ["/amount", "/payee"]}, "display": "Pay {amount} to {payee}?"}},
          {"name": "admin", "resources": ["/admin/**"], "actions": ["GET"], "subjects": ["root", "group=admins"], "stepUp": {"journey": "Login"}}
         ]}
        """#
        let c = try ConfigLoader.decode(Data(json.utf8), folder: "/tmp")
        let p = try #require(c.policies)
        #expect(p.count == 3)
        #expect(p[0].actions == ["GET"] && p[0].subjects == .anyone)
        #expect(p[1].requirement == .transaction(TransactionRule(journey: "ConfirmTransaction", ttlS: 60, bindFields: ["/amount", "/payee"], display: "Pay {amount} to {payee}?")))
        #expect(p[2].subjects == .only(["root", "group=admins"]))
        #expect(p[2].requirement == .stepUp(journey: "Login"))

        let bad = #"{"upstream": {"url": "http://a"}, "journeys": {"Login": [{"type": "UsernamePassword"}]}, "policies": [{"name": "x", "resources": ["/x"], "actions": ["POST"], "transaction": {"journey": "Nope", "bind": {"body": ["amount"]}, "ttl": 5}}]}"#
        do {
            _ = try ConfigLoader.decode(Data(bad.utf8), folder: "/tmp")
            Issue.record("expected errors")
        } catch {
            let e = error.errors.map(\.description)
            #expect(e.contains("policies[0].transaction.ttl: unknown key"))
            #expect(e.contains("policies[0].transaction.bind.body: 'amount' is not a JSON Pointer (like /amount)"))
            #expect(e.contains("policies[0]: journey 'Nope' is not in journeys"))
        }
    }

    /// A decision with a few methods compares them; one with many looks the method up: the same
    /// answers either way, a method set to false or absent being no allow.
    @Test func aDecisionAllowsExactlyTheMethodsItSetsTrue() {
        let few = Decision(resource: "r", actions: ["GET": true, "POST": false])
        let many = Decision(resource: "r", actions: ["GET": true, "POST": false, "PUT": true, "DELETE": false, "PATCH": true, "HEAD": true])
        for d in [few, many] {
            #expect(d.allows("GET"))
            #expect(!d.allows("POST"))
            #expect(!d.allows("OPTIONS"))
            #expect(!d.allows("get"))
        }
        #expect(many.allows("PUT") && many.allows("PATCH") && !many.allows("DELETE"))
        #expect(!Decision(resource: "r").allows("GET"))
    }

    @Test func decisionJSONIsAMsShape() {
        let d = Decision(resource: "https://gw/transfer", advices: Advices([(Advices.transaction, ["t"])]))
        #expect(d.json == #"{"resource":"https://gw/transfer","actions":{},"attributes":{},"advices":{"TransactionConditionAdvice":["t"]}}"#)
        let allow = Decision(resource: "r", actions: ["GET": true], ttl: 5)
        #expect(allow.json == #"{"resource":"r","actions":{"GET":true},"attributes":{},"advices":{},"ttl":5}"#)
    }

    @Test func decisionCacheFollowsAMsRules() {
        let cache = DecisionCache<String>(maxEntries: 2, defaultTtlMs: 1000)
        let allow = Decision(resource: "r", actions: ["GET": true])
        cache.put("a", allow, nowMs: 0)
        #expect(cache.get("a", nowMs: 500) == allow)
        #expect(cache.get("a", nowMs: 1000) == nil)  // default time passed
        cache.put("adv", Decision(resource: "r", advices: Advices([("X", ["1"])])), nowMs: 0)
        #expect(cache.get("adv", nowMs: 1) == nil)  // advices are never cached
        cache.put("past", Decision(resource: "r", actions: ["GET": true], ttl: 10), nowMs: 20)
        #expect(cache.get("past", nowMs: 21) == nil)  // ttl already passed
        cache.put("abs", Decision(resource: "r", actions: ["GET": true], ttl: 5000), nowMs: 0)
        #expect(cache.get("abs", nowMs: 4000) != nil)  // ttl is absolute, beyond the default
        cache.put("b", allow, nowMs: 0)
        cache.put("c", allow, nowMs: 0)
        #expect(cache.count <= 2)
    }

    /// An entry that expired and was dropped on a read leaves its ring slot behind: the next
    /// key put there must forget the key the slot held before, or the cache grows past its bound.
    @Test func decisionCacheStaysWithinItsBoundAfterExpiries() {
        let cache = DecisionCache<String>(maxEntries: 2, defaultTtlMs: 1000)
        let allow = Decision(resource: "r", actions: ["GET": true])
        let short = Decision(resource: "r", actions: ["GET": true], ttl: 100)
        cache.put("a", allow, nowMs: 0)
        cache.put("b", short, nowMs: 0)
        #expect(cache.get("b", nowMs: 200) == nil)  // expired: dropped
        for (i, key) in ["c", "d", "e", "f"].enumerated() {
            cache.put(key, allow, nowMs: 200)
            #expect(cache.count <= 2, "after putting \(key) (\(i + 3) keys put): \(cache.count) entries")
        }
        #expect(cache.get("f", nowMs: 300) == allow)
    }

    @Test func bindingDigestsChangeWithBoundFieldsOnly() {
        let rule = TransactionRule(journey: "J", bindFields: ["/amount", "/payee"])
        func b(_ body: String) -> TransactionBinding {
            TransactionBinding(realm: "/", resource: "r", method: "POST", subject: "demo", rule: rule, body: Array(body.utf8),
                               contentType: "application/json")
        }
        let base = b(#"{"amount": 10, "payee": "Bob", "memo": "x"}"#)
        #expect(base.bodyOutcome == .bindable)
        #expect(base.bodyDigest == b(#"{"payee":"Bob","memo":"y","amount":10}"#).bodyDigest)
        #expect(base.bodyDigest != b(#"{"amount": 11, "payee": "Bob"}"#).bodyDigest)
        #expect(b(#"{"amount": 10}"#).bodyOutcome == .missingField("/payee", readAs: "application/json"))
        #expect(TransactionBinding.display("Pay {amount} to {payee}?", bound: base.bound) == "Pay 10 to Bob?")
    }

    @Test func transactionMismatchReasons() {
        let rule = TransactionRule(journey: "J", bindFields: ["/amount"])
        let bind = TransactionBinding(realm: "/", resource: "r", method: "POST", subject: "demo", rule: rule, body: Array(#"{"amount":1}"#.utf8),
                                      contentType: "application/json")
        var tx = TransactionRecord(txid: "t", state: .completed, realm: "/", resource: "r", method: "POST", subject: "demo",
                                   journey: "J", bodyDigest: bind.bodyDigest, bound: bind.bound, display: nil, expires: 100)
        #expect(tx.mismatch(bind, now: 50) == nil)
        #expect(tx.mismatch(bind, now: 100)?.message == "expired")
        var other = bind
        other.subject = "eve"
        #expect(tx.mismatch(other, now: 50)?.message == "another subject")
        other = bind
        other.method = "PUT"
        #expect(tx.mismatch(other, now: 50)?.message == "another resource or method")
        other = TransactionBinding(realm: "/", resource: "r", method: "POST", subject: "demo", rule: rule, body: Array(#"{"amount":2}"#.utf8),
                                   contentType: "application/json")
        #expect(tx.mismatch(other, now: 50)?.message == "the bound body fields differ")
        tx.state = .created
        #expect(tx.mismatch(bind, now: 50)?.message == "not completed")
    }

    @Test func transactionRecordsEncodeCanonicallyAndDecodeBothForms() throws {
        let rule = TransactionRule(journey: "J", bindFields: ["/amount", "/memo"])
        let b = TransactionBinding(realm: "/", resource: "http://gw/transfer?a=1", method: "POST", subject: "dé\"mo", rule: rule,
                                   body: Array(#"{"amount":12.5,"memo":{"x":[1,null,"€\n"]}}"#.utf8), contentType: "application/json")
        var tx = TransactionRecord(txid: "t", realm: b.realm, resource: b.resource, method: b.method, subject: b.subject,
                                   journey: "J", bodyDigest: b.bodyDigest, bound: b.bound, display: "Pay {amount}?", expires: 1_800_000_000)
        tx.state = .completed
        #expect(tx.encoded == tx.encoded, "one encoding per record")
        #expect(TransactionRecord.decode(tx.encoded) == tx)
        // Records written by JSONEncoder (before the canonical form) still decode.
        #expect(TransactionRecord.decode(Array(try JSONEncoder().encode(tx))) == tx)
        var bare = tx
        bare.bodyDigest = nil
        bare.display = nil
        #expect(TransactionRecord.decode(bare.encoded) == bare)
        #expect(TransactionRecord.decode(Array(#"{"txid":"t"}"#.utf8)) == nil)
        #expect(ConditionalTake.matches(tx.encoded, TransactionRecord.consumable(by: b)))
    }

    /// What the store checks in the consuming step: COMPLETED and sealed to the same request.
    @Test func onlyTheSameRequestCanConsumeACompletedRecord() {
        let rule = TransactionRule(journey: "J", bindFields: ["/amount"])
        func bind(subject: String = "demo", realm: String = "/", resource: String = "http://gw/transfer",
                  method: String = "POST", body: String = #"{"amount":1}"#) -> TransactionBinding {
            TransactionBinding(realm: realm, resource: resource, method: method, subject: subject, rule: rule, body: Array(body.utf8),
                               contentType: "application/json")
        }
        let b = bind()
        var tx = TransactionRecord(txid: "t", realm: b.realm, resource: b.resource, method: b.method, subject: b.subject,
                                   journey: "J", bodyDigest: b.bodyDigest, bound: b.bound, display: "Pay 1 \u{2192} /x?", expires: 100)
        #expect(!ConditionalTake.matches(tx.encoded, TransactionRecord.consumable(by: b)), "not completed yet")
        tx.state = .completed
        #expect(ConditionalTake.matches(tx.encoded, TransactionRecord.consumable(by: b)))
        for other in [bind(subject: "eve"), bind(realm: "/other"), bind(resource: "http://gw/transfer2"), bind(method: "PUT"),
                      bind(body: #"{"amount":2}"#), bind(body: "{}")] {
            #expect(!ConditionalTake.matches(tx.encoded, TransactionRecord.consumable(by: other)))
        }
        // Fields cannot be shifted from one part into another: "a|b" + "c" is not "a" + "b|c".
        #expect(bind(subject: "a", realm: "b").seal != bind(subject: "ab", realm: "").seal)
        #expect(!ConditionalTake.matches(Array("[1]".utf8), ["state": "COMPLETED"]))
        #expect(!ConditionalTake.matches(Array("not json".utf8), ["state": "COMPLETED"]))
        #expect(ConditionalTake.matches(Array(#"{"state":"COMPLETED","n":1}"#.utf8), ["state": "COMPLETED"]))
    }
}

/// `ResourcePattern.matches` walks bytes; it must answer as the split-and-compare it replaced.
struct ResourcePatternEquivalenceTests {
    static func reference(_ p: ResourcePattern, _ path: Substring) -> Bool {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        if p.anyDepth {
            guard parts.count >= p.segments.count else { return false }
        } else {
            guard parts.count == p.segments.count else { return false }
        }
        for (a, s) in zip(parts, p.segments) where s != "*" && a != s { return false }
        return !parts.contains { $0 == "." || $0 == ".." }
    }

    @Test func matchesAnswersAsTheSplitAndCompare() throws {
        let patterns = ["/", "/**", "/accounts", "/accounts/*", "/accounts/*/tx", "/api/**", "/a/*/**", "/*", "/caf\u{e9}/*", "/x//y"]
        let paths = ["", "/", "//", "/accounts", "/accounts/", "/accounts/1", "/accounts/1/tx", "/accounts/1/tx/2", "/api", "/api/",
                     "/api/a/b", "/api/../x", "/api/./x", "/a/b", "/a/b/c", "/a/.", "/a/..", "/cafe\u{301}/1", "/caf\u{e9}/1",
                     "/x//y", "/x/y", "noslash", "no/slash", "/accounts/*", "/%2e%2e/a"]
        for text in patterns {
            let p = try #require(ResourcePattern(text))
            for path in paths {
                #expect(p.matches(path[...]) == Self.reference(p, path[...]), "\(text) on \(path)")
            }
        }
    }
}
