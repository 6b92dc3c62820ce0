import Foundation
import HTTPCore
import Testing
import TxGateCrypto
@testable import TxGateCore

/// Issue 27: the ApproveElsewhere node on the engine, with in-memory services (no sockets).
@Suite struct ApproveElsewhereTests {
    let services = FakeServices()
    let key = Crypto.randomBytes(32)

    init() {
        services.users["demo"] = UserRecord(username: "demo", passwordHash: PasswordHash.dummy, email: "demo@example.com")
    }

    static let node = NodeConfig(type: "ApproveElsewhere", settings: [
        "channels": ["email", "webhook"], "ttlS": 60, "pollMs": 4000, "approverJourney": "Approver",
        "message": "Code {code} for: {display}",
    ], path: "journeys.Remote[0]")

    func engine() -> JourneyEngine {
        let built = JourneyEngine.build(["Remote": [Self.node], "Approver": [NodeConfig(type: "TOTP")]])
        #expect(built.errors.isEmpty)
        return JourneyEngine(journeys: built.journeys, signingKey: key, authIdTtlS: 300)
    }

    var context: JourneyContext { JourneyContext(services: services, display: "Pay 10 EUR") }

    func start(_ e: JourneyEngine, txid: String? = nil) -> JourneyResult {
        var r: JourneyResult!
        e.start(JourneyState(realm: "/", journey: "Remote", username: "demo", txid: txid), context: context) { r = $0 }
        return r
    }

    /// Submits the step `result` shows, unchanged, as the SDKs do after waitTime.
    func poll(_ e: JourneyEngine, _ result: JourneyResult) throws -> JourneyResult {
        guard case .step(let authId, let callbacks) = result else { throw Stop("not a step: \(result)") }
        guard case .success(let state) = e.decode(authId: authId, now: services.now) else { throw Stop("authId does not decode") }
        var out: JourneyResult!
        e.proceed(state, submitted: callbacks.map { SubmittedCallback(type: $0.type, inputs: []) }, context: context) { out = $0 }
        return out
    }

    struct Stop: Error { let why: String; init(_ w: String) { why = w } }

