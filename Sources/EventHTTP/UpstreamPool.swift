import HTTPCore

/// The keep-alive connections from one loop to one upstream. Confined to that loop, like
/// its calls and connections (checked in debug builds).
public final class UpstreamPool {
    public let loop: EventLoop
    /// The loop's head writer, for the requests its connections send. Unowned and unchecked:
    /// the loop, held above, owns it; `loop.heads` retained and released it at every request.
    unowned(unsafe) let heads: HeadScratch
    public let endpoint: UpstreamEndpoint
    private var idle: [UpstreamConnection] = []
    /// Connections open (connecting, busy or idle).
    private var open = 0
    /// The most connections busy at once in this second and in the one before (`busyPeak`).
    private var peakNow = 0
    private var peakBefore = 0
    private var peakSince: UInt64 = 0
    /// Told for each request sent: true when it went on a kept-alive connection (for metrics).
    public var onDispatch: ((_ reused: Bool) -> Void)?

    public init(loop: EventLoop, endpoint: UpstreamEndpoint) {
        loop.preconditionInEventLoop()
        self.loop = loop
        heads = loop.heads
        self.endpoint = endpoint
    }

    public var idleCount: Int { idle.count }

    /// `send` with the request's parts (the proxy's hot path): a request built by the caller and
    /// passed whole was copied and the original destroyed, across the module boundary, each of
    /// its fields retained and released once more.
    public func send(method: consuming String, target: consuming String, headers: consuming ForwardedFields, body: consuming Body?,
                     resendable: Bool?, handler: UpstreamResponseHandler) -> UpstreamCall {
        loop.preconditionInEventLoop()
        let call = UpstreamCall(loop: loop, method: method, target: target, headers: headers, body: body,
                                resendable: resendable ?? UpstreamRequest.isIdempotent(method), handler: handler)
        dispatch(call, fresh: false)
        return call
    }

    @discardableResult
    public func send(_ request: consuming UpstreamRequest, handler: UpstreamResponseHandler) -> UpstreamCall {
        send(method: request.method, target: request.target, headers: ForwardedFields(request.headers), body: request.body,
             resendable: request.resendable, handler: handler)
    }

    func dispatch(_ call: UpstreamCall, fresh: Bool) {
        let now = EventLoop.coarseNanos()
        if !fresh, let c = takeIdle(resendable: call.resendable, now: now) {
            onDispatch?(true)
            noteBusy(now)
            c.start(call)
            return
        }
        onDispatch?(false)
        guard let c = UpstreamConnection(pool: self) else {
            call.finish(.connectFailed("cannot create a socket"))
            return
        }
        noteBusy(now)
        c.start(call)
    }

    /// How many idle connections the pool keeps: `maxIdle` (`upstream.keepAlive`), or, when more
    /// were busy at once within the last second or two, that many. Under a steady load of N
    /// concurrent requests, a connection that finishes one goes back to the pool for the next
    /// instead of being closed while another is opened (nginx's `keepalive N` closes it); when
    /// the load falls, the extra idle connections are closed as connections are released.
    var keep: Int { max(endpoint.maxIdle, peakNow, peakBefore) }

    private func noteBusy(_ now: UInt64) {
        if now &- peakSince >= 1_000_000_000 {
            (peakBefore, peakNow, peakSince) = (peakNow, 0, now)
        }
        peakNow = max(peakNow, open - idle.count)
    }

    func opened() { open += 1 }
    func closed() { open -= 1 }

    /// The most recently released idle connection a request may go on (`resendable`: whether
    /// it may be re-sent), closing those it may not. One idle for longer than `idleTimeoutMs`
    /// is closed, with every one below it (released earlier, so older still): the upstream may
    /// be closing it right now. For a request that may not be re-sent, a connection whose
    /// socket already shows the upstream's close (or stray bytes) is closed too: a read the loop
    /// has not delivered yet would otherwise turn into a lost request. That check is one
    /// `recv(MSG_PEEK)`, paid only by such requests; a resendable one goes out and is re-sent
    /// if the connection was stale.
    private func takeIdle(resendable: Bool, now: UInt64) -> UpstreamConnection? {
        guard !idle.isEmpty else { return nil }
        let limit = UInt64(endpoint.idleTimeoutMs) * 1_000_000
        while let c = idle.popLast() {
            if now &- c.idleSince > limit {
                let older = idle
                idle.removeAll()
                c.close()
                for o in older { o.close() }
                return nil
            }
            if resendable || c.isQuiet() { return c }
            c.close()
        }
        return nil
    }

    func release(_ c: UpstreamConnection) {
        let keep = keep
        guard idle.count < keep else {
            c.close()
            // The load fell: the oldest idle connections beyond what is kept go too.
            while idle.count > keep { idle.removeFirst().close() }
            return
        }
        idle.append(c)
        c.becomeIdle()
    }

    func forget(_ c: UpstreamConnection) {
        if let i = idle.firstIndex(where: { $0 === c }) { idle.remove(at: i) }
    }

    /// Closes the idle connections (at shutdown).
    public func closeIdle() {
        loop.preconditionInEventLoop()
        let all = idle
        idle.removeAll()
        for c in all { c.close() }
    }
}
