/// The keep-alive connections from one loop to one upstream. Confined to that loop, like
/// its calls and connections (checked in debug builds).
public final class UpstreamPool {
    public let loop: EventLoop
    public let endpoint: UpstreamEndpoint
    private var idle: [UpstreamConnection] = []
    /// Told for each request sent: true when it went on a kept-alive connection (for metrics).
    public var onDispatch: ((_ reused: Bool) -> Void)?

    public init(loop: EventLoop, endpoint: UpstreamEndpoint) {
        loop.preconditionInEventLoop()
        self.loop = loop
        self.endpoint = endpoint
    }

    public var idleCount: Int { idle.count }

    @discardableResult
    public func send(_ request: UpstreamRequest, handler: UpstreamResponseHandler) -> UpstreamCall {
        loop.preconditionInEventLoop()
        let call = UpstreamCall(loop: loop, request: request, handler: handler)
        dispatch(call, fresh: false)
        return call
    }

    func dispatch(_ call: UpstreamCall, fresh: Bool) {
        if !fresh, let c = takeIdle(for: call.request) {
            onDispatch?(true)
            c.start(call)
            return
        }
        onDispatch?(false)
        guard let c = UpstreamConnection(pool: self) else {
            call.finish(.connectFailed("cannot create a socket"))
            return
        }
        c.start(call)
    }

    /// The most recently released idle connection that `request` may go on, closing those it
    /// may not. One idle for longer than `idleTimeoutMs` is closed, with every one below it
    /// (released earlier, so older still): the upstream may be closing it right now. For a
    /// request that may not be re-sent, a connection whose socket already shows the upstream's
    /// close (or stray bytes) is closed too: a read the loop has not delivered yet would
    /// otherwise turn into a lost request. That check is one `recv(MSG_PEEK)`, paid only by
    /// such requests; a resendable one goes out and is re-sent if the connection was stale.
    private func takeIdle(for request: UpstreamRequest) -> UpstreamConnection? {
        guard !idle.isEmpty else { return nil }
        let now = EventLoop.nowNanos()
        let limit = UInt64(endpoint.idleTimeoutMs) * 1_000_000
        while let c = idle.popLast() {
            if now &- c.idleSince > limit {
                let older = idle
                idle.removeAll()
                c.close()
                for o in older { o.close() }
                return nil
            }
            if request.resendable || c.isQuiet() { return c }
            c.close()
        }
        return nil
    }

    func release(_ c: UpstreamConnection) {
        guard idle.count < endpoint.maxIdle else { c.close(); return }
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
