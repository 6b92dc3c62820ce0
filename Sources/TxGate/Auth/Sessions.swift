import EventHTTP
import Foundation
import HTTPCore
import TxGateCore
import TxGateCrypto

/// A logged-in session as the store keeps it. The token itself is never stored: its key is
/// the SHA-256 of the token.
struct Session: Equatable {
    var uid: String
    var realm: String
    /// Unix seconds.
    var created: Int
    var touched: Int
    /// Journeys this session has completed (for step-up policies).
    var journeys: [String]
    /// When the user last completed a journey in this session (unix seconds): the OIDC
    /// `auth_time`, and what a policy's or a client's `max_age` is measured from.
    var authTime: Int?

    var lastAuthentication: Int { authTime ?? created }

    /// Seconds left of the session's absolute lifetime (`maxLifetimeS` from its creation) at
    /// `now`; none left (0 or less): the session is over, however recently it was used.
    func remainingLife(now: Int, maxLifetimeS: Int) -> Int { created + maxLifetimeS - now }

    /// Canonical JSON, as the store keeps it.
    var encoded: [UInt8] {
        JSONValue.object([
            "uid": .string(uid), "realm": .string(realm), "created": .number(Double(created)),
            "touched": .number(Double(touched)), "journeys": .array(journeys.map { .string($0) }),
            "authTime": authTime.map { .number($0) } ?? .null,
        ]).canonicalBytes
    }

    static func decode(_ bytes: [UInt8]) -> Session? {
        guard case .object(let o)? = JSONValue.parse(bytes), let uid = o["uid"]?.stringValue,
              let realm = o["realm"]?.stringValue, let created = o["created"]?.intValue,
              let touched = o["touched"]?.intValue, let journeys = o["journeys"]?.arrayValue else { return nil }
        let names = journeys.compactMap(\.stringValue)
        guard names.count == journeys.count else { return nil }
        return Session(uid: uid, realm: realm, created: created, touched: touched, journeys: names, authTime: o["authTime"]?.intValue)
    }
}

/// Creates, finds and ends sessions in the store.
final class SessionManager: Sendable {
    let store: Store
    let config: SessionConfig
    let secureCookie: Bool
    /// Sessions read in the last second, one table per loop (`SessionCache`: the bound, and
    /// what invalidates).
    let cache = SessionCache()
    /// Sliding expiry is written at most this often, not on every request.
    static let touchIntervalS = 60

    init(store: Store, config: SessionConfig, secureCookie: Bool) {
        self.store = store
        self.config = config
        self.secureCookie = secureCookie
    }

    static func key(_ token: String) -> String {
        token.withUTF8Bytes { Crypto.sha256Hex(UnsafeRawBufferPointer($0), prefix: "session:") }
    }

    /// A token as AM sends it: in the header named after the cookie, or in the cookie.
    func token(in headers: HTTPHeaders) -> String? { Self.token(in: headers, cookieName: config.cookieName) }

    /// The token in the header named after the cookie, else in the cookie.
    static func token(in headers: HTTPHeaders, cookieName: String) -> String? {
        if let t = headers.first(cookieName), !t.isEmpty { return t }
        for cookie in headers.values("Cookie") {
            for pair in cookie.split(byte: UInt8(ascii: ";")) {
                let kv = pair.split(byte: UInt8(ascii: "="), maxSplits: 1)
                if kv.count == 2, kv[0].trimmingOWS() == cookieName {
                    let v = kv[1].trimmingOWS()
                    if !v.isEmpty { return v }
                }
            }
        }
        return nil
    }

    func create(uid: String, realm: String, journey: String, now: Int, on loop: EventLoop,
                _ done: @escaping (StoreResult<String>) -> Void) {
        let token = Base64URL.encode(Crypto.randomBytes(32))
        let s = Session(uid: uid, realm: realm, created: now, touched: now, journeys: [journey])
        let value = s.encoded
        store.create(Self.key(token), value: value, ttlMs: config.idleTimeoutS * 1000, on: loop) { r in
            switch r {
            case .success(true): done(.success(token))
            case .success(false): done(.failure(.failed("session token collision")))
            case .failure(let e): done(.failure(e))
            }
        }
    }

