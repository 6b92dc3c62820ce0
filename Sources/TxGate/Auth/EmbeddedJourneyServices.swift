import EventHTTP
import Foundation
import Logging
import TxGateCore
import TxGateCrypto

/// Runs password hashing off the event loops, a few at a time: scrypt is deliberately slow
/// and memory-hard, and must never stall a loop.
final class PasswordVerifier: Sendable {
    private let queue = OperationQueue()

    init() {
        queue.name = "txgate.kdf"
        queue.maxConcurrentOperationCount = max(2, CPUs.available)
    }

    func verify(_ password: String, encoded: String, on loop: EventLoop, _ done: @escaping (Bool) -> Void) {
        let done = LoopBound(done, loop: loop)
        queue.addOperation {
            CurrentThread.unpin()
            let ok = PasswordHash.verify(password, encoded: encoded)
            done.execute { $0(ok) }
        }
    }
}

/// Sends one email without blocking the loop; the completion runs on `loop`.
typealias EmailDelivery = @Sendable (_ email: OutgoingEmail, _ loop: EventLoop, _ done: @escaping (Result<Void, DeliveryError>) -> Void) -> Void

/// The journey nodes' I/O, for one worker: users from the configuration, counters and
/// one-time values in the store, hashing on the KDF threads.
final class EmbeddedJourneyServices: JourneyServices {
    let auth: AuthService
    let loop: EventLoop

    init(auth: AuthService, loop: EventLoop) {
        self.auth = auth
        self.loop = loop
    }

    private var store: Store { auth.store }
    private var security: SecurityConfig { auth.config.security }
    private var logger: Logger { auth.logger }

    var now: Int { auth.clock.now }

    func keyedDigest(_ value: [UInt8]) -> [UInt8] { Crypto.hmacSHA256(key: auth.codeKey, data: value) }

    var passkeyServices: PasskeyServices? {
        guard let (relyingParty, config) = auth.passkeys else { return nil }
        return PasskeyServices(passkeys: PasskeyStore(store: store, executor: loop), relyingParty: relyingParty, config: config)
    }

    func user(named name: String) -> UserRecord? { auth.users[name] }

    func verifyPassword(_ password: String, of user: UserRecord?, _ done: @escaping (Bool) -> Void) {
        // An unknown user costs one hash too, against a dummy, so that timing says nothing.
        let encoded = user?.passwordHash ?? PasswordHash.dummy
        auth.verifier.verify(password, encoded: encoded, on: loop) { ok in done(ok && user != nil) }
    }

    /// The counters an attempt by `who` goes to, each with its failure limit. Inside a
    /// session: that session only. Outside: the source (a few failures) and the account (many,
    /// for guessing spread over many sources). A source a trusted proxy could not name is
    /// counted by its account only (`Attempter.hasKnownSource`).
    func counters(_ who: Attempter) -> [(subject: String, limit: Int)] {
        if let session = who.session { return [("session:" + session, security.maxFailedAttempts)] }
        let account = ("user:" + who.user, security.maxFailedAttemptsPerUser)
        guard who.hasKnownSource else { return [account] }
        return [("source:" + who.source, security.maxFailedAttempts), account]
    }

    func isLockedOut(_ who: Attempter, _ done: @escaping (StoreResult<Bool>) -> Void) {
        anyLocked(lockKeys(who)[...], done)
    }

    /// The lockouts that stop `who`: one per counter.
    private func lockKeys(_ who: Attempter) -> [String] { counters(who).map { "lock:" + $0.subject } }

    private func anyLocked(_ keys: ArraySlice<String>, _ done: @escaping (StoreResult<Bool>) -> Void) {
        guard let key = keys.first else { done(.success(false)); return }
        store.get(key, on: loop) { [self] r in
            switch r {
            case .success(nil): anyLocked(keys.dropFirst(), done)
            default: done(r.map { $0 != nil })
            }
        }
    }

    func recordFailure(_ who: Attempter, _ done: @escaping (StoreResult<Int>) -> Void) {
        count(counters(who)[...], who, left: Int.max, done)
    }

    /// Counts the failure on each counter in turn; `left` is the fewest failures still allowed
    /// by the counters already counted.
    private func count(_ counters: ArraySlice<(subject: String, limit: Int)>, _ who: Attempter, left: Int,
                       _ done: @escaping (StoreResult<Int>) -> Void) {
        guard let (subject, limit) = counters.first else { done(.success(left)); return }
        store.increment("fail:" + subject, ttlMs: security.lockoutWindowS * 1000, on: loop) { [self] r in
            switch r {
            case .failure(let e): done(.failure(e))
            case .success(let n) where n >= limit:
                auth.metrics.lockouts.increment()
                logger.warning("locked out after repeated failures", metadata: [
                    "locked": .string(String(subject.prefix { $0 != ":" })), "user": .string(who.user),
                    "source": .string(who.source), "failures": .stringConvertible(n),
                    "lockout_s": .stringConvertible(security.lockoutDurationS),
                ])
                store.put("lock:" + subject, value: [1], ttlMs: security.lockoutDurationS * 1000, on: loop) { [self] r in
                    store.delete("fail:" + subject, on: loop) { _ in }
                    if case .failure(let e) = r { done(.failure(e)) } else { count(counters.dropFirst(), who, left: 0, done) }
                }
            case .success(let n):
                count(counters.dropFirst(), who, left: min(left, limit - n), done)
            }
        }
    }

