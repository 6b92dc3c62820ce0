import EventHTTP
import Foundation
import Logging
import TxGateCore
import TxGateCrypto

/// Runs password hashing off the event loops, a few at a time: scrypt is deliberately slow
/// and memory-hard, and must never stall a loop.
final class PasswordVerifier: @unchecked Sendable {
    private let queue = OperationQueue()

    init() {
        queue.name = "txgate.kdf"
        queue.maxConcurrentOperationCount = max(2, ProcessInfo.processInfo.activeProcessorCount)
    }

    func verify(_ password: String, encoded: String, on loop: EventLoop, _ done: @escaping (Bool) -> Void) {
        queue.addOperation {
            let ok = PasswordHash.verify(password, encoded: encoded)
            loop.execute { done(ok) }
        }
    }
}

/// Sends one email without blocking the loop; the completion runs on `loop`.
typealias EmailDelivery = @Sendable (_ email: OutgoingEmail, _ loop: EventLoop, _ done: @escaping (Result<Void, DeliveryError>) -> Void) -> Void

/// The journey nodes' I/O, for one worker: users from the configuration, counters and
/// one-time values in the store, hashing on the KDF threads.
final class EmbeddedJourneyServices: JourneyServices {
    let loop: EventLoop
    let store: Store
    let users: [String: UserRecord]
    let security: SecurityConfig
    let verifier: PasswordVerifier
    let email: EmailDelivery?
    let clock: WallClock
    let codeKey: [UInt8]
    let logger: Logger

    init(loop: EventLoop, store: Store, users: [String: UserRecord], security: SecurityConfig,
         verifier: PasswordVerifier, email: EmailDelivery?, clock: WallClock, codeKey: [UInt8], logger: Logger) {
        self.codeKey = codeKey
        self.email = email
        self.clock = clock
        self.loop = loop
        self.store = store
        self.users = users
        self.security = security
        self.verifier = verifier
        self.logger = logger
    }

    var now: Int { clock.now }

    func keyedDigest(_ value: [UInt8]) -> [UInt8] { Crypto.hmacSHA256(key: codeKey, data: value) }

    func user(named name: String) -> UserRecord? { users[name] }

    func verifyPassword(_ password: String, of user: UserRecord?, _ done: @escaping (Bool) -> Void) {
        // An unknown user costs one hash too, against a dummy, so that timing says nothing.
        let encoded = user?.passwordHash ?? PasswordHash.dummy
        verifier.verify(password, encoded: encoded, on: loop) { ok in done(ok && user != nil) }
    }

    func isLockedOut(_ username: String, _ done: @escaping (StoreResult<Bool>) -> Void) {
        store.get("lock:" + username, on: loop) { r in done(r.map { $0 != nil }) }
    }

    func recordFailure(_ username: String, _ done: @escaping (StoreResult<Void>) -> Void) {
        store.increment("fail:" + username, ttlMs: security.lockoutWindowS * 1000, on: loop) { [self] r in
            switch r {
            case .failure(let e): done(.failure(e))
            case .success(let count) where count >= security.maxFailedAttempts:
                logger.warning("user locked out after repeated failures", metadata: [
                    "user": .string(username), "failures": .stringConvertible(count),
                    "lockout_s": .stringConvertible(security.lockoutDurationS),
                ])
                store.put("lock:" + username, value: [1], ttlMs: security.lockoutDurationS * 1000, on: loop) { r in
                    self.store.delete("fail:" + username, on: self.loop) { _ in }
                    done(r)
                }
            case .success:
                done(.success(()))
            }
        }
    }

    func sendEmail(_ message: OutgoingEmail, _ done: @escaping (Result<Void, DeliveryError>) -> Void) {
        guard let email else {
            logger.error("an email step ran but no email delivery is configured (set `email` in gateway.json)")
            done(.failure(DeliveryError("email is not configured")))
            return
        }
        email(message, loop) { [logger] r in
            if case .failure(let e) = r {
                logger.error("email delivery failed", metadata: ["error": .string(e.description)])
            }
            done(r)
        }
    }

    func allowEmail(to username: String, _ done: @escaping (StoreResult<Bool>) -> Void) {
        store.increment("emailrate:" + username, ttlMs: security.emailWindowS * 1000, on: loop) { [self] r in
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

    func claimOnce(_ key: String, ttlS: Int, _ done: @escaping (StoreResult<Bool>) -> Void) {
        store.create("once:" + key, value: [1], ttlMs: ttlS * 1000, on: loop, done)
    }
}
