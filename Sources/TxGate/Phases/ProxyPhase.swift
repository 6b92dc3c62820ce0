import EventHTTP
import HTTPCore
import Logging
import TxGateCore

/// The terminal phase of an allowed request: forward it upstream and stream the answer back.
struct ProxyPhase: RequestPhase {
    let pool: UpstreamPool
    /// The upstream URL's path, prefixed to every request.
    let basePath: String

    func handle(_ ctx: RequestContext) -> PhaseStatus {
        ctx.suspend { ProxiedRequest(ctx: ctx, target: basePath + ctx.target, $0).start(on: pool) }
    }
}

/// One request on its way upstream and its response on the way back. It stays alive through
/// the exchange's callbacks, which are cleared when the exchange ends.
final class ProxiedRequest: UpstreamResponseHandler {
    /// Above this much unsent output, stop reading the upstream until the client catches up.
    static let highWater = 1 << 20
    let ctx: RequestContext
    let target: String
    /// How the request ends: the response streamed to its end, a failure, or the client gone.
    private var resume: PhaseResume?
    private var call: UpstreamCall?
    private var sentAt: UInt64 = 0
    private var paused = false

    init(ctx: RequestContext, target: String, _ resume: consuming PhaseResume) {
        self.ctx = ctx
        self.target = target
        self.resume = Optional(resume)
    }

    func start(on pool: UpstreamPool) {
        let ex = ctx.exchange
        // Taken, not copied: nothing reads them after this (a resend uses the call's request).
        let headers = ctx.upstreamHeaders.take() ?? ForwardedFields(ex.head.headers)
        ex.onAbort = { self.clientGone() }
        ex.onWritable = { self.clientDrained() }
        sentAt = EventLoop.nowNanos()
        // A replayed parked request goes with its own method and body.
        let body = ctx.replay.map { Body($0.body) } ?? ex.body
        // A request that spends an approval goes upstream once, whatever its method.
        call = pool.send(method: ctx.method, target: target, headers: headers, body: body,
                         resendable: ctx.consumedTxid == nil ? nil : false, handler: self)
    }

    func upstreamWillResend(after failure: UpstreamFailure) {
        ctx.upstreamResent(after: failure)
    }

    func upstreamResponseHead(_ head: ResponseHead, framing: BodyFraming) {
        ctx.upstreamNanos = EventLoop.nowNanos() - sentAt
        let out: ResponseFraming
        switch framing {
        case .none: out = .none
        case .contentLength(let n): out = .contentLength(n)
        case .chunked, .untilClose: out = .stream
        }
        let own = ctx.responseHeaders
        ctx.exchange.startResponse(status: head.status, reason: head.reason.isEmpty ? nil : head.reason, framing: out,
                                   hasStrictTransportSecurity: head.headers.contains("Strict-Transport-Security")
                                       || own.contains("Strict-Transport-Security")) { w in
            ProxyHeaders.writeClientResponse(head.headers, requestId: ctx.requestId, keepContentLength: framing == .none,
                                             own: own, into: &w)
        }
    }

    func upstreamResponseBody(_ body: Body) {
        ctx.exchange.writeBody(body)
        pauseIfBehind()
    }

    func upstreamResponseBody(bytes: UnsafeRawBufferPointer) {
        ctx.exchange.writeBody(bytes: bytes)
        pauseIfBehind()
    }

    private func pauseIfBehind() {
        if !paused && ctx.exchange.pendingOutputBytes > Self.highWater {
            paused = true
            call?.pauseReading()
        }
    }

    func upstreamResponseEnd() {
        call = nil
        ctx.exchange.finish()
        resume.take()?.ended(.viaUpstream)
    }

    func upstreamFailed(_ failure: UpstreamFailure) {
        call = nil
        resume.take()?.fail(.upstream(failure))
    }

    private func clientDrained() {
        guard paused else { return }
        paused = false
        call?.resumeReading()
    }

    private func clientGone() {
        call?.cancel()
        call = nil
        resume.take()?.ended(.clientGone)
    }
}
