import EventHTTP
import Foundation
import Logging
import TxGateCore
import TxGateCrypto

/// Who is asking: the session behind the request.
struct Subject {
    var uid: String
    var realm: String
    var journeys: [String]
    var attributes: [String: String]
    /// The session token, to answer a completed journey with the same session.
    var token: String
}

/// One question to a policy decision point (AM's evaluate request).
struct DecisionQuery {
    var realm: String
    /// The path (no query) the policies match against.
    var path: Substring
    /// The resource as AM names it: the gateway's public URL of the request, `_txid` removed.
    var resource: String
    var method: String
    var subject: Subject?
    var environment: [String: [String]]
    /// Reads the request body, for binding a transaction to what is approved (only
    /// transactional policies pay for the copy).
    var body: () -> [UInt8]
}

enum PDPError: Error {
    case unavailable(String)
    case tooManyTransactions(Int)
    case badRequest(String)
}

/// A source of decisions in AM's shape. The PEP does not care which one it talks to.
protocol PolicyDecisionPoint: AnyObject {
    /// Whether deciding needs the subject; if not, the PEP skips the session lookup (so that
    /// open routes keep working when the store is down).
    func needsSubject(path: Substring, method: String) -> Bool
    func evaluate(_ q: DecisionQuery, on loop: EventLoop, _ done: @escaping (Result<Decision, PDPError>) -> Void)
}

/// Policies from gateway.json, transactions in the store.
final class EmbeddedPolicyEngine: PolicyDecisionPoint, @unchecked Sendable {
    let policies: [Policy]
    let store: Store
    let users: [String: UserRecord]
    let loginJourney: String
    let maxPending: Int
    let logger: Logger

    init(policies: [Policy], store: Store, users: [String: UserRecord], loginJourney: String, maxPending: Int, logger: Logger) {
        self.policies = policies
        self.store = store
        self.users = users
        self.loginJourney = loginJourney
        self.maxPending = maxPending
        self.logger = logger
    }

    static func treeAdvice(_ realm: String, _ journey: String) -> Advices {
        Advices([(Advices.authenticateToService, ["\(realm):\(journey)"])])
    }

    func needsSubject(path: Substring, method: String) -> Bool {
        guard let p = policies.first(where: { $0.applies(path: path, method: method) }) else { return false }
        return p.subjects != .anyone
    }

    func evaluate(_ q: DecisionQuery, on loop: EventLoop, _ done: @escaping (Result<Decision, PDPError>) -> Void) {
        let deny = Decision(resource: q.resource)
        var allow = Decision(resource: q.resource, actions: [q.method: true])
        guard let policy = policies.first(where: { $0.applies(path: q.path, method: q.method) }) else {
            done(.success(deny))
            return
        }
        if policy.subjects == .anyone {
            done(.success(allow))
            return
        }
        guard let subject = q.subject else {
            done(.success(Decision(resource: q.resource, advices: Self.treeAdvice(q.realm, loginJourney))))
            return
        }
        if case .only(let list) = policy.subjects, !matches(subject, list) {
            done(.success(deny))
            return
        }
        switch policy.requirement {
        case .none:
            done(.success(allow))
        case .stepUp(let journey):
            done(.success(subject.journeys.contains(journey) ? allow
                          : Decision(resource: q.resource, advices: Self.treeAdvice(q.realm, journey))))
        case .transaction(let rule):
            let binding = TransactionBinding(realm: q.realm, resource: q.resource, method: q.method, subject: subject.uid,
                                             rule: rule, body: q.body())
            guard binding.bodyIsBindable else {
                done(.failure(.badRequest("this request needs its own approval of fields in its body, "
                    + "so the body must be one JSON document without repeated keys")))
                return
            }
            // A one-shot allow must never be cached: its ttl has already passed.
            allow.ttl = Int64(Date().timeIntervalSince1970 * 1000) - 1
            if let txid = q.environment["TxId"]?.first, Self.isTxId(txid) {
                consume(txid, binding, loop) { [self] r in
                    switch r {
                    case .failure(let e): done(.failure(e))
                    case .success(true): done(.success(allow))
                    case .success(false): newTransaction(rule, binding, q, loop, done)
                    }
                }
            } else {
                newTransaction(rule, binding, q, loop, done)
            }
        }
    }

    static func isTxId(_ s: String) -> Bool { s.utf8.count == 36 && UUID(uuidString: s) != nil }

    private func matches(_ s: Subject, _ list: [String]) -> Bool {
        list.contains { entry in
            if let eq = entry.firstIndex(of: "=") {
                return s.attributes[String(entry[..<eq])] == String(entry[entry.index(after: eq)...])
            }
            return entry == s.uid
        }
    }

    /// Allows once: in one store step, the record is deleted only if it is COMPLETED and
    /// sealed to this very request (subject, realm, resource, method, bound body), so of all
    /// concurrent retries, on any instance, exactly one gets through.
    private func consume(_ txid: String, _ b: TransactionBinding, _ loop: EventLoop,
                         _ done: @escaping (Result<Bool, PDPError>) -> Void) {
        store.takeIf(TransactionRecord.key(txid), fields: TransactionRecord.consumable(by: b), on: loop) { [self] r in
            switch r {
            case .failure(let e):
                done(.failure(.unavailable(e.description)))
            case .success(.taken):
                logger.info("transaction consumed", metadata: [
                    "txid": .string(masked(txid)), "user": .string(b.subject), "reason": "allowed once",
                ])
                done(.success(true))
            case .success(.absent):
                logger.info("transaction refused", metadata: ["txid": .string(masked(txid)), "reason": "unknown, expired or consumed"])
                done(.success(false))
            case .success(.kept(let bytes)):
                let why = TransactionRecord.decode(bytes)?.mismatch(b, now: Int(Date().timeIntervalSince1970)) ?? "does not match this request"
                logger.info("transaction refused", metadata: ["txid": .string(masked(txid)), "reason": .string(why)])
                done(.success(false))
            }
        }
    }

    private func newTransaction(_ rule: TransactionRule, _ b: TransactionBinding, _ q: DecisionQuery, _ loop: EventLoop,
                                _ done: @escaping (Result<Decision, PDPError>) -> Void) {
        // Bounded per subject so that a client cannot fill the store.
        store.increment(TransactionRecord.pendingKey(b.subject), ttlMs: rule.ttlS * 1000, on: loop) { [self] r in
            switch r {
            case .failure(let e): done(.failure(.unavailable(e.description)))
            case .success(let n) where n > maxPending:
                done(.failure(.tooManyTransactions(maxPending)))
            case .success:
                let txid = UUID().uuidString.lowercased()
                let now = Int(Date().timeIntervalSince1970)
                let record = TransactionRecord(
                    txid: txid, realm: b.realm, resource: b.resource, method: b.method, subject: b.subject,
                    journey: rule.journey, bodyDigest: b.bodyDigest, bound: b.bound,
                    display: TransactionBinding.display(rule.display, bound: b.bound), expires: now + rule.ttlS)
                store.create(TransactionRecord.key(txid), value: record.encoded, ttlMs: rule.ttlS * 1000, on: loop) { [self] r in
                    switch r {
                    case .failure(let e): done(.failure(.unavailable(e.description)))
                    case .success:
                        logger.info("transaction created", metadata: [
                            "txid": .string(masked(txid)), "user": .string(b.subject), "journey": .string(rule.journey),
                            "method": .string(b.method), "resource": .string(b.resource),
                        ])
                        done(.success(Decision(resource: q.resource, advices: Advices([(Advices.transaction, [txid])]))))
                    }
                }
            }
        }
    }
}
