import EventHTTP
import HTTPCore
import Logging
import TxGateCore

/// The terminal phase of an allowed request: forward it upstream and stream the answer back.
final class ProxyPhase: RequestPhase {
    func handle(_ ctx: RequestContext) {
        guard let target = Self.originForm(ctx.upstreamTarget ?? ctx.head.target) else {
            ctx.respondError(status: 400, message: "request target '\(ctx.head.target)' is not a path")
            return
        }
        ProxiedRequest(ctx: ctx, target: ctx.worker.shared.upstreamBasePath + target).start()
    }

    /// The path and query of a request target (origin-form or absolute-form).
    static func originForm(_ target: String) -> String? {
        if target.hasPrefix("/") { return target }
        if target == "*" { return target }
        guard let schemeEnd = target.range(of: "://") else { return nil }
        let rest = target[schemeEnd.upperBound...]
        guard let slash = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) else { return "/" }
        let path = String(rest[slash...])
        return path.hasPrefix("?") ? "/" + path : path
    }
}

/// One request on its way upstream and its response on the way back. It stays alive through
/// the exchange's callbacks, which are cleared when the exchange ends.
final class ProxiedRequest: UpstreamResponseHandler {
    /// Above this much unsent output, stop reading the upstream until the client catches up.
    static let highWater = 1 << 20
    let ctx: RequestContext
    let target: String
    private var call: UpstreamCall?
    private var sentAt: UInt64 = 0
    private var paused = false

    init(ctx: RequestContext, target: String) {
        self.ctx = ctx
        self.target = target
    }

    func start() {
        let ex = ctx.exchange
        let shared = ctx.worker.shared
        var headers = ProxyHeaders.upstreamRequest(ex.head.headers, clientIP: ex.remoteIP, isTLS: ex.isTLS,
                                                   upstreamAuthority: shared.upstreamAuthority, requestId: ctx.requestId)
        if let auth = shared.auth {
            ProxyHeaders.removeGatewayCredentials(&headers, cookieName: auth.config.session.cookieName,
                                                  bearerToken: ctx.subject?.token)
        }
        ex.onAbort = { self.clientGone() }
        ex.onWritable = { self.clientDrained() }
        sentAt = EventLoop.nowNanos()
        call = ctx.worker.pool.send(UpstreamRequest(method: ex.head.method, target: target, headers: headers, body: ex.body),
                                    handler: self)
    }

    func upstreamResponseHead(_ head: ResponseHead, framing: BodyFraming) {
        ctx.upstreamNanos = EventLoop.nowNanos() - sentAt
        let headers = ProxyHeaders.clientResponse(head.headers, requestId: ctx.requestId, keepContentLength: framing == .none)
        let out: ResponseFraming
        switch framing {
        case .none: out = .none
        case .contentLength(let n): out = .contentLength(n)
        case .chunked, .untilClose: out = .stream
        }
        ctx.exchange.startResponse(status: head.status, reason: head.reason.isEmpty ? nil : head.reason,
                                   headers: headers, framing: out)
    }

    func upstreamResponseBody(_ body: Body) {
        ctx.exchange.writeBody(body)
        if !paused && ctx.exchange.pendingOutputBytes > Self.highWater {
            paused = true
            call?.pauseReading()
        }
    }

    func upstreamResponseEnd() {
        call = nil
        ctx.exchange.finish()
        ctx.logAccess()
    }

    func upstreamFailed(_ failure: UpstreamFailure) {
        call = nil
        ctx.worker.shared.logger.warning("upstream request failed", metadata: [
            "request_id": .string(ctx.requestId), "error": .string(failure.description),
            "upstream": .string(ctx.worker.shared.upstreamDescription),
        ])
        if ctx.exchange.responseStarted {
            // Too late for an error response: cut the connection so the client sees a truncated body.
            ctx.exchange.abort()
            ctx.logAccess()
        } else {
            ctx.respondError(status: failure.status, message: failure.description)
        }
    }

    private func clientDrained() {
        guard paused else { return }
        paused = false
        call?.resumeReading()
    }

    private func clientGone() {
        call?.cancel()
        call = nil
        ctx.logAccess()
    }
}
