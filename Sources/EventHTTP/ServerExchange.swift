import CLibevent
import HTTPCore

/// How a response body is delimited toward the client.
public enum ResponseFraming: Equatable {
    /// No body follows; the headers are sent exactly as given (HEAD, 204, 304).
    case none
    case contentLength(Int)
    /// Length unknown: chunked for HTTP/1.1 clients, close-delimited for HTTP/1.0.
    case stream
}

/// One request and its response, handed to the application once the request head is parsed.
/// The body may still be arriving: `whenBodyComplete` waits for it (`body` is whole only
/// then). Body errors (413, a bad chunk, 408) are answered by the server itself.
///
/// An exchange belongs to the loop of its connection: use it there only (checked in debug
/// builds).
public final class ServerExchange {
    public let loop: EventLoop
    public let head: RequestHead
    public let body: Body
    public let remoteIP: String
    public let isTLS: Bool
    public let startNanos: UInt64
    /// A serial number of the client connection on its server (same number, same connection).
    public let connectionId: Int
    private var connection: ServerConnection?
    /// Called when the client goes away before the response is finished.
    public var onAbort: (() -> Void)?
    /// Called when the client has taken all output written so far (for back-pressure).
    public var onWritable: (() -> Void)?
    public private(set) var status = 0
    public private(set) var bodyBytesSent = 0
    public private(set) var responseStarted = false
    public private(set) var finished = false
    /// Whether all of the request body has arrived.
    public private(set) var bodyComplete: Bool
    private var bodyWaiter: ((Bool) -> Void)?
    private var chunkedOut = false
    /// The size of a response head still wholly in the output buffer (see `withdrawUnsentResponse`).
    private var unsentHeadBytes = 0
    /// The response head is held in the loop's head writer for the body that follows it in
    /// the same read callback (`HeadScratch.writeHeld`), not yet in the output.
    private var headHeld = false
    var isLayerError = false

    init(connection: ServerConnection, head: consuming RequestHead, body: Body, bodyComplete: Bool = true) {
        self.connection = connection
        self.bodyComplete = bodyComplete
        self.loop = connection.server.loop
        self.head = head
        self.body = body
        self.remoteIP = connection.remoteIP
        self.isTLS = connection.isTLS
        self.startNanos = EventLoop.nowNanos()
        self.connectionId = connection.id
    }

    /// Whether the client is still there to receive a response.
    public var isConnected: Bool { connection != nil }

    /// Bytes written but not yet taken by the client.
    public var pendingOutputBytes: Int {
        guard let c = connection else { return 0 }
        return evbuffer_get_length(c.output) + (headHeld ? unsentHeadBytes : 0)
    }

    /// Calls `done(true)` once the whole request body has arrived (at once if it has), or
    /// `done(false)` if it never will: the server answered a body error itself (413, 400,
    /// 408) or the client left; the exchange is then over and must not respond. Asking for
    /// the body sends the `100 Continue` a client may be waiting for. Answering without
    /// asking for it closes the connection after the response (the unread rest of the body
    /// is never taken for a next request).
    public func whenBodyComplete(_ done: @escaping (Bool) -> Void) {
        loop.preconditionInEventLoop()
        if bodyComplete { done(true); return }
        guard let c = connection else { done(false); return }
        precondition(bodyWaiter == nil, "whenBodyComplete: already waiting for the body")
        bodyWaiter = done
        c.bodyWanted()
    }

    func bodyArrived() {
        bodyComplete = true
        let w = bodyWaiter
        bodyWaiter = nil
        w?(true)
    }

    func bodyFailed() {
        let w = bodyWaiter
        bodyWaiter = nil
        w?(false)
    }

    /// Takes back a response head that has not left the gateway (still wholly in the output
    /// buffer, no body written), so that an error can be answered instead; false when any of
    /// it may have reached the client.
    public func withdrawUnsentResponse() -> Bool {
        loop.preconditionInEventLoop()
        if headHeld, connection != nil {
            discardHeldHead()
            unsentHeadBytes = 0
            responseStarted = false
            status = 0
            return true
        }
        guard responseStarted, !finished, bodyBytesSent == 0, unsentHeadBytes > 0, let c = connection,
              evbuffer_get_length(c.output) == unsentHeadBytes else { return false }
        // A bufferevent may keep the start of its output frozen except while it writes.
        if evbuffer_drain(c.output, unsentHeadBytes) != 0 {
            evbuffer_unfreeze(c.output, 1)
            let drained = evbuffer_drain(c.output, unsentHeadBytes) == 0
            evbuffer_freeze(c.output, 1)
            guard drained else { return false }
        }
        unsentHeadBytes = 0
        responseStarted = false
        status = 0
        chunkedOut = false
        return true
    }