    /// The live session for `token`, sliding its idle expiry; nil if unknown or expired.
    /// A session read less than a second ago is answered from `loop`'s table of `cache`
    /// (`shard`, when the caller keeps it), without the store.
    func lookup(_ token: String, now: Int, on loop: EventLoop, shard: SessionCache.Shard? = nil,
                _ done: @escaping (StoreResult<Session?>) -> Void) {
        let shard = shard ?? cache.shard(for: loop)
        if let s = recent(token, now: now, in: shard) {
            done(.success(s))
            return
        }
        let key = Self.key(token)
        // Before the read: a logout on another worker while it is in flight must not be undone.
        let generation = shard.generation()
        store.get(key, on: loop) { [self] r in
            switch r {
            case .failure(let e): done(.failure(e))
            case .success(nil): done(.success(nil))
            case .success(let bytes?):
                guard var s = Session.decode(bytes) else {
                    done(.success(nil))
                    return
                }
                let remainingLife = s.remainingLife(now: now, maxLifetimeS: config.maxLifetimeS)
                if remainingLife <= 0 {
                    store.delete(key, on: loop) { _ in done(.success(nil)) }
                    return
                }
                if now - s.touched >= Self.touchIntervalS {
                    s.touched = now
                    let value = s.encoded
                    // Only over what was read: a concurrent change (a step-up recorded on another
                    // instance, a logout) wins over this refresh.
                    store.compareAndSwap(key, expected: bytes, new: value, ttlMs: min(config.idleTimeoutS, remainingLife) * 1000,
                                         on: loop) { _ in }
                }
                shard.put(token, storeKey: key, s, now: now, readSince: generation)
                done(.success(s))
            }
        }
    }

    /// The session for `token` if it was read less than a second ago (`shard`, a loop's table of
    /// `cache`) and is still within its lifetime; nil means: look it up.
    func recent(_ token: String, now: Int, in shard: SessionCache.Shard) -> Session? {
        guard let s = shard.get(token, now: now), s.remainingLife(now: now, maxLifetimeS: config.maxLifetimeS) > 0 else { return nil }
        return s
    }

    /// `recent`'s session as the policies' subject, made by `make` once per cached read.
    func recentSubject(_ token: String, now: Int, in shard: SessionCache.Shard, make: (Session) -> Subject) -> Subject? {
        shard.subject(token, now: now, maxLifetimeS: config.maxLifetimeS, make: make)
    }

    /// Whether the session stored under `key` is still live and `uid`'s (not logged out, not
    /// expired): what an approver journey checks before its approval counts.
    func isLive(key: String, uid: String, now: Int, on loop: EventLoop, _ done: @escaping (StoreResult<Bool>) -> Void) {
        store.get(key, on: loop) { [config] r in
            done(r.map { bytes in
                guard let bytes, let s = Session.decode(bytes) else { return false }
                return s.uid == uid && s.remainingLife(now: now, maxLifetimeS: config.maxLifetimeS) > 0
            })
        }
    }

    /// Records a completed step-up journey on the session. False if the session is gone.
    func addJourney(_ journey: String, toSessionKey key: String, uid: String, now: Int, on loop: EventLoop,
                    _ done: @escaping (StoreResult<Bool>) -> Void) {
        cache.invalidate(storeKey: key)
        store.get(key, on: loop) { [self] r in
            switch r {
            case .failure(let e): done(.failure(e))
            case .success(nil): done(.success(false))
            case .success(let bytes?):
                guard var s = Session.decode(bytes), s.uid == uid else {
                    done(.success(false))
                    return
                }
                if !s.journeys.contains(journey) { s.journeys.append(journey) }
                s.touched = now
                s.authTime = now
                let value = s.encoded
                let remaining = max(1, min(config.idleTimeoutS, s.remainingLife(now: now, maxLifetimeS: config.maxLifetimeS)))
                store.compareAndSwap(key, expected: bytes, new: value, ttlMs: remaining * 1000, on: loop) { [cache] r in
                    // A lookup between the invalidation and this write may have cached the old record.
                    cache.invalidate(storeKey: key)
                    done(r)
                }
            }
        }
    }

    func delete(_ token: String, on loop: EventLoop, _ done: @escaping (StoreResult<Bool>) -> Void) {
        let key = Self.key(token)
        cache.invalidate(storeKey: key)
        store.delete(key, on: loop) { [cache] r in
            cache.invalidate(storeKey: key)
            done(r)
        }
    }

    func setCookie(_ token: String) -> String {
        "\(config.cookieName)=\(token); Path=/; HttpOnly; SameSite=\(config.sameSite)" + (secureCookie ? "; Secure" : "")
    }

    func clearCookie() -> String {
        "\(config.cookieName)=; Path=/; Max-Age=0; HttpOnly; SameSite=\(config.sameSite)" + (secureCookie ? "; Secure" : "")
    }
}

/// Secrets in logs: enough to correlate, never enough to use.
func masked(_ secret: String) -> String {
    secret.count <= 8 ? "****" : String(secret.prefix(4)) + "…" + "(\(secret.count))"
}

