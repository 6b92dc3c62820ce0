import Foundation
import TxGateCrypto

/// The embedded policy decision, as a value: given the policies, a query, the clock and what
/// the store returned, it says what to do next. It never touches the store or reads the
/// time itself; `EmbeddedPDP` (in the gateway) carries each plan out and feeds the
/// store's answer back in, until the plan is a decision.
public struct PolicyDecider: Sendable {
    public let policies: PolicySet
    public let loginJourney: String
    /// Transactions one subject may have waiting for approval.
    public let maxPending: Int
    /// New TxIds (random UUIDs; tests inject their own).
    public let newTxId: @Sendable () -> String

    public init(policies: PolicySet, loginJourney: String, maxPending: Int,
                newTxId: @escaping @Sendable () -> String = { Crypto.uuidV4() }) {
        self.policies = policies
        self.loginJourney = loginJourney
        self.maxPending = maxPending
        self.newTxId = newTxId
    }

    /// The same decider over `policies` (a worker's own copy of the same policies).
    public func with(policies: PolicySet) -> PolicyDecider {
        PolicyDecider(policies: policies, loginJourney: loginJourney, maxPending: maxPending, newTxId: newTxId)
    }

    /// A request that needs its own transaction: the rule and what the request binds.
    ///
    /// The rule, the binding and the seal never change once made, and an intent travels through
    /// every step of a challenge or a retry (each `Plan` holds it, each callback captures it):
    /// they live in one shared object, so that a copy is one retain, not one per string, array
    /// and dictionary inside them (about a hundred retains and releases a step-up cycle).
    public struct Intent: Equatable, Sendable {
        private final class Parts: Sendable {
            let rule: TransactionRule
            let binding: TransactionBinding
            let ownSeal: String
            init(rule: TransactionRule, binding: TransactionBinding) {
                self.rule = rule
                self.binding = binding
                ownSeal = binding.seal
            }
        }
        private var parts: Parts

        public var rule: TransactionRule {
            get { parts.rule }
            set { parts = Parts(rule: newValue, binding: binding) }
        }
        public var binding: TransactionBinding { parts.binding }
        /// Which approval the retry's TxId must be: one of this very request (its seal), or one
        /// asked for ahead of it (RFC 9396, the TxId of an access token with
        /// `authorization_details`): of the rule's mapped type with these values.
        public var approvedAhead = false
        /// `binding.seal`, digested once: a challenge needs it for the index and the record, a
        /// retry for the record it consumes.
        public var ownSeal: String { parts.ownSeal }

        public init(rule: TransactionRule, binding: TransactionBinding) {
            parts = Parts(rule: rule, binding: binding)
        }

        public static func == (a: Intent, b: Intent) -> Bool {
            a.approvedAhead == b.approvedAhead && (a.parts === b.parts || (a.rule == b.rule && a.binding == b.binding))
        }

        /// The index of the transaction last created for this very request: a digest of the
        /// subject and the seal (which digests the subject too), so that one user's request never
        /// finds another user's TxId. It names a TxId, never a record: whoever reads it still
        /// checks the record itself (`reusable`).
        public var pendingKey: String { TransactionRecord.pendingIndexKey(subject: binding.subject, seal: ownSeal) }

        /// The seal the consumed record must have.
        public var seal: String {
            guard approvedAhead, let m = rule.authorizationDetails else { return ownSeal }
            return binding.detailsSeal(type: m.type)
        }
    }

