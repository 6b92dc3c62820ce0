import Foundation
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

    /// A worker's copy: objects of its own, the same policies in the same order.
    @Test func aWorkersCopyOfThePoliciesMatchesAsTheOriginals() {
        let copy = Self.policies.copiedForWorker()
        #expect(copy.policies.count == Self.policies.policies.count)
        for (c, p) in zip(copy.policies, Self.policies.policies) {
            #expect(c !== p)
            #expect(c.name == p.name && c.actions == p.actions && c.transactionJourney == p.transactionJourney)
        }
        for (path, method) in [("/health", "GET"), ("/accounts/7", "GET"), ("/admin/x/y", "GET"), ("/transfer", "POST"), ("/transfer", "GET")] {
            #expect(copy.applicableIndex(path: Substring(path), method: method)
                    == Self.policies.applicableIndex(path: Substring(path), method: method))
        }
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

    /// The intent of a request that needs its own transaction (the plan is to open one at once).
    func intent(_ subject: Subject = PolicyDeciderTests.alice, body: [UInt8] = PolicyDeciderTests.body) throws -> PolicyDecider.Intent {
        let plan = decider.decide(query("POST", "/transfer", subject, body: body), nowMs: Self.t0)
        guard case .open(_, let intent, _, nil, let attempts) = plan else { throw PlanError("expected open, got \(plan)") }
        #expect(attempts == PolicyDecider.claimAttempts)
        return intent
    }

    struct PlanError: Error, CustomStringConvertible { var description: String; init(_ d: String) { description = d } }

    /// The record a new transaction for `intent` would write.
    func newRecord(_ intent: PolicyDecider.Intent, at nowMs: Int64 = PolicyDeciderTests.t0) throws -> TransactionRecord {
        guard case .open(let record, _, _, _, _) = decider.afterFindPending(intent, indexed: nil, attempts: 3, nowMs: nowMs) else {
            throw PlanError("expected open")
        }
        return record
    }

    @Test func newTransactionIsWrittenIndexedAndCountedThenChallenged() throws {
        let intent = try intent()
        #expect(intent.binding.bound["/payee"] == .string("Bob"))
        let plan = decider.afterFindPending(intent, indexed: nil, attempts: 3, nowMs: Self.t0)
        guard case .open(let record, intent, let ttlMs, nil, 3) = plan else { Issue.record("expected open, got \(plan)"); return }
        #expect(ttlMs == 180_000)
        #expect(record.expires == Int(Self.t0 / 1000) + 180)
        #expect(record.state == .created && record.subject == "alice" && record.journey == "Confirm")
        #expect(record.display == "Pay 100 to Bob?")
        // The record, its index entry and the count are one step: the count is its answer.
        let challenge = try #require(decision(decider.afterOpen(record, intent, replacing: nil, opened: .success(.written(count: 1)),
                                                                attempts: 3, nowMs: Self.t0)))
        #expect(challenge.advices[Advices.transaction] == [record.txid])
    }

    @Test func pendingLimitWithdrawsTheRecordItsIndexEntryAndItsCount() throws {
        let intent = try intent()
        let record = try newRecord(intent)
        func opened(pending: Int) -> PolicyDecider.Plan {
            decider.afterOpen(record, intent, replacing: nil, opened: .success(.written(count: pending)), attempts: 3, nowMs: Self.t0)
        }
        #expect(opened(pending: 2) == decider.created(record))
        #expect(opened(pending: 3)
                == .withdraw(txid: record.txid, unindex: intent.pendingKey,
                             then: .uncountPending(subject: "alice", then: .failed(.tooManyTransactions(2)))))
    }

    /// The step that writes the record and its index entry failed: nothing was written or
    /// counted (all or nothing), so nothing is undone, and the challenge fails closed.
    @Test func aFailedOpeningFailsClosedWithNothingToUndo() throws {
        let intent = try intent()
        let record = try newRecord(intent)
        let down = StoreError.unavailable("redis down")
        #expect(decider.afterOpen(record, intent, replacing: nil, opened: .failure(down), attempts: 3, nowMs: Self.t0)
                == .failed(.unavailable(down.description)))
    }

    // MARK: The same request challenged again (issue 23 item 9)

    /// A reload or an SDK's retry of a request whose transaction still waits: the same TxId,
    /// nothing written, nothing counted.
    @Test func theSameRequestStillPendingGetsTheSameTxId() throws {
        let intent = try intent()
        let record = try newRecord(intent)
        #expect(decider.afterFindPending(intent, indexed: Array(record.txid.utf8), attempts: 3, nowMs: Self.t0)
                == .checkPending(txid: record.txid, intent, attempts: 3))
        let again = try #require(decision(decider.afterCheckPending(intent, txid: record.txid, record: record.encoded, attempts: 3,
                                                                     nowMs: Self.t0 + 60_000)))
        #expect(again.advices[Advices.transaction] == [record.txid])
        // The same bound values in another key order: the same request.
        let reordered = try self.intent(body: Array(#"{ "payee": "Bob", "amount": 100 }"#.utf8))
        #expect(reordered.pendingKey == intent.pendingKey)
        #expect(decider.reusable(record, for: reordered, nowMs: Self.t0))
    }

    /// What is never handed out again: an approved transaction (its own retry consumes it), a
    /// consumed or expired one, one with less than half its lifetime left, another user's,
    /// another request's, another journey's.
    @Test func whatIsNeverHandedOutAgain() throws {
        let intent = try intent()
        let record = try newRecord(intent)
        func replaced(_ bytes: [UInt8]?, for i: PolicyDecider.Intent = intent, at nowMs: Int64 = Self.t0) -> Bool {
            guard case .open(let fresh, i, _, record.txid, 3) = decider.afterCheckPending(i, txid: record.txid, record: bytes,
                                                                                         attempts: 3, nowMs: nowMs) else { return false }
            return fresh.state == .created && fresh.seal == i.binding.seal
        }
        var approved = record
        approved.state = .completed
        #expect(replaced(approved.encoded), "an approved transaction")
        #expect(replaced(nil), "consumed or expired")
        #expect(!replaced(record.encoded, at: Self.t0 + 90_000))
        #expect(replaced(record.encoded, at: Self.t0 + 91_000), "less than half of its 180 s left")
        #expect(replaced(record.encoded, at: Self.t0 + 180_000))
        var bob = Self.alice
        bob.uid = "bob"
        let bobs = try self.intent(bob)
        #expect(bobs.pendingKey != intent.pendingKey, "one index entry per user")
        #expect(replaced(record.encoded, for: bobs), "alice's transaction offered to bob")
        let other = try self.intent(body: Array(#"{"amount":9999,"payee":"Bob"}"#.utf8))
        #expect(other.pendingKey != intent.pendingKey)
        #expect(replaced(record.encoded, for: other), "another amount")
        var journey = intent
        journey.rule.journey = "Other"
        #expect(replaced(record.encoded, for: journey), "the policy now asks for another journey")
        var mislabeled = record
        mislabeled.txid = "3f2b8c1e-0000-4000-8000-000000000002"
        #expect(replaced(mislabeled.encoded), "a record under another TxId than the index names")
        // An entry that is no TxId is replaced too, never looked up as a key.
        guard case .open(_, _, _, "../x", 3) = decider.afterFindPending(intent, indexed: Array("../x".utf8), attempts: 3, nowMs: Self.t0) else {
            Issue.record("expected create replacing the entry"); return
        }
    }

    /// The index names a transaction already (the same request challenged again, a stale entry,
    /// or a concurrent challenge of the same request that won the race): nothing was written,
    /// and the one it names is checked; the race is not run forever.
    @Test func anOpeningRefusedByTheIndexChecksWhatItNames() throws {
        let intent = try intent()
        let record = try newRecord(intent)
        let winner = "3f2b8c1e-0000-4000-8000-000000000009"
        func refused(_ found: String?, attempts: Int) -> PolicyDecider.Plan {
            decider.afterOpen(record, intent, replacing: nil, opened: .success(.refused(key: intent.pendingKey, found: found.map { Array($0.utf8) })),
                              attempts: attempts, nowMs: Self.t0)
        }
        #expect(refused(winner, attempts: 4) == .checkPending(txid: winner, intent, attempts: 3))
        #expect(refused(winner, attempts: 1) == .checkPending(txid: winner, intent, attempts: 0))
        // The entry went away meanwhile (a swap that found nothing): a new transaction, as for none.
        guard case .open(_, intent, _, nil, 2) = refused(nil, attempts: 3) else { Issue.record("expected a new open"); return }
        // The record's own key was taken (a TxId generator that repeats itself, as this test's
        // does): a new record, the same claim, one attempt fewer, so that it ends.
        let taken = decider.afterOpen(record, intent, replacing: winner,
                                      opened: .success(.refused(key: TransactionRecord.key(record.txid), found: [1])), attempts: 3, nowMs: Self.t0)
        guard case .open(_, intent, _, winner, 2) = taken else { Issue.record("expected another open, got \(taken)"); return }
        #expect(decider.afterOpen(record, intent, replacing: winner, opened: .success(.refused(key: TransactionRecord.key(record.txid), found: [1])),
                                  attempts: 1, nowMs: Self.t0) == .failed(.unavailable("the pending index of this request kept changing under concurrent challenges; try again")))
        // With no attempt left, still the winner's if it is reusable…
        #expect(decision(decider.afterCheckPending(intent, txid: record.txid, record: record.encoded, attempts: 0, nowMs: Self.t0)) != nil)
        // …otherwise a clear failure, never an endless loop.
        guard case .failed(.unavailable(let why)) = decider.afterFindPending(intent, indexed: nil, attempts: 0, nowMs: Self.t0) else {
            Issue.record("expected unavailable"); return
        }
        #expect(why.contains("pending index"))
    }

    @Test func retryConsumesOnceAndIsNeverCached() throws {
        let txid = "3f2b8c1e-0000-4000-8000-000000000001"
        let plan = decider.decide(query("POST", "/transfer", Self.alice, txid: txid, body: Self.body), nowMs: Self.t0)
        guard case .consume(let named, let intent) = plan else { Issue.record("expected consume, got \(plan)"); return }
        #expect(named == txid)
        let allow = try #require(decision(decider.afterConsume(intent, txid: txid, .taken([]), nowMs: Self.t0)))
        #expect(allow.allows("POST"))
        #expect(allow.ttl == Self.t0 - 1)
        // The TxId it spent is known without reading the record (here not even a record).
        #expect(allow.consumedTxid == txid)
        #expect(allow.consumed == nil)
        #expect(decider.refusal(intent, .taken([]), nowMs: Self.t0) == nil)
        // Not taken: the request's pending transaction, or a new one.
        guard case .open(_, intent, _, nil, PolicyDecider.claimAttempts) = decider.afterConsume(intent, txid: txid, .absent, nowMs: Self.t0) else {
            Issue.record("expected a new transaction opened"); return
        }
        #expect(decider.refusal(intent, .absent, nowMs: Self.t0)?.message == "unknown, expired or consumed")
    }

    @Test func malformedTxIdIsIgnored() {
        let plan = decider.decide(query("POST", "/transfer", Self.alice, txid: "../../x", body: Self.body), nowMs: Self.t0)
        guard case .open = plan else { Issue.record("expected open, got \(plan)"); return }
    }

    /// Why a kept record was refused, from the record and the clock.
    @Test func refusalReasons() throws {
        let intent = try intent()
        var record = try newRecord(intent)
        #expect(decider.refusal(intent, .kept(record.encoded), nowMs: Self.t0)?.message == "not completed")
        record.state = .completed
        #expect(decider.refusal(intent, .kept(record.encoded), nowMs: Self.t0 + 181_000)?.message == "expired")
        var bob = Self.alice
        bob.uid = "bob"
        #expect(decider.refusal(try self.intent(bob), .kept(record.encoded), nowMs: Self.t0)?.message == "another subject")
        let changed = try self.intent(body: Array(#"{"amount":9999,"payee":"Bob"}"#.utf8))
        #expect(decider.refusal(changed, .kept(record.encoded), nowMs: Self.t0)?.message == "the bound body fields differ")
        // The store kept it although nothing differs (a record written by another version): still refused.
        #expect(decider.refusal(intent, .kept(record.encoded), nowMs: Self.t0)?.message == "does not match this request")
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
        let plan = decider.afterConsume(PolicyDecider.Intent(rule: rule, binding: binding), txid: record.txid, .taken(record.encoded), nowMs: Self.now)
        guard case .decided(let d) = plan else { Issue.record("\(plan)"); return }
        #expect(d.allows("POST") && d.consumed == record && d.consumed?.bound["/amount"] == 5)
        #expect(d.consumedTxid == record.txid)
        // Compared by record, whether decoded already or kept as the store returned it.
        #expect(d == Decision(resource: "https://gw/t", actions: ["POST": true], ttl: Self.now - 1, consumed: record))
    }

    /// A TxId is a UUID's text form (8-4-4-4-12 hex digits, either case) and nothing else:
    /// valid ids of either case, every one-byte change of one, other lengths and shapes. Each
    /// one it takes, `UUID(uuidString:)` takes too; the reverse does not hold, since its parser
    /// (`sscanf`'s `%x`) lets a space or a minus sign stand for a digit.
    @Test func aTxIdIsAUUIDsTextFormAndNothingElse() {
        var inputs = ["3f2b8c1e-0000-4000-8000-000000000001", "3F2B8C1E-ABCD-4EF0-8000-00000000000A", "", "-", "g",
                      "3f2b8c1e00004000800000000000000001", "3f2b8c1e-0000-4000-8000-0000000000012", "3f2b8c1e-0000-4000-8000-00000000000",
                      "{3f2b8c1e-0000-4000-8000-000000000001}", " 3f2b8c1e-0000-4000-8000-00000000001", "3f2b8c1e-0000-4000-8000-00000000000é",
                      "-f2b8c1e-0000-4000-8000-000000000001", "3f2b8c1e-+000-4000-8000-000000000001"]
        let base = Array(UUID().uuidString.utf8)
        for i in base.indices {
            for b: UInt8 in [0x2D, 0x2B, 0x30, 0x39, 0x3A, 0x40, 0x41, 0x46, 0x47, 0x60, 0x61, 0x66, 0x67, 0x20, 0x00, 0xFF, 0x2F] {
                var v = base
                v[i] = b
                inputs.append(String(decoding: v, as: UTF8.self))
            }
        }
        let form = "^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$"
        for s in inputs {
            let isTxId = PolicyDecider.isTxId(s)
            #expect(isTxId == (s.range(of: form, options: .regularExpression) != nil), "\(s)")
            if isTxId { #expect(UUID(uuidString: s) != nil, "\(s)") }
        }
    }
}
