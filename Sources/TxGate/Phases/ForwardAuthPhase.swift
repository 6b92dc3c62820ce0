import HTTPCore
import TxGateCore

/// `/-/authz` (WIRE.md §10): a proxy in front (nginx `auth_request`, Traefik `forwardAuth`)
/// asks whether the request it holds may pass. Only `forwardAuth.trustedProxies` may ask. The
/// original method and target replace the request's own, and the usual phases decide on them;
/// `ForwardAuthAnswerPhase` then answers 200 instead of proxying.
struct ForwardAuthPhase: RequestPhase {
    static let path = "/-/authz"
    var appliesTo: PathFamily { .gateway }
    let config: ForwardAuthConfig
    let paths: PathsConfig

    func handle(_ ctx: RequestContext) -> PhaseStatus {
        guard ctx.path == Self.path else { return .next }
        // The peer itself, never X-Forwarded-For: the proxy is the one asking.
        guard let ip = IPAddress(ctx.exchange.remoteIP), config.trustedProxies.trusts(ip) else {
            return .fail(.forbidden("only forwardAuth.trustedProxies may ask \(Self.path)"))
        }
        let original: ForwardedRequest
        switch ForwardedRequest.parse(ctx.head.headers, fallbackMethod: ctx.head.method) {
        case .failure(let e): return .fail(.badRequest(e.reason))
        case .success(let r): original = r
        }
        let q = original.target.firstIndex(of: "?")
        switch PathNormalizer.normalize(original.target[..<(q ?? original.target.endIndex)], encodedSlash: paths.encodedSlash,
                                       semicolon: paths.semicolon) {
        case .rejected(let why):
            return .fail(.badRequest("the original request path is refused: \(why)"))
        case .path(let path):
            ctx.path = path
            ctx.target = q.map { path + original.target[$0...] } ?? path
            ctx.forwardedMethod = original.method
            ctx.forwardedBy = original.proxy
            return .next
        }
    }
}

/// The proxy's answer when the decision allows the original request: 200 with the user's name
/// (a transaction named by the request was consumed by this answer). Other requests go on.
struct ForwardAuthAnswerPhase: RequestPhase {
    func handle(_ ctx: RequestContext) -> PhaseStatus {
        guard ctx.forwardedBy != nil else { return .next }
        var h = HTTPHeaders()
        h.add("Cache-Control", "no-store")
        if let s = ctx.subject { h.add("X-TxGate-User", s.uid) }
        return .reply(LocalReply(status: 200, headers: h, details: .forwardAuthAllowed))
    }
}
