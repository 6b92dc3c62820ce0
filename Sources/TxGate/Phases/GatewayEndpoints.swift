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
            let base = #""workers":\#(s.workerCount),"upstream":"\#(JSONText.escape(s.upstreamDescription))""#
            guard let store = s.store else {
                ctx.respondJSON(status: 200, #"{"status":"ok",\#(base)}"#)
                return
            }
            // The store answers a ping, or the gateway says it cannot serve what needs state.
            store.ping(on: ctx.worker.loop) { r in
                switch r {
                case .success:
                    ctx.respondJSON(status: 200, #"{"status":"ok",\#(base),"store":"up"}"#)
                case .failure(let e):
                    ctx.respondJSON(status: 503, #"{"status":"degraded",\#(base),"store":"down","error":"\#(JSONText.escape(e.description))"}"#)
                }
            }
            return
        }
        if path.hasPrefix("/-/") {
            ctx.respondError(status: 404, message: "no gateway endpoint at \(path)")
            return
        }
        ctx.next()
    }
}
