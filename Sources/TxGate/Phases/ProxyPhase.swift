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
        // Most upstreams have no path: the target goes as it is (`+` made a new string of it).
        ctx.suspend { ctx.proxy(target: basePath.isEmpty ? ctx.target : basePath + ctx.target, on: pool, $0) }
    }
}

/// A request on its way upstream and its response on the way back (`RequestContext.proxying`).
/// The context itself answers the upstream call: one object per proxied request fewer than
/// a handler of its own, which was allocated, retained as it was handed on, and freed.
struct Proxying: ~Copyable {
    /// How the request ends: the response streamed to its end, a failure, or the client gone.
    var resume: PhaseResume?
    var call: UpstreamCall?
    var sentAt: UInt64 = 0
    var paused = false
}

extension RequestContext: UpstreamResponseHandler {
    /// Above this much unsent output, stop reading the upstream until the client catches up.
    static let highWater = 1 << 20

    /// Sends the request upstream; `resume` ends the phase when the response has been streamed
    /// back, the call failed, or the client left. The exchange's callbacks (cleared when it ends)
    /// and the call hold the context until then.
    func proxy(target: String, on pool: UpstreamPool, _ resume: consuming PhaseResume) {
        proxying.resume = Optional(resume)
        let ex = exchange
        // Taken, not copied: nothing reads them after this (a resend uses the call's request).
        let headers = upstreamHeaders.take() ?? ForwardedFields(ex.head.headers)
        ex.onAbort = { self.clientGone() }
        ex.onWritable = { self.clientDrained() }
        proxying.sentAt = EventLoop.nowNanos()
        // A replayed parked request goes with its own method and body.
        let body = replay.map { Body($0.body) } ?? ex.body
        // A request that spends an approval goes upstream once, whatever its method.
        proxying.call = pool.send(method: method, target: target, headers: headers, body: body,
                                  resendable: consumedTxid == nil ? nil : false, handler: self)
    }

    func upstreamWillResend(after failure: UpstreamFailure) {
        upstreamResent(after: failure)
    }

    func upstreamResponseHead(_ head: ResponseHead, framing: BodyFraming) {
        upstreamNanos = EventLoop.nowNanos() - proxying.sentAt
        let out: ResponseFraming
        switch framing {
        case .none: out = .none
        case .contentLength(let n): out = .contentLength(n)
        case .chunked, .untilClose: out = .stream
        }
        let own = responseHeaders
        exchange.startResponse(status: head.status, reason: head.reason.isEmpty ? nil : head.reason, framing: out,
                               hasStrictTransportSecurity: head.headers.contains("Strict-Transport-Security")
                                   || own.contains("Strict-Transport-Security")) { w in
            ProxyHeaders.writeClientResponse(head.headers, requestId: requestId, keepContentLength: framing == .none,
                                             own: own, into: &w)
        }
    }

    func upstreamResponseBody(_ body: Body) {
        exchange.writeBody(body)
        pauseIfBehind()
    }

    func upstreamResponseBody(bytes: UnsafeRawBufferPointer) {
        exchange.writeBody(bytes: bytes)
        pauseIfBehind()
    }

    private func pauseIfBehind() {
        if !proxying.paused && exchange.pendingOutputBytes > Self.highWater {
            proxying.paused = true
            proxying.call?.pauseReading()
        }
    }

    func upstreamResponseEnd() {
        proxying.call = nil
        exchange.finish()
        proxying.resume.take()?.ended(.viaUpstream)
    }

    func upstreamFailed(_ failure: UpstreamFailure) {
        proxying.call = nil
        proxying.resume.take()?.fail(.upstream(failure))
    }

    private func clientDrained() {
        guard proxying.paused else { return }
        proxying.paused = false
        proxying.call?.resumeReading()
    }

    private func clientGone() {
        proxying.call?.cancel()
        proxying.call = nil
        proxying.resume.take()?.ended(.clientGone)
    }
}