    /// Sends a complete response with a small in-memory body.
    public func respond(status: Int, headers: HTTPHeaders = HTTPHeaders(), body bytes: [UInt8]) {
        respond(status: status, headers: headers, body: bytes, moreHaveStrictTransportSecurity: false) { _ in }
    }

    /// `respond`, with `moreFields` written into the head after `headers` (a server's own
    /// fields for every answer, such as a request id: nothing is added to `headers`, which the
    /// caller may still share, so they are not copied). `moreHaveStrictTransportSecurity`:
    /// whether those fields carry one (asked only on a TLS listener that sends one).
    public func respond(status: Int, headers: HTTPHeaders, body bytes: [UInt8],
                        moreHaveStrictTransportSecurity: @autoclosure () -> Bool,
                        moreFields: (inout HeadWriter) -> Void) {
        loop.preconditionInEventLoop()
        releaseHeldHead()
        let noBody = head.method == "HEAD" || status == 204 || status == 304
        startResponse(status: status, reason: nil, framing: .contentLength(bytes.count), suppressBody: noBody,
                      hasStrictTransportSecurity: headers.contains("Strict-Transport-Security") || moreHaveStrictTransportSecurity()) {
            $0.writeFields(headers)
            moreFields(&$0)
        }
        if !noBody, let c = connection, !bytes.isEmpty {
            EvBuffer.append(c.output, bytes)
            bodyBytesSent += bytes.count
        }
        finish()
    }

    public func startResponse(status: Int, reason: String? = nil, headers: HTTPHeaders, framing: ResponseFraming) {
        loop.preconditionInEventLoop()
        startResponse(status: status, reason: reason, headers: headers, framing: framing, suppressBody: false)
    }

    /// `startResponse` with the fields written by `writeFields` into the head (a proxy writes
    /// the upstream's fields from its bytes, without building `HTTPHeaders` for them).
    /// `hasStrictTransportSecurity` (asked only on a TLS listener that sends one) says whether
    /// the fields carry their own.
    ///
    /// Started from inside a plain socket's read callback with a body to follow, the head is
    /// held back for that body (`writeBody`): a proxied response read whole then leaves in one
    /// system call, with no output buffer for its head. A head still held when the callback
    /// returns goes into the output then, where any head waits for its body.
    public func startResponse(status: Int, reason: String? = nil, framing: ResponseFraming,
                              hasStrictTransportSecurity: @autoclosure () -> Bool,
                              writeFields: (inout HeadWriter) -> Void) {
        loop.preconditionInEventLoop()
        startResponse(status: status, reason: reason, framing: framing, suppressBody: false, mayHold: true,
                      hasStrictTransportSecurity: hasStrictTransportSecurity(), writeFields: writeFields)
    }

    private func startResponse(status: Int, reason: String? = nil, headers: HTTPHeaders, framing: ResponseFraming,
                               suppressBody: Bool) {
        startResponse(status: status, reason: reason, framing: framing, suppressBody: suppressBody,
                      hasStrictTransportSecurity: headers.contains("Strict-Transport-Security")) { $0.writeFields(headers) }
    }

    private func startResponse(status: Int, reason: String?, framing: ResponseFraming, suppressBody: Bool,
                               mayHold: Bool = false, hasStrictTransportSecurity: @autoclosure () -> Bool,
                               writeFields: (inout HeadWriter) -> Void) {
        guard let c = connection, !responseStarted else { return }
        responseStarted = true
        self.status = status
        let wasEmpty = evbuffer_get_length(c.output) == 0
        let heads = loop.heads
        var bodyFollows = false
        if case .contentLength(let n) = framing, n > 0, status != 204, status != 304 { bodyFollows = true }
        let hold = mayHold && heads.mayHold && bodyFollows && wasEmpty && !c.isTLS
        func writeHead(_ w: inout HeadWriter) {
            var unframed = false
            w.write("HTTP/1.1 ")
            w.write(status)
            w.write(" ")
            w.write(reason ?? HTTPStatus.reason(status))
            w.writeCRLF()
            writeFields(&w)
            if c.isTLS, let sts = c.server.strictTransportSecurity, !hasStrictTransportSecurity() {
                w.writeField("Strict-Transport-Security", sts)
            }
            switch framing {
            case .none:
                break
            case .contentLength(let n):
                if status != 204 && status != 304 {
                    w.write("Content-Length: ")
                    w.write(n)
                    w.writeCRLF()
                }
            case .stream:
                if suppressBody { break }
                if head.versionMinor >= 1 {
                    w.write("Transfer-Encoding: chunked\r\n")
                    chunkedOut = true
                } else {
                    // Streamed to an HTTP/1.0 client, the body has no framing: it ends with
                    // the connection.
                    unframed = true
                }
            }
            if c.state.responseStarts(unframedBody: unframed, draining: c.server.draining) {
                w.write("Connection: close\r\n")
            } else if head.versionMinor == 0 {
                w.write("Connection: keep-alive\r\n")
            }
            w.writeCRLF()
        }
        let n = hold ? heads.writeHeld(for: self, writeHead) : heads.write(into: c.output, writeHead)
        // Set once the head is written (writing it may release another exchange's held head).
        headHeld = hold
        unsentHeadBytes = wasEmpty ? n : 0
    }

