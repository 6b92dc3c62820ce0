import Foundation

/// The embedded policy decision, as a value: given the policies, a query, the clock and what
/// the store returned, it says what to do next. It never touches the store or reads the
/// time itself; `TransactionExecutor` (in the gateway) carries each plan out and feeds the
/// store's answer back in, until the plan is a decision.
public struct PolicyDecider: Sendable {
    public let policies: PolicySet
    public let loginJourney: String
    /// Transactions one subject may have waiting for approval.
    public let maxPending: Int
    /// New TxIds (random UUIDs; tests inject their own).
    public let newTxId: @Sendable () -> String

    public init(policies: PolicySet, loginJourney: String, maxPending: Int,
                newTxId: @escaping @Sendable () -> String = { UUID().uuidString.lowercased() }) {
        self.policies = policies
        self.loginJourney = loginJourney
        self.maxPending = maxPending
        self.newTxId = newTxId
    }

    /// A request that needs its own transaction: the rule and what the request binds.
    public struct Intent: Equatable, Sendable {
        public var rule: TransactionRule
        public var binding: TransactionBinding
    }

    /// What to do next.
    public enum Plan: Equatable, Sendable {
        /// Answer with this decision; nothing (more) to store.
        case decided(Decision)
        case failed(PDPError)
        /// Take the completed transaction `txid` if it is sealed to this request; if it was
        /// taken, allow once (`afterConsume`).
        case consume(txid: String, Intent)
        /// Count one more transaction waiting for the subject's approval (`afterCount`).
        case countPending(Intent)
        /// Write this new record (`created` once it is written).
        case create(TransactionRecord, ttlMs: Int)
    }

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
            let binding = Self.binding(q, subject: subject, rule: rule)
            switch binding.bodyOutcome {
            case .bindable: break
            case .unsupportedMediaType(let why): return .failed(.unsupportedMediaType(why))
            case let other: return .failed(.badRequest(other.message))
            }
            let intent = Intent(rule: rule, binding: binding)
            if let txid = q.txid, Self.isTxId(txid) { return .consume(txid: txid, intent) }
            return .countPending(intent)
        }
    }

    /// After `Store.takeIf`: a taken record allows this one request; anything else needs a new transaction.
    public func afterConsume(_ intent: Intent, _ take: ConditionalTake, nowMs: Int64) -> Plan {
        guard case .taken(let bytes) = take else { return .countPending(intent) }
        // A one-shot allow must never be cached: its ttl has already passed.
        return .decided(Decision(resource: intent.binding.resource, actions: [intent.binding.method: true], ttl: nowMs - 1,
                                 consumed: TransactionRecord.decode(bytes)))
    }

    /// Why a retry did not consume its transaction (for the log), or nil if it did.
    public func refusal(_ intent: Intent, _ take: ConditionalTake, nowMs: Int64) -> String? {
        switch take {
        case .taken: return nil
        case .absent: return "unknown, expired or consumed"
        case .kept(let bytes):
            return TransactionRecord.decode(bytes)?.mismatch(intent.binding, now: Int(nowMs / 1000)) ?? "does not match this request"
        }
    }

    /// After counting the subject's pending transactions (this one included).
    public func afterCount(_ intent: Intent, pending: Int, nowMs: Int64) -> Plan {
        guard pending <= maxPending else { return .failed(.tooManyTransactions(maxPending)) }
        let b = intent.binding, rule = intent.rule
        let record = TransactionRecord(
            txid: newTxId(), realm: b.realm, resource: b.resource, method: b.method, subject: b.subject,
            journey: rule.journey, bodyDigest: b.bodyDigest, bound: b.bound,
            display: TransactionBinding.display(rule.display, bound: b.bound), expires: Int(nowMs / 1000) + rule.ttlS)
        return .create(record, ttlMs: rule.ttlS * 1000)
    }

    /// The record is written: challenge with its TxId.
    public func created(_ record: TransactionRecord) -> Plan {
        .decided(Decision(resource: record.resource, advices: Advices([(Advices.transaction, [record.txid])])))
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

    public static func isTxId(_ s: String) -> Bool { s.utf8.count == 36 && UUID(uuidString: s) != nil }
}