    /// What to do next.
    public indirect enum Plan: Equatable, Sendable {
        /// Answer with this decision; nothing (more) to store.
        case decided(Decision)
        case failed(PDPError)
        /// Take the completed transaction `txid` if it is sealed to this request; if it was
        /// taken, allow once (`afterConsume`).
        case consume(txid: String, Intent)
        /// Read the transaction the pending index names (`afterCheckPending`).
        case checkPending(txid: String, Intent, attempts: Int)
        /// Write this new record, not yet handed out, point the request's pending index
        /// (`Intent.pendingKey`) at it (created if `replacing` is nil, else swapped only while it
        /// still names `replacing`) and count one more transaction waiting for the subject's
        /// approval (`CounterMove.up` of `TransactionRecord.pendingKey`, the rule's ttl), all in
        /// one store step, all or nothing (`Store.writeAll`; `afterOpen`): whoever reads the
        /// index finds the record it names, and of concurrent challenges of one request exactly
        /// one claims the index and counts, the others writing nothing. A challenge opens at
        /// once, without reading the index first: an index that names a transaction already
        /// refuses the step and says which (`afterOpen`), so that the same request challenged
        /// again gets the same TxId (`afterFindPending`).
        /// `replacing`: the TxId the index names now (a transaction no longer pending), nil if none.
        /// `attempts`: opens left before the race for the index is given up.
        case open(TransactionRecord, Intent, ttlMs: Int, replacing: String?, attempts: Int)
        /// Delete a record never handed out and the index entry `unindex` naming it, then go on
        /// with `then`. A failure here only leaves a record that expires unused.
        case withdraw(txid: String, unindex: String, then: Plan)
        /// Lower the subject's count of waiting transactions by the one just refused, then go on
        /// with `then`: a refused challenge leaves nothing waiting, so it does not count.
        case uncountPending(subject: String, then: Plan)
    }

    /// Opens one challenge tries before giving up the race for its pending index: the first,
    /// and three more once the index was found naming a transaction that cannot be reused.
    public static let claimAttempts = 4

    public func decide(_ q: DecisionQuery, nowMs: Int64) -> Plan {
        let deny = Decision(resource: q.resource)
        guard let policy = policies.applicable(path: q.path, method: q.method) else { return .decided(deny) }
        let allow = Decision(resource: q.resource, actions: [q.method: true])
        if policy.subjects == .anyone { return .decided(allow) }
        guard let subject = q.subject else { return .decided(Self.treeAdvice(q, loginJourney)) }
        if case .only(let list) = policy.subjects, !list.contains(where: subject.isNamed(by:)) { return .decided(deny) }
        switch policy.requirement {
        case .none:
            return .decided(allow)
        case .stepUp(let journey, let maxAgeS):
            let recent = maxAgeS.map { max in subject.authTime.map { Int(nowMs / 1000) - $0 <= max } ?? false } ?? true
            return .decided(subject.journeys.contains(journey) && recent ? allow : Self.treeAdvice(q, journey))
        case .transaction(let rule):
            switch Self.matchesWhen(rule, q) {
            case .failure(let why): return .failed(.badRequest(why.description))
            // Not a request this transaction is for: allowed, and never cached (the next request
            // on the same URL may be one it is for).
            case .success(false): return .decided(Decision(resource: q.resource, actions: [q.method: true], ttl: nowMs - 1))
            case .success(true): break
            }
            let binding = Self.binding(q, subject: subject, rule: rule)
            switch binding.bodyOutcome {
            case .bindable: break
            case .unsupportedMediaType(let why): return .failed(.unsupportedMediaType(why))
            case let other: return .failed(.badRequest(other.message))
            }
            var intent = Intent(rule: rule, binding: binding)
            if let txid = q.txid, Self.isTxId(txid) {
                intent.approvedAhead = q.txidApprovedAhead
                return .consume(txid: txid, intent)
            }
            return create(intent, replacing: nil, attempts: Self.claimAttempts, nowMs: nowMs)
        }
    }

    /// After `Store.takeIf` of transaction `txid`: a taken record allows this one request;
    /// anything else needs a new transaction.
    public func afterConsume(_ intent: Intent, txid: String, _ take: ConditionalTake, nowMs: Int64) -> Plan {
        guard case .taken(let bytes) = take else {
            var own = intent
            own.approvedAhead = false  // the challenge is for this very request
            return create(own, replacing: nil, attempts: Self.claimAttempts, nowMs: nowMs)
        }
        // A one-shot allow must never be cached: its ttl has already passed.
        return .decided(.consuming(txid, record: bytes, resource: intent.binding.resource, method: intent.binding.method, ttl: nowMs - 1))
    }