    func pending() throws -> ApprovalRequest { try #require(services.approvals.values.first) }

    @Test func entering_creates_a_pending_request_sends_it_and_shows_a_polling_wait_with_the_code() throws {
        let r = start(engine())
        guard case .step(_, let callbacks) = r else { Issue.record("\(r)"); return }
        let request = try pending()
        #expect(request.state == .pending && request.subject == "demo" && request.approverJourney == "Approver")
        #expect(request.matter == .stepUp(journey: "Remote"))
        #expect(request.expiresMs == Int64(services.now) * 1000 + 60_000)
        #expect(services.notified.count == 1 && services.notified[0].1 == [.email, .webhook])
        // WIRE.md §12: waitTime a string of ms, the message, no input.
        #expect(callbacks.count == 1)
        #expect(callbacks[0].json(id: 0) == #"{"type":"PollingWaitCallback","output":[{"name":"waitTime","value":"4000"},{"name":"message","value":"Code \#(request.bindingCode) for: Pay 10 EUR"}],"_id":0}"#)
    }

    @Test func a_transactions_request_carries_its_display_and_bound_values() throws {
        services.transactions["tx1"] = TransactionRecord(txid: "tx1", realm: "/", resource: "http://x/pay", method: "POST", subject: "demo",
                                                         journey: "Remote", bodyDigest: nil, bound: ["amount": 10, "to": "bob"],
                                                         display: "Pay bob", expires: services.now + 60)
        _ = start(engine(), txid: "tx1")
        let request = try pending()
        #expect(request.matter == .transaction(txid: "tx1", display: "Pay bob", bound: ["amount": 10, "to": "bob"]))
        #expect(request.displayText == "Pay bob\namount: 10\nto: bob")
    }

    @Test func polls_show_the_same_step_until_approved_then_the_journey_goes_on() throws {
        let e = engine()
        var r = start(e)
        let id = try pending().id
        services.now += 4
        r = try poll(e, r)
        guard case .step(_, let again) = r else { Issue.record("pending must show the step again: \(r)"); return }
        #expect(again.map(\.type) == ["PollingWaitCallback"])
        #expect(services.approvalReads == 1)
        services.approvals[id] = try services.approvals[id]!.deciding(.approved, by: "demo", nowMs: Int64(services.now) * 1000).get()
        services.now += 4
        r = try poll(e, r)
        guard case .success(let s) = r else { Issue.record("approved must go on: \(r)"); return }
        #expect(s.username == "demo" && s.shared[JourneyState.approvedElsewhereKey] == id)
        #expect(s.shared["approvalId"] == nil && s.shared["approvalCode"] == nil)
    }

    @Test func polls_faster_than_half_of_pollMs_cost_no_store_read_and_no_write() throws {
        let e = engine()
        var r = start(e)
        let saved = services.approvals
        for _ in 0..<10 { r = try poll(e, r) }  // the same second: far faster than 4000 ms
        guard case .step = r else { Issue.record("\(r)"); return }
        #expect(services.approvalReads == 0)
        #expect(services.approvals == saved)
        services.now += 2  // half of pollMs: now it reads
        r = try poll(e, r)
        #expect(services.approvalReads == 1)
    }

    @Test func denied_fails_with_reason_denied() throws {
        let e = engine()
        let r = start(e)
        let id = try pending().id
        services.approvals[id] = try services.approvals[id]!.deciding(.denied, by: "demo", nowMs: Int64(services.now) * 1000).get()
        services.now += 5
        guard case .failure(_, let kind, _) = try poll(e, r) else { Issue.record("denied must fail"); return }
        #expect(kind == .denied)
    }

    @Test func expiry_by_the_records_time_and_by_its_absence_fails_with_reason_expired() throws {
        let e = engine()
        let r = start(e)
        services.now += 61
        guard case .failure(_, let kind, _) = try poll(e, r) else { Issue.record("expired must fail"); return }
        #expect(kind == .expired)
        // The store dropped it (its time to live): also expired, not an error.
        services.approvals.removeAll()
        services.now += 5
        guard case .failure(_, let gone, _) = try poll(e, r) else { Issue.record("gone must fail"); return }
        #expect(gone == .expired)
    }

    /// Approval bombing: each request counts like an email; over the limit, or locked out, no
    /// request is made and nothing is sent.
    @Test func over_the_email_limit_or_locked_out_no_request_is_made_or_sent() {
        services.emailsAllowed = 1
        guard case .step = start(engine()) else { Issue.record("the first request must be made"); return }
        guard case .failure = start(engine()) else { Issue.record("over the limit must fail"); return }
        #expect(services.approvals.count == 1 && services.notified.count == 1)
        services.emailsAllowed = 100
        services.locked.insert("demo")
        guard case .failure = start(engine()) else { Issue.record("locked out must fail"); return }
        #expect(services.approvals.count == 1 && services.notified.count == 1)
    }

    /// A sign-in's claimed name that is no account: the same step and a pending request (so the
    /// answer does not tell which names exist), but nothing is sent.
    @Test func a_name_that_is_no_account_gets_the_same_step_and_nothing_is_sent() throws {
        var r: JourneyResult!
        engine().start(JourneyState(realm: "/", journey: "Remote", shared: ["claimedUser": "nobody"]), context: context) { r = $0 }
        guard case .step(_, let callbacks) = r else { Issue.record("\(String(describing: r))"); return }
        #expect(callbacks.map(\.type) == ["PollingWaitCallback"])
        #expect(try pending().subject == "nobody")
        #expect(services.notified.isEmpty)
    }

    @Test func a_store_that_is_down_answers_unavailable_not_approved() throws {
        let e = engine()
        let r = start(e)
        services.storeDown = true
        services.now += 5
        guard case .unavailable = try poll(e, r) else { Issue.record("store down must be 503"); return }
    }

    @Test func settings_are_checked_strictly_with_their_path() {
        func error(_ s: [String: JSONValue]) -> String? {
            JourneyEngine.build(["J": [NodeConfig(type: "ApproveElsewhere", settings: s, path: "journeys.J[0]")]]).errors.first.map(\.description)
        }
        let ok: [String: JSONValue] = ["channels": ["email"], "approverJourney": "A"]
        #expect(error(ok) == nil)
        #expect(error(["approverJourney": "A"])?.hasPrefix("journeys.J[0].channels: required") == true)
        #expect(error(["channels": ["sms"], "approverJourney": "A"])?.hasPrefix("journeys.J[0].channels[0]: \"sms\" is not a channel") == true)
        #expect(error(["channels": ["email", "email"], "approverJourney": "A"])?.hasPrefix("journeys.J[0].channels[1]") == true)
        #expect(error(["channels": [], "approverJourney": "A"])?.hasPrefix("journeys.J[0].channels: must be a non-empty") == true)
        #expect(error(["channels": ["email"]])?.hasPrefix("journeys.J[0].approverJourney: required") == true)
        #expect(error(ok.merging(["pollMs": 100]) { $1 })?.hasPrefix("journeys.J[0].pollMs") == true)
        #expect(error(ok.merging(["ttlS": "60"]) { $1 })?.hasPrefix("journeys.J[0].ttlS") == true)
        #expect(error(ok.merging(["message": "{cod}"]) { $1 })?.hasPrefix("journeys.J[0].message: unknown placeholder '{cod}'") == true)
        #expect(error(ok.merging(["chanels": ["email"]]) { $1 })?.hasPrefix("journeys.J[0].chanels: unknown key") == true)
    }

    @Test func the_approver_journey_starts_only_for_the_requests_own_user_while_pending() throws {
        let e = engine()
        let settings = AuthenticateCommand.Settings(gotoPolicy: GotoPolicy(origin: HTTPURL(parsing: "http://gw.test")!), cors: CORSConfig(),
                                                    loginJourney: "Approver", engine: e)
        _ = start(e)
        let request = try pending()
        let nowMs = Int64(services.now) * 1000
        let initial = JourneyState(realm: "/", journey: "Approver")
        let ok = try AuthenticateCommand.approver(initial, id: request.id, request: request, uid: "demo", sessionKey: "s", settings, nowMs: nowMs).get()
        #expect(ok.journey == "Approver" && ok.username == "demo" && ok.shared[JourneyState.decidesApprovalKey] == request.id)
        #expect(ok.shared[JourneyState.approvalSessionKey] == "s")
        #expect(AuthenticateCommand.approver(initial, id: request.id, request: request, uid: "mallory", sessionKey: "s", settings, nowMs: nowMs)
            == .failure(.notYours))
        #expect(AuthenticateCommand.approver(initial, id: request.id, request: request, uid: "demo", sessionKey: "s", settings, nowMs: request.expiresMs)
            == .failure(.expired))
        let denied = try request.deciding(.denied, by: "demo", nowMs: nowMs).get()
        #expect(AuthenticateCommand.approver(initial, id: request.id, request: denied, uid: "demo", sessionKey: "s", settings, nowMs: nowMs)
            == .failure(.alreadyDecided(.denied)))
        #expect(AuthenticateCommand.approver(initial, id: "other", request: nil, uid: "demo", sessionKey: "s", settings, nowMs: nowMs)
            == .failure(.notFound))
        // The advice names the request.
        let advice = "<Advices><AttributeValuePair><Attribute name=\"ApprovalRequestConditionAdvice\"/><Value>\(request.id)</Value></AttributeValuePair></Advices>"
        var head = RequestHead(method: "POST", target: "/am/json/authenticate?authIndexType=composite_advice&authIndexValue=" + Query.encode(advice))
        head.headers.add("Content-Type", "application/json")
        #expect(AuthenticateCommand.parse(head, body: [], realm: "/", settings, now: services.now) == .success(.decideApproval(id: request.id, JourneyState(realm: "/", journey: "Approver"))))
    }

    @Test func webhook_backoff_doubles_and_is_capped() {
        #expect((2...5).map { WebhookSignature.backoffMs(attempt: $0, baseMs: 500) } == [500, 1000, 2000, 4000])
        #expect(WebhookSignature.backoffMs(attempt: 30, baseMs: 1000) == 60_000)
    }

    @Test func the_webhook_body_carries_link_display_and_code() throws {
        _ = start(engine())
        let request = try pending()
        let notice = ApprovalNotice(request, publicURL: "https://gw.example")
        let body = try #require(JSONValue.parse(notice.webhookBody))
        #expect(body["link"]?.stringValue == "https://gw.example/am/XUI/approval?id=" + request.id)
        #expect(body["bindingCode"]?.stringValue == request.bindingCode)
        #expect(body["display"]?.stringValue == "Sign-in (Remote)")
        #expect(body["subject"]?.stringValue == "demo" && body["id"]?.stringValue == request.id)
        let mail = notice.email(to: "demo@example.com")
        #expect(mail.body.contains(notice.link) && mail.body.contains(request.bindingCode) && mail.subject.contains(request.bindingCode))
        var templates = ApprovalEmailConfig()
        templates.subject = "[{code}] for {username}"
        templates.body = "{display} -> {link}"
        let custom = notice.email(to: "demo@example.com", templates)
        #expect(custom.subject == "[\(request.bindingCode)] for demo" && custom.body == "Sign-in (Remote) -> \(notice.link)")
    }

    @Test func approvals_email_templates_are_checked_by_path() throws {
        func errors(_ json: String) -> [String] {
            ConfigDeclarationTests.errors(ApprovalsConfig.self, json)
        }
        #expect(errors(#"{"email":{"body":"{display} {link}","subject":"{code}"}}"#).isEmpty)
        #expect(errors(#"{"email":{"body":"{link} {cdoe}"}}"#).first?.hasPrefix("email.body: unknown placeholder '{cdoe}'") == true,
                "\(errors(#"{"email":{"body":"{link} {cdoe}"}}"#))")
        #expect(errors(#"{"email":{"body":"no link"}}"#).first?.hasPrefix("email.body: must contain {link}") == true)
        #expect(errors(#"{"email":{"subject":"{link}"}}"#).first?.hasPrefix("email.subject: unknown placeholder '{link}'") == true)
        #expect(errors(#"{"webhook":{"url":"http://x/","secretFile":"s","timeoutMs":0}}"#).first?.hasPrefix("webhook.timeoutMs") == true)
        #expect(errors(#"{"webhook":{"secretFile":"s"}}"#).first?.hasPrefix("webhook.url: required") == true,
                "\(errors(#"{"webhook":{"secretFile":"s"}}"#))")
        #expect(errors(#"{"webhok":{}}"#).first?.hasPrefix("webhok: unknown key") == true)
    }
}
