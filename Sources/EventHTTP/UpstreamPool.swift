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
        if !fresh, let c = idle.popLast() {
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