    /// Why a retry did not consume its transaction (for the log), or nil if it did.
    public func refusal(_ intent: Intent, _ take: ConditionalTake, nowMs: Int64) -> RetryRefusal? {
        switch take {
        case .taken: return nil
        case .absent: return .unknown
        case .kept(let bytes):
            return TransactionRecord.decode(bytes)?.mismatch(intent.binding, now: Int(nowMs / 1000)) ?? .other
        }
    }

    /// The pending index found naming `indexed` (nil: nothing): the transaction it names, to be
    /// checked, or a new one.
    public func afterFindPending(_ intent: Intent, indexed: [UInt8]?, attempts: Int, nowMs: Int64) -> Plan {
        guard let indexed else { return create(intent, replacing: nil, attempts: attempts, nowMs: nowMs) }
        let txid = String(decoding: indexed, as: UTF8.self)
        // Not a TxId (written by something else): replaced like any stale entry.
        guard Self.isTxId(txid) else { return create(intent, replacing: txid, attempts: attempts, nowMs: nowMs) }
        return .checkPending(txid: txid, intent, attempts: attempts)
    }

    /// After reading the transaction the index names: the same challenge again if it is still
    /// waiting for this very request's approval (`reusable`), else a new transaction in its place.
    public func afterCheckPending(_ intent: Intent, txid: String, record: [UInt8]?, attempts: Int, nowMs: Int64) -> Plan {
        if let record = record.flatMap(TransactionRecord.decode), record.txid == txid, reusable(record, for: intent, nowMs: nowMs) {
            return created(record)
        }
        return create(intent, replacing: txid, attempts: attempts, nowMs: nowMs)
    }

    /// Whether `record` may be handed out again as the challenge of `intent`: still CREATED (an
    /// approved one is the approval of a request already sent, and is consumed by that request's
    /// retry, never offered as a new challenge; a consumed one is gone), created for this very
    /// request by this very subject (the seal: realm, resource, method, subject, media type and
    /// bound values) under the same journey, and with at least half its lifetime left, so that
    /// a user handed a TxId again has time to approve it.
    public func reusable(_ record: TransactionRecord, for intent: Intent, nowMs: Int64) -> Bool {
        let now = Int(nowMs / 1000)
        return record.state == .created && record.subject == intent.binding.subject && record.seal == intent.ownSeal
            && record.journey == intent.rule.journey && record.expires - now >= (intent.rule.ttlS + 1) / 2
    }

    /// A new record for `intent`, written with its index entry and its count (`Plan.open`).
    func create(_ intent: Intent, replacing: String?, attempts: Int, nowMs: Int64) -> Plan {
        guard attempts > 0 else {
            return .failed(.unavailable("the pending index of this request kept changing under concurrent challenges; try again"))
        }
        let b = intent.binding, rule = intent.rule
        let record = TransactionRecord(
            txid: newTxId(), realm: b.realm, resource: b.resource, method: b.method, subject: b.subject,
            journey: rule.journey, bodyDigest: b.bodyDigest, bound: b.bound,
            display: TransactionBinding.display(rule.display, bound: b.bound), expires: Int(nowMs / 1000) + rule.ttlS,
            seal: intent.ownSeal)
        return .open(record, intent, ttlMs: rule.ttlS * 1000, replacing: replacing, attempts: attempts)
    }