    /// Moves a held head into the output (`HeadScratch.releaseHeld`: at the end of the read
    /// callback, or before another head or any other output), where an unheld head waits: it
    /// leaves with the first body bytes or at `finish`, and until then an upstream failure can
    /// still withdraw it (`withdrawUnsentResponse`) for a clean error.
    func releaseHeldHead() {
        guard headHeld else { return }
        guard let c = connection else { discardHeldHead(); return }
        headHeld = false
        loop.heads.takeHeld(for: self) { _ = evbuffer_add(c.output, $0.baseAddress, $0.count) }
    }

    /// Forgets a held head: it never reaches the client.
    private func discardHeldHead() {
        guard headHeld else { return }
        headHeld = false
        loop.heads.takeHeld(for: self) { _ in }
    }

    /// Moves all of `body` toward the client (no copy), leaving it empty.
    public func writeBody(_ body: Body) {
        loop.preconditionInEventLoop()
        guard let c = connection else { body.removeAll(); return }
        bodyBytesSent += body.count
        if headHeld {
            // The head and the body in one write (what the socket does not take waits in the output).
            headHeld = false
            loop.heads.takeHeld(for: self) { c.channel.write($0, then: body.buffer) }
        } else if chunkedOut {
            ChunkedEncoder.writeChunk(body, to: c.output)
        } else {
            body.moveAll(to: c.output)
        }
        c.flush()
    }

    /// Sends `bytes` (valid only during the call) toward the client: with a held head, both go
    /// in one system call; what the socket does not take is copied into the output.
    public func writeBody(bytes: UnsafeRawBufferPointer) {
        loop.preconditionInEventLoop()
        guard let c = connection else { return }
        bodyBytesSent += bytes.count
        if headHeld {
            headHeld = false
            loop.heads.takeHeld(for: self) { c.channel.write($0, then: bytes) }
        } else if chunkedOut {
            let chunk = Body()
            chunk.append(bytes)
            ChunkedEncoder.writeChunk(chunk, to: c.output)
        } else {
            c.channel.write(bytes)
        }
        c.flush()
    }

    public func writeBody(_ bytes: [UInt8]) {
        loop.preconditionInEventLoop()
        releaseHeldHead()
        guard let c = connection, !bytes.isEmpty else { return }
        bodyBytesSent += bytes.count
        if chunkedOut { EvBuffer.append(c.output, String(bytes.count, radix: 16) + "\r\n") }
        EvBuffer.append(c.output, bytes)
        if chunkedOut { EvBuffer.append(c.output, "\r\n") }
    }

    /// Ends the response. The connection then serves the next request or closes.
    public func finish() {
        loop.preconditionInEventLoop()
        guard !finished else { return }
        releaseHeldHead()
        finished = true
        guard let c = connection else { return }
        if chunkedOut { ChunkedEncoder.writeLast(to: c.output) }
        c.responseFinished()
    }

    /// Gives up on the response: the client connection is closed (e.g. the upstream failed
    /// after the response head was already sent).
    public func abort() {
        loop.preconditionInEventLoop()
        discardHeldHead()
        guard let c = connection else { return }
        finished = true
        connection = nil
        c.close()
    }

    func detach() {
        connection = nil
        onAbort = nil
        onWritable = nil
    }

    func connectionLost() {
        connection = nil
        let cb = onAbort
        onAbort = nil
        onWritable = nil
        if !finished { cb?() }
        bodyFailed()
    }
}
