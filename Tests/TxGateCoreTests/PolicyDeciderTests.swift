import Testing
@testable import TxGateCore

/// The embedded decision without sockets or a store: each store answer is fed in by hand, at
/// an instant the test chooses.
@Suite struct PolicyDeciderTests {
    static let rule = TransactionRule(journey: "Confirm", ttlS: 180, bindFields: ["/amount", "/payee"], display: "Pay {amount} to {payee}?")
    static let policies = PolicySet([
        Policy(name: "health", resources: [ResourcePattern("/health")!], actions: ["GET"], subjects: .anyone),
        Policy(name: "accounts", resources: [ResourcePattern("/accounts/*")!], actions: ["GET"], subjects: .authenticated),
        Policy(name: "admin", resources: [ResourcePattern("/admin/**")!], actions: ["GET"], subjects: .only(["root", "group=admins"]),
               requirement: .stepUp(journey: "Strong")),
        Policy(name: "transfer", resources: [ResourcePattern("/transfer")!], actions: ["POST"], subjects: .authenticated,
               requirement: .transaction(rule)),
    ])
    let decider = PolicyDecider(policies: policies, loginJourney: "Login", maxPending: 2, newTxId: { "3f2b8c1e-0000-4000-8000-000000000001" })
    static let t0: Int64 = 1_800_000_000_000
    static let alice = Subject(uid: "alice", realm: "/", journeys: ["Login"], attributes: ["group": "users"], token: "tok")
    static let body = Array(#"{"amount":100,"payee":"Bob"}"#.utf8)

    func query(_ method: String, _ path: String, _ subject: Subject?, txid: String? = nil, body: [UInt8] = []) -> DecisionQuery {
        DecisionQuery(realm: "/", path: Substring(path), resource: "https://gw" + path, method: method, subject: subject,
                      txid: txid, body: { body }, contentType: "application/json")
    }

    func decision(_ plan: PolicyDecider.Plan) -> Decision? {
        if case .decided(let d) = plan { return d }
        return nil
    }

    @Test func openDenyAndLogin() throws {
        #expect(decision(decider.decide(query("GET", "/health", nil), nowMs: Self.t0))?.allows("GET") == true)
        let nothing = try #require(decision(decider.decide(query("GET", "/nothing", Self.alice), nowMs: Self.t0)))
        #expect(!nothing.allows("GET") && nothing.advices.isEmpty)
        let login = try #require(decision(decider.decide(query("GET", "/accounts/1", nil), nowMs: Self.t0)))
        #expect(login.advices[Advices.authenticateToService] == ["/:Login"])
        #expect(decision(decider.decide(query("GET", "/accounts/1", Self.alice), nowMs: Self.t0))?.allows("GET") == true)
    }

    @Test func subjectListsAndStepUp() throws {
        let denied = try #require(decision(decider.decide(query("GET", "/admin/x", Self.alice), nowMs: Self.t0)))
        #expect(!denied.allows("GET") && denied.advices.isEmpty)
        var admin = Self.alice
        admin.attributes["group"] = "admins"
        let stepUp = try #require(decision(decider.decide(query("GET", "/admin/x", admin), nowMs: Self.t0)))
        #expect(stepUp.advices[Advices.authenticateToService] == ["/:Strong"])
        admin.journeys.append("Strong")
        #expect(decision(decider.decide(query("GET", "/admin/x", admin), nowMs: Self.t0))?.allows("GET") == true)
    }

    @Test func newTransactionIsCountedThenCreatedThenChallenged() throws {
        let plan = decider.decide(query("POST", "/transfer", Self.alice, body: Self.body), nowMs: Self.t0)
        guard case .countPending(let intent) = plan else { Issue.record("expected countPending, got \(plan)"); return }
        #expect(intent.binding.bound["/payee"] == .string("Bob"))
        guard case .create(let record, let ttlMs) = decider.afterCount(intent, pending: 1, nowMs: Self.t0) else {
            Issue.record("expected create"); return
        }
        #expect(ttlMs == 180_000)
        #expect(record.expires == Int(Self.t0 / 1000) + 180)
        #expect(record.state == .created && record.subject == "alice" && record.journey == "Confirm")
        #expect(record.display == "Pay 100 to Bob?")
        let challenge = try #require(decision(decider.created(record)))
        #expect(challenge.advices[Advices.transaction] == [record.txid])
    }

    @Test func pendingLimit() {
        guard case .countPending(let intent) = decider.decide(query("POST", "/transfer", Self.alice, body: Self.body), nowMs: Self.t0) else {
            Issue.record("expected countPending"); return
        }
        #expect(decider.afterCount(intent, pending: 3, nowMs: Self.t0) == .failed(.tooManyTransactions(2)))
    }

    @Test func retryConsumesOnceAndIsNeverCached() throws {
        let txid = "3f2b8c1e-0000-4000-8000-000000000001"
        let plan = decider.decide(query("POST", "/transfer", Self.alice, txid: txid, body: Self.body), nowMs: Self.t0)
        guard case .consume(let named, let intent) = plan else { Issue.record("expected consume, got \(plan)"); return }
        #expect(named == txid)
        let allow = try #require(decision(decider.afterConsume(intent, .taken([]), nowMs: Self.t0)))
        #expect(allow.allows("POST"))
        #expect(allow.ttl == Self.t0 - 1)
        #expect(decider.refusal(intent, .taken([]), nowMs: Self.t0) == nil)
        // Not taken: a new transaction instead.
        #expect(decider.afterConsume(intent, .absent, nowMs: Self.t0) == .countPending(intent))
        #expect(decider.refusal(intent, .absent, nowMs: Self.t0) == "unknown, expired or consumed")
    }

    @Test func malformedTxIdIsIgnored() {
        let plan = decider.decide(query("POST", "/transfer", Self.alice, txid: "../../x", body: Self.body), nowMs: Self.t0)
        guard case .countPending = plan else { Issue.record("expected countPending, got \(plan)"); return }
    }

    /// Why a kept record was refused, from the record and the clock.
    @Test func refusalReasons() throws {
        guard case .countPending(let intent) = decider.decide(query("POST", "/transfer", Self.alice, body: Self.body), nowMs: Self.t0),
              case .create(let created, _) = decider.afterCount(intent, pending: 1, nowMs: Self.t0) else {
            Issue.record("expected a record"); return
        }
        var record = created
        #expect(decider.refusal(intent, .kept(record.encoded), nowMs: Self.t0) == "not completed")
        record.state = .completed
        #expect(decider.refusal(intent, .kept(record.encoded), nowMs: Self.t0 + 181_000) == "expired")
        var bob = Self.alice
        bob.uid = "bob"
        guard case .countPending(let bobs) = decider.decide(query("POST", "/transfer", bob, body: Self.body), nowMs: Self.t0) else {
            Issue.record("expected countPending"); return
        }
        #expect(decider.refusal(bobs, .kept(record.encoded), nowMs: Self.t0) == "another subject")
        let other = Array(#"{"amount":9999,"payee":"Bob"}"#.utf8)
        guard case .countPending(let changed) = decider.decide(query("POST", "/transfer", Self.alice, body: other), nowMs: Self.t0) else {
            Issue.record("expected countPending"); return
        }
        #expect(decider.refusal(changed, .kept(record.encoded), nowMs: Self.t0) == "the bound body fields differ")
        // The store kept it although nothing differs (a record written by another version): still refused.
        #expect(decider.refusal(intent, .kept(record.encoded), nowMs: Self.t0) == "does not match this request")
    }

    @Test func unbindableBodyIsABadRequest() {
        let plan = decider.decide(query("POST", "/transfer", Self.alice, body: Array(#"{"amount":1,"amount":2}"#.utf8)), nowMs: Self.t0)
        guard case .failed(.badRequest) = plan else { Issue.record("expected badRequest, got \(plan)"); return }
    }

    @Test func approvalChecks() {
        let record = TransactionRecord(txid: "t", realm: "/", resource: "r", method: "POST", subject: "alice", journey: "Confirm",
                                       bodyDigest: nil, bound: [:], display: nil, expires: 1000)
        #expect(record.approvalRefusal(by: "alice", realm: "/", now: 999) == nil)
        #expect(record.approvalRefusal(by: "alice", realm: "/", now: 1000) == .gone)
        #expect(record.approvalRefusal(by: "bob", realm: "/", now: 999) == .anotherSubject)
        #expect(record.approvalRefusal(by: "alice", realm: "/other", now: 999) == .anotherSubject)
        #expect(record.approved(by: "bob") == nil)
        let done = record.approved(by: "alice")
        #expect(done?.state == .completed)
        #expect(done?.approved(by: "alice") == nil)
        #expect(done?.approvalRefusal(by: "alice", realm: "/", now: 0) == .gone)
    }
}

/// `stepUp.maxAgeS`: the journey must have been completed recently enough (a session's last
/// journey, a token's `auth_time`); and a consumed transaction comes back with the allow.
@Suite struct StepUpMaxAgeTests {
    static let policies = PolicySet([
        Policy(name: "fresh", resources: [ResourcePattern("/fresh")!], actions: ["GET"], subjects: .authenticated,
               requirement: .stepUp(journey: "Strong", maxAgeS: 60)),
    ])
    let decider = PolicyDecider(policies: policies, loginJourney: "Login", maxPending: 2)
    static let now: Int64 = 1_800_000_000_000

    func allows(_ authTime: Int?, journeys: [String] = ["Login", "Strong"]) -> Bool {
        let s = Subject(uid: "alice", realm: "/", journeys: journeys, attributes: [:], token: "t", authTime: authTime)
        let q = DecisionQuery(realm: "/", path: "/fresh", resource: "https://gw/fresh", method: "GET", subject: s)
        guard case .decided(let d) = decider.decide(q, nowMs: Self.now) else { return false }
        return d.allows("GET")
    }

    @Test func aStaleOrMissingAuthenticationTimeIsAStepUp() {
        let now = Int(Self.now / 1000)
        #expect(allows(now - 60))
        #expect(!allows(now - 61))
        #expect(!allows(nil), "without an authentication time, maxAgeS cannot be met")
        #expect(!allows(now, journeys: ["Login"]))
    }

    @Test func theConsumedRecordComesBackWithTheOneShotAllow() throws {
        let rule = TransactionRule(journey: "Confirm", bindFields: ["/amount"])
        let binding = TransactionBinding(realm: "/", resource: "https://gw/t", method: "POST", subject: "alice", rule: rule,
                                         body: Array(#"{"amount":5}"#.utf8), contentType: "application/json")
        let record = TransactionRecord(txid: "3f2b8c1e-0000-4000-8000-000000000001", state: .completed, realm: "/", resource: "https://gw/t",
                                       method: "POST", subject: "alice", journey: "Confirm", bodyDigest: binding.bodyDigest,
                                       bound: binding.bound, display: nil, expires: 2_000_000_000)
        let plan = decider.afterConsume(PolicyDecider.Intent(rule: rule, binding: binding), .taken(record.encoded), nowMs: Self.now)
        guard case .decided(let d) = plan else { Issue.record("\(plan)"); return }
        #expect(d.allows("POST") && d.consumed == record && d.consumed?.bound["/amount"] == 5)
    }
}
