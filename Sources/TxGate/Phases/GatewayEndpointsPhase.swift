import EventHTTP
import Logging
import TxGateCore

/// The gateway's own endpoints under `/-/`, which is never proxied.
struct GatewayEndpointsPhase: RequestPhase {
    private let store: Store?
    private let loop: EventLoop
    private let logger: Logger
    /// What `/-/ready` reports, checked in the background.
    private let readiness: Readiness
    /// `"version":"0.9.0","workers":N`, the same in every answer. Where the upstream and the store are is the
    /// operator's business: the log says it, not the public answer.
    private let members: String
    var appliesTo: PathFamily { .gateway }

    init(store: Store?, loop: EventLoop, workers: Int, readiness: Readiness, logger: Logger) {
        self.store = store
        self.readiness = readiness
        self.loop = loop
        self.logger = logger
        members = #""version":"\#(TxGateVersion.current)","workers":\#(workers)"#
    }

    func handle(_ ctx: RequestContext) -> PhaseStatus {
        let path = ctx.path
        guard path.hasASCIIPrefix("/-/") else { return .next }
        guard path == "/-/health" || path == "/-/ready" else {
            return .fail(.notFound("no gateway endpoint at \(path)"))
        }
        guard ctx.head.method == "GET" || ctx.head.method == "HEAD" else {
            return .fail(.methodNotAllowed("\(ctx.head.method) is not allowed on \(path); use GET"))
        }
        if path == "/-/ready" {
            let (status, body) = readiness.answer(members: members)
            return .reply(.json(status, body, details: .gatewayEndpoint))
        }
        return health(ctx)
    }

    /// Liveness: the store answers a ping, or the gateway says it cannot serve what needs state.
    private func health(_ ctx: RequestContext) -> PhaseStatus {
        guard let store else {
            return .reply(.json(200, #"{"status":"ok",\#(members)}"#, details: .gatewayEndpoint))
        }
        return ctx.suspend { resume in
            var resume = Optional(resume)
            store.ping(on: loop) { [members, logger] r in
                switch r {
                case .success:
                    resume.take()?.reply(.json(200, #"{"status":"ok",\#(members),"store":"up"}"#, details: .gatewayEndpoint))
                case .failure(let e):
                    logger.warning("health: store down", metadata: ["request_id": .string(ctx.requestId), "error": .string(e.description)])
                    resume.take()?.reply(.json(503, #"{"status":"degraded",\#(members),"store":"down"}"#, details: .gatewayEndpoint))
                }
            }
        }
    }
}
