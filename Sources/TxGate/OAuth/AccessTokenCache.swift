import EventHTTP
import TxGateCore

/// One worker's access tokens already verified, so that a client sending the same token on
/// every request pays one ES256 verification (tens of µs of CPU), not one per request. Only
/// verified tokens are kept, each until its own `exp`; the cache is emptied when full (a token
/// that does not verify is never kept, so garbage cannot evict anything for long). Confined to
/// its worker's loop: no locks.
final class AccessTokenCache {
    private let provider: OAuthProvider
    private let loop: EventLoop
    private let capacity: Int
    private var verified: [String: JWS.Verified] = [:]

    init(provider: OAuthProvider, loop: EventLoop, capacity: Int = 10_000) {
        self.provider = provider
        self.loop = loop
        self.capacity = capacity
    }

    /// The verified token (from the cache while it has not expired), or nil if it does not verify.
    func verify(_ token: String, now: Int) -> JWS.Verified? {
        loop.preconditionInEventLoop()
        if let v = verified[token] {
            if let exp = v.int("exp"), exp > now { return v }
            verified[token] = nil
        }
        guard let v = try? provider.verifyAccessToken(token, now: now) else { return nil }
        if verified.count >= capacity { verified.removeAll(keepingCapacity: true) }
        verified[token] = v
        return v
    }

    func subject(_ v: JWS.Verified, token: String) -> Subject { provider.subject(v, token: token) }

    /// Whether the token's audience is the resource `path` is under (`OAuthProvider.tokenFits`).
    func fits(_ v: JWS.Verified, path: Substring) -> Bool { provider.tokenFits(v, path: path) }
}
