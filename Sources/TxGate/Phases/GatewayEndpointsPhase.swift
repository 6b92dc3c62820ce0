import EventHTTP
import TxGateCore

/// The gateway's own endpoints under `/-/`, which is never proxied.
final class GatewayEndpointsPhase: RequestPhase {
    private let store: Store?
    private let loop: EventLoop
    /// `"workers":N,"upstream":"..."`, the same in every answer.
    private let members: String

    init(store: Store?, loop: EventLoop, workers: Int, upstream: String) {
        self.store = store
        self.loop = loop
        members = #""workers":\#(workers),"upstream":"\#(JSONText.escape(upstream))""#
    }

    func handle(_ ctx: RequestContext) {
        let path = ctx.path
        guard path.hasPrefix("/-/") else { ctx.proceed(); return }
        guard path == "/-/health" else {
            ctx.fail(.notFound("no gateway endpoint at \(path)"))
            return
        }
        guard ctx.head.method == "GET" || ctx.head.method == "HEAD" else {
            ctx.fail(.methodNotAllowed("\(ctx.head.method) is not allowed on /-/health; use GET"))
            return
        }
        health(ctx)
    }

    /// The store answers a ping, or the gateway says it cannot serve what needs state.
    private func health(_ ctx: RequestContext) {
        guard let store else {
            ctx.respondJSON(status: 200, #"{"status":"ok",\#(members)}"#)
            return
        }
        store.ping(on: loop) { [members] r in
            switch r {
            case .success:
                ctx.respondJSON(status: 200, #"{"status":"ok",\#(members),"store":"up"}"#)
            case .failure(let e):
                ctx.respondJSON(status: 503, #"{"status":"degraded",\#(members),"store":"down","error":"\#(JSONText.escape(e.description))"}"#)
            }
        }
    }
}
