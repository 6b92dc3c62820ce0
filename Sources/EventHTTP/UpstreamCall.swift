import HTTPCore

/// A request in flight; lets the caller apply back-pressure or give up.
public final class UpstreamCall {
    let loop: EventLoop
    // The request's parts, held apart: a whole `UpstreamRequest` stored here was copied and the
    // original destroyed (each field retained and released once more per request).
    let method: String
    let target: String
    let headers: ForwardedFields
    let body: Body?
    let resendable: Bool
    /// Held until the call finishes or is cancelled (both let it go). It was weak: that cost a
    /// side table per proxied request (allocated, assigned, read at every callback).
    var handler: UpstreamResponseHandler?
    var connection: UpstreamConnection?
    var retried = false
    public private(set) var headReceived = false
    public private(set) var done = false

    init(loop: EventLoop, method: String, target: String, headers: ForwardedFields, body: Body?, resendable: Bool,
         handler: UpstreamResponseHandler) {
        self.loop = loop
        self.method = method
        self.target = target
        self.headers = headers
        self.body = body
        self.resendable = resendable
        self.handler = handler
    }

    /// Writes the request's head to `channel` in one piece (sent at once when the connection is
    /// idle, `Channel.write`), written with the loop's reused writer (`HeadScratch`).
    func writeHead(to channel: Channel, with heads: HeadScratch) {
        heads.write(to: channel) { w in
            w.write(method)
            w.write(" ")
            w.write(target)
            w.write(" HTTP/1.1\r\n")
            w.writeFields(headers)
            let n = body?.count ?? 0
            if n > 0 || method == "POST" || method == "PUT" || method == "PATCH" {
                w.write("Content-Length: ")
                w.write(n)
                w.writeCRLF()
            }
            w.writeCRLF()
        }
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
