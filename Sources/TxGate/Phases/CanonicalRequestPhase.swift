import HTTPCore
import TxGateCore

/// The request every later phase and the upstream see must be unambiguous: exactly one
/// `Host` (HTTP/1.1 requires one; two let a backend pick another than the gateway did).
final class CanonicalRequestPhase: RequestPhase {
    func handle(_ ctx: RequestContext) {
        var hosts = 0
        for f in ctx.head.headers where asciiCaseInsensitiveEquals(f.name, "Host") { hosts += 1 }
        if hosts > 1 {
            ctx.fail(.badRequest("the request has \(hosts) Host headers; send exactly one"))
        } else if hosts == 0 && ctx.head.versionMinor >= 1 {
            ctx.fail(.badRequest("an HTTP/1.1 request needs a Host header"))
        } else {
            ctx.proceed()
        }
    }
}
