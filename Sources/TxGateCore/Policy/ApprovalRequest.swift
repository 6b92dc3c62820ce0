import Foundation
import TxGateCrypto

/// A request for a person to approve, on a device of their own, what a waiting client asked
/// for (issue 27, "approve elsewhere"): a transaction (its display and bound values) or a
/// step-up. The waiting client shows `bindingCode`; the approval page shows it too, so that the
/// person can match the two screens and refuse a request they did not start.
///
/// Decided once: `Store.decideApproval` moves it from pending to approved or denied with a
/// compare-and-swap over the pending record, so that of two devices racing, exactly one
/// decides and the other is told what was decided. Expiry is the store's (the record's time to
/// live) and the record's own `expiresMs`, never the page's.
public struct ApprovalRequest: Codable, Equatable, Sendable {
    public enum State: String, Codable, Sendable { case pending, approved, denied }

    /// What the person is asked to approve.
    public enum Matter: Codable, Equatable, Sendable {
        /// A transaction waiting for its approval: what the approval page shows.
        case transaction(txid: String, display: String?, bound: [String: JSONValue])
        /// A step-up through the named journey.
        case stepUp(journey: String)
    }

    /// Unguessable (128 random bits, base64url): the approval link names the request by it.
    public var id: String
    /// The only user who may decide it.
    public var subject: String
    public var matter: Matter
    /// The journey the person passes to decide (a passkey, TOTP, an email code).
    public var approverJourney: String
    /// Two digits, 10 to 99, shown on both screens.
    public var bindingCode: String
    public var state: State
    /// Unix milliseconds.
    public var createdMs: Int64
    public var expiresMs: Int64
    public var decidedMs: Int64?

    public init(id: String, subject: String, matter: Matter, approverJourney: String, bindingCode: String,
                state: State = .pending, createdMs: Int64, expiresMs: Int64, decidedMs: Int64? = nil) {
        self.id = id
        self.subject = subject
        self.matter = matter
        self.approverJourney = approverJourney
        self.bindingCode = bindingCode
        self.state = state
        self.createdMs = createdMs
        self.expiresMs = expiresMs
        self.decidedMs = decidedMs
    }

    /// A new pending request with a random id and binding code, expiring `ttlS` from `nowMs`.
    public static func pending(subject: String, matter: Matter, approverJourney: String, nowMs: Int64, ttlS: Int) -> ApprovalRequest {
        ApprovalRequest(id: Base64URL.encode(Crypto.randomBytes(16)), subject: subject, matter: matter,
                        approverJourney: approverJourney, bindingCode: bindingCode(Crypto.randomBytes(8)),
                        createdMs: nowMs, expiresMs: nowMs + Int64(ttlS) * 1000)
    }

    /// Two decimal digits from 10 to 99, uniformly: the first byte below 180 (2 × 90) picks it.
    /// Nil only if every byte given is 180 or more (8 random bytes: one chance in 10^5.3);
    /// then the last byte decides, with a bias nobody can use.
    public static func bindingCode(_ random: [UInt8]) -> String {
        let b = random.first { $0 < 180 } ?? random.last ?? 0
        return String(10 + Int(b) % 90)
    }

    public static func key(_ id: String) -> String { keyPrefix + id }
    public static let keyPrefix = "approval:"
    /// The composite advice that runs a request's approver journey (the approval page's Approve).
    public static let adviceName = "ApprovalRequestConditionAdvice"

    /// Sorted keys: the same record always encodes to the same bytes (the compare-and-swap
    /// compares bytes).
    public var encoded: [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array((try? encoder.encode(self)) ?? Data())
    }

    public static func decode(_ bytes: [UInt8]) -> ApprovalRequest? {
        try? JSONDecoder().decode(ApprovalRequest.self, from: Data(bytes))
    }

    public func isExpired(nowMs: Int64) -> Bool { nowMs >= expiresMs }

    /// Why a decision is refused.
    public enum Refusal: Error, Equatable, Sendable, CustomStringConvertible {
        /// No such request, or its record expired.
        case notFound
        /// Another user's request: they cannot decide it (nor learn more than that it is not theirs).
        case notYours
        case expired
        /// Decided already (by another device, or an earlier click).
        case alreadyDecided(State)

        public var description: String {
            switch self {
            case .notFound: return "no such approval request (or it has expired)"
            case .notYours: return "this approval request is for another user"
            case .expired: return "this approval request has expired"
            case .alreadyDecided(let s): return "this approval request was already \(s.rawValue)"
            }
        }
    }

    /// This request decided `outcome` (`.approved` or `.denied`) by `user` at `nowMs`, if it can be.
    public func deciding(_ outcome: State, by user: String, nowMs: Int64) -> Result<ApprovalRequest, Refusal> {
        precondition(outcome != .pending, "a decision approves or denies")
        guard user == subject else { return .failure(.notYours) }
        guard state == .pending else { return .failure(.alreadyDecided(state)) }
        guard !isExpired(nowMs: nowMs) else { return .failure(.expired) }
        var r = self
        r.state = outcome
        r.decidedMs = nowMs
        return .success(r)
    }
}

extension Store {
    /// Decides the approval request `id` for `user`: of concurrent callers (devices, gateways
    /// on one store), exactly one gets the decided record; each other one is told it was
    /// already decided, and how. A compare-and-swap over the pending record as read, retried
    /// only while the record keeps changing without being decided (it never does today).
    public func decideApproval(_ id: String, _ outcome: ApprovalRequest.State, by user: String, nowMs: Int64,
                               on executor: CallbackExecutor, attempts: Int = 3,
                               _ done: @escaping (StoreResult<Result<ApprovalRequest, ApprovalRequest.Refusal>>) -> Void) {
        let key = ApprovalRequest.key(id)
        get(key, on: executor) { [self] r in
            switch r {
            case .failure(let e):
                done(.failure(e))
            case .success(nil):
                done(.success(.failure(.notFound)))
            case .success(let bytes?):
                guard let request = ApprovalRequest.decode(bytes) else {
                    done(.failure(.failed("\(key.prefix(13))…: the approval request's record does not decode")))
                    return
                }
                let decided: ApprovalRequest
                switch request.deciding(outcome, by: user, nowMs: nowMs) {
                case .failure(let refusal): done(.success(.failure(refusal))); return
                case .success(let d): decided = d
                }
                compareAndSwap(key, expected: bytes, new: decided.encoded, ttlMs: nil, on: executor) { [self] swapped in
                    switch swapped {
                    case .failure(let e): done(.failure(e))
                    case .success(true): done(.success(.success(decided)))
                    case .success(false) where attempts > 1:
                        // Changed since read: decided by someone else (told on the next read), or gone.
                        decideApproval(id, outcome, by: user, nowMs: nowMs, on: executor, attempts: attempts - 1, done)
                    case .success(false):
                        done(.failure(.failed("\(key.prefix(13))…: the approval request's record kept changing; nothing was decided")))
                    }
                }
            }
        }
    }
}
