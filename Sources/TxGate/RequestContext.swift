import EventHTTP
import HTTPCore
import Logging
import TxGateCore

/// Everything one request carries through the phases (as Pingora's per-request context).
final class RequestContext {
    let exchange: ServerExchange
    let worker: Worker
    let requestId: String
    var phaseIndex = 0
    /// Time from sending upstream to the response head, when the request was proxied.
    var upstreamNanos: UInt64?
    /// The target sent upstream, once the policy phase has removed `_txid`/`_idtoken`.
    var upstreamTarget: String?
    /// The session the policy phase identified.
    var subject: Subject?
    private var logged = false

    init(exchange: ServerExchange, worker: Worker, requestId: String) {
        self.exchange = exchange
        self.worker = worker
        self.requestId = requestId
    }

    var head: RequestHead { exchange.head }

    /// Hands the request to the next phase.
    func next() { worker.pipeline.run(self) }

    func respond(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8]) {
        var h = headers
        h.add("X-Request-Id", requestId)
        exchange.respond(status: status, headers: h, body: body)
        logAccess()
    }

    func respondJSON(status: Int, _ json: String, headers: HTTPHeaders = HTTPHeaders()) {
        var h = headers
        h.add("Content-Type", "application/json")
        respond(status: status, headers: h, body: Array(json.utf8))
    }

    /// The gateway's JSON error: `{"code":N,"reason":"...","message":"..."}`.
    func respondError(status: Int, message: String) {
        var h = HTTPHeaders()
        h.add("Content-Type", ErrorBody.contentType)
        respond(status: status, headers: h, body: ErrorBody.json(status: status, message: message))
    }

    /// One access-log line per request, written once, when the response ends or the client leaves.
    func logAccess() {
        guard !logged else { return }
        logged = true
        guard worker.shared.accessLog else { return }
        let now = EventLoop.nowNanos()
        var md: Logger.Metadata = [
            "request_id": .string(requestId),
            "method": .string(head.method),
            "path": .string(String(head.path)),
            "status": .stringConvertible(exchange.responseStarted ? exchange.status : 499),
            "bytes": .stringConvertible(exchange.bodyBytesSent),
            "duration_ms": .stringConvertible(Self.ms(now - exchange.startNanos)),
            "client": .string(exchange.remoteIP),
        ]
        if let u = upstreamNanos { md["upstream_ms"] = .stringConvertible(Self.ms(u)) }
        if let s = subject { md["user"] = .string(s.uid) }
        worker.shared.accessLogger.info("access", metadata: md)
    }

    static func ms(_ nanos: UInt64) -> Double { (Double(nanos) / 1_000).rounded() / 1_000 }
}

/// A step of request handling. It either answers the request or calls `ctx.next()`, now or
/// later (when an asynchronous lookup completes on the same loop).
protocol RequestPhase: AnyObject {
    func handle(_ ctx: RequestContext)
}

final class Pipeline {
    let phases: [RequestPhase]
    init(_ phases: [RequestPhase]) { self.phases = phases }

    func run(_ ctx: RequestContext) {
        guard ctx.phaseIndex < phases.count else {
            ctx.respondError(status: 500, message: "no phase answered the request")
            return
        }
        let phase = phases[ctx.phaseIndex]
        ctx.phaseIndex += 1
        phase.handle(ctx)
    }
}
