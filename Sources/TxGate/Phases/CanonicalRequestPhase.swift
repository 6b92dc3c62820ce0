import HTTPCore
import TxGateCore

/// The request every later phase and the upstream see must be unambiguous: exactly one
/// `Host` (HTTP/1.1 requires one; two let a backend pick another than the gateway did), and
/// one normalized path (`PathNormalizer`: dot segments removed, `//` merged, unreserved
/// escapes decoded, path parameters stripped; `%2F`, `\`, NUL, climbs above the root and
/// `..;` refused). Policies match that
/// path and the upstream receives it, so the backend never sees another path than the one
/// decided on.
struct CanonicalRequestPhase: RequestPhase {
    let paths: PathsConfig

    func handle(_ ctx: RequestContext) -> PhaseStatus {
        var hosts = 0
        ctx.head.headers.forEachRaw { if equalsLowercased($0.name, "host") { hosts += 1 } }
        if hosts > 1 {
            return .fail(.badRequest("the request has \(hosts) Host headers; send exactly one"))
        } else if hosts == 0 && ctx.head.versionMinor >= 1 {
            return .fail(.badRequest("an HTTP/1.1 request needs a Host header"))
        } else if let n = PathNormalizer.normalPathLength(ofTarget: ctx.head.target) {
            // The usual target, a normal path with or without a query: it goes upstream as
            // received, and the path is its first `n` bytes.
            let target = ctx.head.target
            ctx.path = n == target.utf8.count ? target : String(decoding: target.utf8.prefix(n), as: UTF8.self)
            ctx.target = target
            return .next
        } else if let target = Self.originForm(ctx.head.target) {
            return normalize(ctx, target)
        } else {
            return .fail(.badRequest("request target '\(ctx.head.target)' is not a path"))
        }
    }

    private func normalize(_ ctx: RequestContext, _ target: Substring) -> PhaseStatus {
        let q = target.utf8.firstIndex(of: UInt8(ascii: "?"))
        switch PathNormalizer.normalize(q.map { target[..<$0] } ?? target, encodedSlash: paths.encodedSlash,
                                       semicolon: paths.semicolon) {
        case .rejected(let why):
            return .fail(.badRequest("the request path is refused: \(why)"))
        case .path(let path):
            ctx.path = path
            ctx.target = q.map { path + target[$0...] } ?? path
            return .next
        }
    }

    /// The path and query of a request target (origin-form or absolute-form).
    static func originForm(_ target: String) -> Substring? {
        if target.utf8.first == UInt8(ascii: "/") { return target[...] }
        guard let schemeEnd = target.range(of: "://") else { return nil }
        let rest = target[schemeEnd.upperBound...]
        guard let slash = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) else { return "/" }
        let path = rest[slash...]
        return path.hasPrefix("?") ? "/" + path : path
    }
}
