import EventHTTP
import HTTPCore
import TxGateCore
import TxGateCrypto

/// Defense in depth (`--txn-token-jwks`): a transfer runs only with a valid Transaction Token
/// from the gateway (ES256 with a key of its JWK Set, `typ` txntoken+jwt, `aud`, `exp`) whose
/// `tctx` approves exactly this body. The JWK Set is fetched on the loop, again when a token
/// names an unknown `kid` (at most every 10 s).
final class TxnTokenCheck: UpstreamResponseHandler {
    private let loop: EventLoop
    private let url: HTTPURL
    private let audience: String
    private var pool: UpstreamPool?
    private var keys: [String: ECPublicKey] = [:]
    private var waiting: [() -> Void] = []
    private var fetching = false
    private var lastFetch = 0
    private var received: [UInt8] = []
    private var status = 0
    /// The `txn` of each transfer executed, until its token expires: a token works once.
    private var used: [String: Int] = [:]

    init(loop: EventLoop, url: HTTPURL, audience: String) {
        self.loop = loop
        self.url = url
        self.audience = audience
    }

    /// nil when the transfer may run; else the status and why.
    func check(_ ex: ServerExchange, body: [UInt8], _ done: @escaping ((Int, String)?) -> Void) {
        guard let token = ex.head.headers.first("Txn-Token") else { done((401, "a transfer needs a Txn-Token")); return }
        guard let kid = JWS.unverifiedParts(token)?.header["kid"]?.stringValue else { done((401, "the Txn-Token is malformed")); return }
        let contentType = ex.head.headers.first("Content-Type")
        withKey(kid) { [self] in done(verify(token, body: body, contentType: contentType)) }
    }

    private func verify(_ token: String, body: [UInt8], contentType: String?) -> (Int, String)? {
        let v: JWS.Verified
        do {
            v = try JWS.verify(token, typ: "txntoken+jwt", now: WallClock.system.now, keys: { self.keys[$0] })
        } catch {
            return (401, "the Txn-Token is not valid: \(error.description)")
        }
        let aud = v.claims["aud"]
        guard aud?.stringValue == audience || aud?.arrayValue?.contains(.string(audience)) == true else {
            return (401, "the Txn-Token is for another audience")
        }
        guard case .object(let bound)? = v.claims["tctx"]?["bound"], !bound.isEmpty else {
            return (403, "the Txn-Token approves no transfer")
        }
        guard v.claims["tctx"]?["method"]?.stringValue == "POST" else { return (403, "the Txn-Token approves another method") }
        // The body read as the gateway read it when the user approved it (JSON or form).
        guard let values = TransactionBinding.boundValues(Array(bound.keys), body: body, contentType: contentType) else {
            return (403, "the body does not carry what the user approved (a JSON or form body with those fields)")
        }
        for (pointer, approved) in bound where values[pointer] != approved {
            return (403, "the body's \(pointer) differs from what the user approved")
        }
        let now = WallClock.system.now
        used = used.filter { $0.value > now }
        guard let txn = v.string("txn"), used[txn] == nil else { return (403, "this Txn-Token was already used") }
        used[txn] = v.int("exp") ?? now
        return nil
    }

    private func withKey(_ kid: String, _ then: @escaping () -> Void) {
        let now = WallClock.system.now
        guard keys[kid] == nil, now - lastFetch >= 10 || keys.isEmpty else { then(); return }
        waiting.append(then)
        guard !fetching else { return }
        fetching = true
        lastFetch = now
        received = []
        if pool == nil, let address = try? SocketAddress(host: url.host, port: url.port) {
            pool = UpstreamPool(loop: loop, endpoint: UpstreamEndpoint(address: address, tls: nil, tlsHost: url.host, connectTimeoutMs: 2000,
                                                                       responseTimeoutMs: 5000, maxIdle: 1))
        }
        var h = HTTPHeaders()
        h.add("Host", url.authority)
        h.add("Accept", "application/json")
        pool?.send(UpstreamRequest(method: "GET", target: url.basePath.isEmpty ? "/" : url.basePath, headers: h, body: nil), handler: self)
    }

    func upstreamResponseHead(_ head: ResponseHead, framing: BodyFraming) { status = head.status }
    func upstreamResponseBody(_ body: Body) {
        received += body.bytes
        body.removeAll()
    }
    func upstreamResponseEnd() {
        if status == 200, let set = PublishedKey.parseSet(received) {
            keys = Dictionary(set.map { ($0.kid, $0.key) }, uniquingKeysWith: { a, _ in a })
        }
        release()
    }
    func upstreamFailed(_ failure: UpstreamFailure) { release() }

    private func release() {
        fetching = false
        let all = waiting
        waiting = []
        for w in all { w() }
    }
}