    /// After `Plan.open`'s step (`replacing` as the plan had it): written, the subject's count of
    /// waiting transactions, this one included; refused, nothing was written or counted.
    /// - Within `maxPending`: challenge with the TxId.
    /// - Over the limit: the record, its index entry and its count are withdrawn before the refusal.
    /// - The index named another transaction than `replacing` (the same request challenged
    ///   again; a stale entry; a concurrent challenge of the same request that won the race):
    ///   that one is checked (`afterFindPending`), and reused or replaced.
    /// - The new TxId was taken already (a generator that repeats itself): another one.
    /// - The step failed: nothing was written; the challenge fails closed.
    public func afterOpen(_ record: TransactionRecord, _ intent: Intent, replacing: String?, opened: StoreResult<WriteOutcome>,
                          attempts: Int, nowMs: Int64) -> Plan {
        switch opened {
        case .success(.written(let pending)):
            guard pending <= maxPending else {
                return .withdraw(txid: record.txid, unindex: intent.pendingKey,
                                 then: .uncountPending(subject: record.subject, then: .failed(.tooManyTransactions(maxPending))))
            }
            return created(record)
        case .success(.refused(let key, let found)) where key == intent.pendingKey:
            return afterFindPending(intent, indexed: found, attempts: attempts - 1, nowMs: nowMs)
        case .success(.refused):
            return create(intent, replacing: replacing, attempts: attempts - 1, nowMs: nowMs)
        case .failure(let e):
            return .failed(.unavailable(e.description))
        }
    }

    /// The record is written: challenge with its TxId.
    public func created(_ record: TransactionRecord) -> Plan {
        .decided(Decision(resource: record.resource, advices: Advices([(Advices.transaction, [record.txid])])))
    }

    /// Whether the request is one the rule's `when` names (true without a `when`). A body that
    /// is not one JSON object is refused rather than let through unapproved: what the gateway
    /// cannot read, it cannot tell the backend will not run (a JSON-RPC batch, duplicate keys).
    static func matchesWhen(_ rule: TransactionRule, _ q: DecisionQuery) -> Result<Bool, BadWhen> {
        guard !rule.when.isEmpty else { return .success(true) }
        guard let read = q.body else { return .success(true) }  // AM's REST evaluate: no request to read
        let bytes = read()
        guard q.contentType.flatMap(MediaType.init)?.isJSON == true, let body = JSONValue.parse(bytes), case .object = body else {
            return .failure(BadWhen("this request must be one JSON object (application/json) for the gateway to tell whether it needs an approval"))
        }
        return .success(rule.when.allSatisfy { pointer, value in body.at(pointer: pointer).map { $0.canonical == value.canonical } ?? false })
    }

    public struct BadWhen: Error, Equatable, Sendable, CustomStringConvertible {
        public let description: String
        init(_ d: String) { description = d }
    }

    /// What the request binds: its body as its media type reads, or, asked without the
    /// request (AM's REST evaluate), the bound fields as null.
    static func binding(_ q: DecisionQuery, subject: Subject, rule: TransactionRule) -> TransactionBinding {
        guard let body = q.body else {
            return TransactionBinding(realm: q.realm, resource: q.resource, method: q.method, subject: subject.uid, rule: rule, body: [])
        }
        return TransactionBinding(realm: q.realm, resource: q.resource, method: q.method, subject: subject.uid, rule: rule,
                                  body: body(), contentType: q.contentType)
    }

    public static func treeAdvice(_ q: DecisionQuery, _ journey: String) -> Decision {
        Decision(resource: q.resource, advices: Advices([(Advices.authenticateToService, ["\(q.realm):\(journey)"])]))
    }

    /// Whether `s` is a UUID in its text form (8-4-4-4-12 hex digits, either case), checked byte
    /// by byte: Foundation's parser (`UUID(uuidString:)`, `sscanf`) cost about 8,800
    /// instructions a call, once per step-up cycle, and also took a space or a sign for a digit.
    public static func isTxId(_ s: String) -> Bool {
        var n = 0
        for b in s.utf8 {
            switch n {
            case 8, 13, 18, 23:
                guard b == UInt8(ascii: "-") else { return false }
            case 36:
                return false
            default:
                guard hexDigitValue(b) != nil else { return false }
            }
            n += 1
        }
        return n == 36
    }
}
