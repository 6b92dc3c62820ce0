import Glibc
import CLibevent
import HTTPCore

/// One client connection: reads requests one at a time (see ServerConnection+Request.swift)
/// and writes their responses.
///
/// An exchange is handed to the application as soon as its head is parsed; its body may still
/// be arriving (state `.body` with an exchange), and is read on while the application decides.
final class ServerConnection: ChannelHandler {
    /// Strong: the server holds its open connections and each lets go when it closes
    /// (`HTTPServer.connectionClosed`). An `unowned` reference cost a checked retain and a
    /// release on every use, several per request (bench/RESULTS.md, the many-core profile).
    let server: HTTPServer
    let id: Int
    let channel: Channel
    let remoteIP: String
    let isTLS: Bool

    enum State { case head, body, handling, lingering, closed }
    var state = State.head
    /// The request being read (between its head and the end of its body).
    var head: RequestHead?
    var framing = BodyFraming.none
    var remaining = 0
    var chunked = ChunkedDecoder()
    var body: Body?
    /// The body handed to each bodiless request in turn (`bodilessBody`).
    var spareBody: Body?
    var exchange: ServerExchange?
    var keepAlive = true
    var responseComplete = false
    /// The handler is running for the exchange just dispatched (`dispatch`).
    var dispatching = false
    /// A turn of the loop is scheduled to read a request already buffered (`completeExchange`).
    private var processScheduled = false
    /// When the request head must be complete (monotonic nanoseconds; 0: not counting yet).
    var headDeadline: UInt64 = 0
    /// Empty lines skipped before the request line being read (`HTTPParser.maxEmptyLinesBeforeRequest`).
    var emptyLinesBeforeHead = 0
    /// When the body clock started, for `minBodyRate` (0: not yet).
    var bodyStartNanos: UInt64 = 0
    /// The request asked for `100 Continue`, which has not been sent: it is sent when the
    /// application asks for the body, never when it answers without it.
    var continueExpected = false
    /// Lingering ends at this instant however the client keeps sending.
    private var lingerDeadline: UInt64 = 0

    /// The loop's spare request header buffers (`HeadersPool`); the loop outlives its connections.
    unowned(unsafe) let requestHeaders: HeadersPool

    init(server: HTTPServer, id: Int, channel: Channel, remoteIP: String, isTLS: Bool) {
        self.server = server
        requestHeaders = server.loop.requestHeaders
        self.id = id
        self.channel = channel
        self.remoteIP = remoteIP
        self.isTLS = isTLS
    }

    var limits: ServerLimits { server.limits }
    var input: OpaquePointer { channel.input }
    var output: OpaquePointer { channel.output }

    func start() {
        channel.setHandler(self)
        // The first request's head is due within the header timeout of the accept (nginx).
        headDeadline = EventLoop.coarseNanos() + UInt64(limits.headerTimeoutMs) * 1_000_000
        setReadTimeout(limits.headerTimeoutMs)
        channel.setReading(true)
    }

    /// Sends buffered output now (see Channel.flush); writable() runs once all of it is gone.
    func flush() {
        guard state != .closed else { return }
        if channel.flush() { writable() }
    }

    func setReadTimeout(_ ms: Int?) {
        channel.setTimeouts(readMs: ms, writeMs: limits.writeTimeoutMs)
    }

    override func readable() {
        switch state {
        case .lingering:
            evbuffer_drain(input, evbuffer_get_length(input))
            if EventLoop.coarseNanos() >= lingerDeadline { close() }
        case .handling:
            // A pipelined request waits its turn; stop reading if a client piles up too much.
            if evbuffer_get_length(input) > limits.maxHeaderBytes + 65_536 {
                channel.setReading(false)
            }
        default:
            process()
        }
    }

    override var acceptsDirectRead: Bool { state == .head }

    override func readable(direct bytes: UnsafeRawBufferPointer) -> Int { takeWholeHead(bytes) }

    override func writable() {
        guard let exchange, state != .closed else { return }
        if responseComplete {
            completeExchange()
        } else {
            exchange.onWritable?()
        }
    }

    func responseFinished() {
        responseComplete = true
        flush()
    }

    private func completeExchange() {
        guard let ex = exchange, state != .closed else { return }
        let wasError = ex.isLayerError
        // Answered before its body was all read: the rest of the body must never be parsed
        // as a next request, so the connection closes (RFC 9110 §10.1.1, RFC 9112 §9.6).
        let bodyUnread = state == .body
        exchange = nil
        ex.detach()
        // Its headers' buffers go to the loop's pool, for a next request on any connection.
        requestHeaders.give(ex.head.headers)
        if bodyUnread { keepAlive = false }
        if !keepAlive || server.draining {
            if (wasError || bodyUnread) && !isTLS { linger() } else { close() }
            return
        }
        state = .head
        headDeadline = 0
        setReadTimeout(limits.idleTimeoutMs)
        channel.setReading(true)
        // A pipelined request already buffered is read on the loop's next turn, never from inside
        // the call that ended this response (the application's callback, or the handler itself,
        // whose `process` loop goes on when it returns): the stack stays flat however many
        // requests a client pipelines.
        guard !dispatching, evbuffer_get_length(input) > 0, !processScheduled else { return }
        processScheduled = true
        server.loop.execute { [self] in
            processScheduled = false
            if state == .head { process() }
        }
    }

    /// After answering before the request was all read, half-close and discard what the
    /// client still sends, for 2 s at most, so that it reads the answer instead of a
    /// connection reset.
    private func linger() {
        state = .lingering
        dropBody()
        head = nil
        lingerDeadline = EventLoop.coarseNanos() + 2_000_000_000
        shutdown(channel.socket, Int32(SHUT_WR))
        setReadTimeout(2_000)
        channel.setReading(true)
    }

    override func event(_ what: Int32) {
        if what & BEV_EVENT_TIMEOUT != 0 && what & BEV_EVENT_READING != 0 {
            switch state {
            case .head where evbuffer_get_length(input) > 0:
                fail(408, "the request head did not arrive within \(limits.headerTimeoutMs) ms")
                return
            case .body:
                fail(408, "no request body bytes arrived for \(limits.bodyTimeoutMs) ms")
                return
            default:
                close()
                return
            }
        }
        if what & BEV_EVENT_EOF != 0 && state == .handling && exchange != nil {
            // The client half-closed after sending its request: it still reads the answer,
            // after which the connection closes.
            keepAlive = false
            return
        }
        guard what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT) != 0 else { return }
        close()
    }

    /// Lets go of an unfinished request body.
    func dropBody() {
        if let b = body, b.count >= 1 << 20 { server.releaseMemorySoon() }
        body = nil
    }

    func closeIfIdle() {
        if state == .head && evbuffer_get_length(input) == 0 { close() }
    }

    func close() {
        guard state != .closed else { return }
        state = .closed
        dropBody()
        let ex = exchange
        exchange = nil
        channel.close()
        ex?.connectionLost()
        server.connectionClosed(self)
    }
}
