import HTTPCore

/// A request in flight; lets the caller apply back-pressure or give up.
public final class UpstreamCall {
    let loop: EventLoop
    let request: UpstreamRequest
    /// Held until the call finishes or is cancelled (both let it go). It was weak: that cost a
    /// side table per proxied request (allocated, assigned, read at every callback).
    var handler: UpstreamResponseHandler?
    var connection: UpstreamConnection?
    var retried = false
    public private(set) var headReceived = false
    public private(set) var done = false

    /// `request` is moved in, not copied: a copy retains and releases each of its fields.
    init(loop: EventLoop, request: consuming UpstreamRequest, handler: UpstreamResponseHandler) {
        self.loop = loop
        self.request = request
        self.handler = handler
    }

    /// Appends the request's head to the evbuffer `output` in one `evbuffer_add`, written with
    /// the loop's reused writer (`HeadScratch`). The closure reads the request through the call:
    /// capturing the struct copied it.
    func writeHead(into output: OpaquePointer, with heads: HeadScratch) {
        heads.write(into: output) { w in self.request.writeHead(&w) }
    }

    public func pauseReading() {
        loop.preconditionInEventLoop()
        connection?.setReading(false)
    }

    public func resumeReading() {
        loop.preconditionInEventLoop()
        connection?.setReading(true)
    }

    /// Abandons the call; its connection is closed, not reused.
    public func cancel() {
        loop.preconditionInEventLoop()
        done = true
        handler = nil
        let c = connection
        connection = nil
        c?.call = nil
        c?.close()
    }

    func deliverHead(_ head: ResponseHead, _ framing: BodyFraming) {
        headReceived = true
        handler?.upstreamResponseHead(head, framing: framing)
    }

    func finish(_ failure: UpstreamFailure?) {
        guard !done else { return }
        done = true
        connection = nil
        let h = handler
        handler = nil
        if let failure { h?.upstreamFailed(failure) } else { h?.upstreamResponseEnd() }
    }
}
