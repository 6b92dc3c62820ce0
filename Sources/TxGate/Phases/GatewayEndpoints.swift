import TxGateCore

/// The gateway's own endpoints under `/-/`, which is never proxied.
final class GatewayEndpointsPhase: RequestPhase {
    func handle(_ ctx: RequestContext) {
        let path = ctx.head.path
        if path == "/-/health" {
            guard ctx.head.method == "GET" || ctx.head.method == "HEAD" else {
                ctx.respondError(status: 405, message: "\(ctx.head.method) is not allowed on /-/health; use GET")
                return
            }
            let s = ctx.worker.shared
            ctx.respondJSON(status: 200, #"{"status":"ok","workers":\#(s.workerCount),"upstream":"\#(JSONText.escape(s.upstreamDescription))"}"#)
            return
        }
        if path.hasPrefix("/-/") {
            ctx.respondError(status: 404, message: "no gateway endpoint at \(path)")
            return
        }
        ctx.next()
    }
}