    func sendEmail(_ message: OutgoingEmail, _ done: @escaping (Result<Void, DeliveryError>) -> Void) {
        guard let email = auth.emailDelivery else {
            logger.error("an email step ran but no email delivery is configured (set `email` in gateway.json)")
            done(.failure(DeliveryError("email is not configured")))
            return
        }
        email(message, loop) { [logger, metrics = auth.metrics] r in
            if case .failure = r { metrics.emailsFailed.increment() } else { metrics.emailsSent.increment() }
            if case .failure(let e) = r {
                logger.error("email delivery failed", metadata: ["error": .string(e.description)])
            }
            done(r)
        }
    }

    /// Emails asked for inside the user's own session count against the user; any other
    /// request (a magic link, a code for a login) against its source, so that nobody can spend
    /// another user's quota.
    func allowEmail(to username: String, requestedBy who: Attempter, _ done: @escaping (StoreResult<Bool>) -> Void) {
        // A source no proxy could name is everyone behind that proxy: its quota is the user's.
        let counter = who.session != nil || !who.hasKnownSource ? "emailrate:user:" + username : "emailrate:source:" + who.source
        store.increment(counter, ttlMs: security.emailWindowS * 1000, on: loop) { [self] r in
            if case .success(let n) = r, n > security.maxEmailsPerWindow {
                logger.warning("email rate limit reached", metadata: ["user": .string(username), "limit": .stringConvertible(security.maxEmailsPerWindow)])
            }
            done(r.map { $0 <= security.maxEmailsPerWindow })
        }
    }

    func save(_ key: String, _ value: [UInt8], ttlS: Int, _ done: @escaping (StoreResult<Void>) -> Void) {
        store.put(key, value: value, ttlMs: ttlS * 1000, on: loop, done)
    }

    func take(_ key: String, _ done: @escaping (StoreResult<[UInt8]?>) -> Void) {
        store.take(key, on: loop, done)
    }

    func acceptTOTPStep(_ step: UInt64, of username: String, unlessLockedOut who: Attempter,
                        _ done: @escaping (StoreResult<GuardedRaise>) -> Void) {
        store.raise(TOTPStepRecord.key(username), to: step, unlessPresent: lockKeys(who), on: loop, done)
    }

    // MARK: Approve elsewhere

    func saveApproval(_ request: ApprovalRequest, _ done: @escaping (StoreResult<Void>) -> Void) {
        // Kept a minute past its expiry: a late poll or page is told "expired", not "unknown".
        let ttlMs = Int(request.expiresMs - request.createdMs) + 60_000
        store.put(ApprovalRequest.key(request.id), value: request.encoded, ttlMs: ttlMs, on: loop) { [auth] r in
            if case .success = r {
                auth.metrics.approval(.created)
                auth.logger.info("approval request created", metadata: [
                    // A name as typed is logged only when it is an account (it may be a password).
                    "approval": .string(masked(request.id)), "user": .string(auth.users[request.subject] != nil ? request.subject : "-"),
                    "approver_journey": .string(request.approverJourney),
                ])
            }
            done(r)
        }
    }

    func readApproval(_ id: String, _ done: @escaping (StoreResult<ApprovalRequest?>) -> Void) {
        store.get(ApprovalRequest.key(id), on: loop) { r in done(r.map { $0.flatMap(ApprovalRequest.decode) }) }
    }

    func transaction(_ txid: String, _ done: @escaping (StoreResult<TransactionRecord?>) -> Void) {
        store.get(TransactionRecord.key(txid), on: loop) { r in done(r.map { $0.flatMap(TransactionRecord.decode) }) }
    }

    func notifyApproval(_ request: ApprovalRequest, channels kinds: [ApprovalChannelKind]) {
        let notice = ApprovalNotice(request, publicURL: auth.publicURL)
        for kind in kinds {
            guard let channel = channel(kind) else {
                auth.metrics.approvalDelivered(kind, ok: false)
                logger.error("approval request not sent: the channel is not configured", metadata: [
                    "approval": .string(masked(request.id)), "channel": .string(kind.rawValue),
                ])
                continue
            }
            channel.deliver(notice)
        }
    }

    /// This worker's channels, made when first used.
    private var channels: [ApprovalChannelKind: ApprovalChannel] = [:]

    private func channel(_ kind: ApprovalChannelKind) -> ApprovalChannel? {
        if let c = channels[kind] { return c }
        let made: ApprovalChannel?
        switch kind {
        case .email: made = auth.emailDelivery == nil ? nil : EmailApprovalChannel(auth: auth, services: self)
        case .webhook: made = auth.webhook.map { WebhookApprovalChannel(target: $0, auth: auth, loop: loop) }
        }
        channels[kind] = made
        return made
    }
}
