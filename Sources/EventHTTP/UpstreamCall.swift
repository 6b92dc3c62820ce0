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

    /// A body at most this large, in one piece, goes out with the head in one system call
    /// (copied into the output only if the socket does not take it all); a larger one is
    /// appended by reference (`Body.reference(into:)`).
    static let bodyWithHeadLimit = 16 << 10

    /// Whether a request with this method and no body still says `Content-Length: 0` (POST, PUT,
    /// PATCH). By length first: two strings that differ compare through a call into the
    /// standard library, and a GET took three of them.
    static func sendsLengthWhenEmpty(_ method: String) -> Bool {
        switch method.utf8.count {
        case 3: method != "GET" && method == "PUT"
        case 4: method == "POST"
        case 5: method == "PATCH"
        default: false
        }
    }

    /// Writes the request to `channel`: its head in one piece, written with the loop's reused
    /// writer (`HeadScratch`), and its body. Sent at once when the connection is idle
    /// (`Channel.write`); a small body goes in the same system call as the head, so that the
    /// upstream gets the request in one segment rather than its head and then its body.
    /// The body stays whole either way, for a retry.
    func writeRequest(to channel: Channel, with heads: HeadScratch) {
        let n = body?.count ?? 0
        let small = n > 0 && n <= Self.bodyWithHeadLimit ? body?.contiguousBytes : nil
        heads.write(to: channel, then: small) { w in
            w.write(method)
            w.write(" ")
            w.write(target)
            w.write(" HTTP/1.1\r\n")
            w.writeFields(headers)
            if n > 0 || Self.sendsLengthWhenEmpty(method) {
                w.write("Content-Length: ")
                w.write(n)
                w.writeCRLF()
            }
            w.writeCRLF()
        }
        if n > 0 && small == nil { body?.reference(into: channel.output) }
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
