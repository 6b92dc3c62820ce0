import EventHTTP
import HTTPCore
import Logging
import TxGateCore

/// Access tokens from other OpenID providers (`bearer.issuers`), on one worker's loop: each
/// issuer's JWK Set is fetched on the loop (never blocking it), kept, and fetched again when a
/// token names a `kid` it does not hold (at most every `refetchS`), so that the provider's key
/// rotation is followed. A token is a subject when its `iss` is configured, its signature
/// verifies (ES256 or RS256, as its key says), it has not expired and its `aud` names the
/// issuer's `audience`.
final class ExternalIssuers {
    private let loop: EventLoop
    private let clock: WallClock
    private let users: [String: UserRecord]
    private var byIssuer: [String: KeySet] = [:]
    static let refetchS = 30

    /// `endpoints`: where each issuer's JWK Set is fetched from (`endpoints(_:)`, built with the configuration).
    init(config: BearerConfig, endpoints: [String: UpstreamEndpoint], loop: EventLoop, clock: WallClock,
         users: [String: UserRecord], logger: Logger) {
        self.loop = loop
        self.clock = clock
        self.users = users
        for issuer in config.issuers {
            guard let endpoint = endpoints[issuer.issuer] else { continue }
            byIssuer[issuer.issuer] = KeySet(issuer: issuer, endpoint: endpoint, loop: loop, logger: logger)
        }
    }

    /// Each issuer's JWK Set endpoint: its address and TLS files, checked once per configuration
    /// (a start or a reload fails with the reason), before any worker builds its key sets.
    static func endpoints(_ config: BearerConfig) throws -> [String: UpstreamEndpoint] {
        var out: [String: UpstreamEndpoint] = [:]
        for issuer in config.issuers {
            let u = issuer.jwksUri
            do {
                let tls = u.isTLS ? try TLSContext.client(caFile: issuer.caFile) : nil
                out[issuer.issuer] = UpstreamEndpoint(address: try SocketAddress(host: u.host, port: u.port), tls: tls, tlsHost: u.host,
                                                      connectTimeoutMs: 2000, responseTimeoutMs: 5000, maxIdle: 1)
            } catch {
                throw SocketError("bearer.issuers '\(issuer.issuer)' jwksUri: \(error)")
            }
        }
        return out
    }

    var isEmpty: Bool { byIssuer.isEmpty }

    /// The subject a token from a configured issuer names, or nil (`done` runs on the loop,
    /// possibly after a JWK Set fetch).
    func subject(_ token: String, _ done: @escaping (Subject?, JWS.Verified?) -> Void) {
        guard let iss = JWS.unverifiedParts(token)?.claims["iss"]?.stringValue, let set = byIssuer[iss],
              let kid = JWS.unverifiedParts(token)?.header["kid"]?.stringValue else { done(nil, nil); return }
        set.withKey(kid, nowNanos: EventLoop.nowNanos()) { [self] in
            guard let v = try? JWS.verify(token, typ: nil, now: clock.now, key: { set.keys[$0] }),
                  Self.names(v.claims["aud"], set.issuer.audience),
                  let named = set.issuer.subject(claims: v.claims, localUsers: users) else { done(nil, nil); return }
            done(Subject(uid: named.uid, realm: "/", journeys: v.string("acr").map { [$0] } ?? [], attributes: named.attributes,
                         token: token, authTime: v.int("auth_time")), v)
        }
    }

    static func names(_ aud: JSONValue?, _ audience: String) -> Bool {
        aud?.stringValue == audience || aud?.arrayValue?.contains(.string(audience)) == true
    }
}

/// One issuer's keys and the fetch of its JWK Set.
private final class KeySet: UpstreamResponseHandler {
    let issuer: ExternalIssuer
    private(set) var keys: [String: JWSKey] = [:]
    private let loop: EventLoop
    private let endpoint: UpstreamEndpoint
    private let logger: Logger
    /// Made on the loop, at the first fetch (a pool belongs to the loop that uses it).
    private var pool: UpstreamPool?
    private var waiting: [() -> Void] = []
    private var fetching = false
    /// Monotonic, as every interval the gateway measures for itself: a wall clock stepped back
    /// would hold off the next fetch (and with it a rotated key) until it caught up again.
    private var lastFetchNanos: UInt64?
    private var received: [UInt8] = []
    private var status = 0

    init(issuer: ExternalIssuer, endpoint: UpstreamEndpoint, loop: EventLoop, logger: Logger) {
        self.issuer = issuer
        self.loop = loop
        self.logger = logger
        self.endpoint = endpoint
    }

    /// Runs `then` once the key `kid` is known, or once a fetch has been tried.
    func withKey(_ kid: String, nowNanos: UInt64, _ then: @escaping () -> Void) {
        let due = lastFetchNanos.map { nowNanos &- $0 >= UInt64(ExternalIssuers.refetchS) * 1_000_000_000 } ?? true
        guard keys[kid] == nil, due else { then(); return }
        waiting.append(then)
        guard !fetching else { return }
        fetching = true
        lastFetchNanos = nowNanos
        received = []
        var h = HTTPHeaders()
        h.add("Host", issuer.jwksUri.authority)
        h.add("Accept", "application/json")
        let target = issuer.jwksUri.basePath.isEmpty ? "/" : issuer.jwksUri.basePath
        if pool == nil { pool = UpstreamPool(loop: loop, endpoint: endpoint) }
        pool?.send(UpstreamRequest(method: "GET", target: target, headers: h, body: nil), handler: self)
    }

    func upstreamResponseHead(_ head: ResponseHead, framing: BodyFraming) { status = head.status }
    func upstreamResponseBody(_ body: Body) {
        if received.count < 1 << 20 { received += body.bytes }
        body.removeAll()
    }
    func upstreamResponseEnd() {
        if status == 200, let set = JWSKey.parseSet(received) {
            keys = set
        } else {
            logger.warning("external issuer's JWK Set not usable", metadata: [
                "issuer": .string(issuer.issuer), "jwks_uri": .string(issuer.jwksUri.description), "status": .stringConvertible(status),
            ])
        }
        release()
    }
    func upstreamFailed(_ failure: UpstreamFailure) {
        logger.warning("external issuer's JWK Set not fetched", metadata: [
            "issuer": .string(issuer.issuer), "jwks_uri": .string(issuer.jwksUri.description), "error": .string(failure.description),
        ])
        release()
    }

    private func release() {
        fetching = false
        let all = waiting
        waiting = []
        for w in all { w() }
    }
}
