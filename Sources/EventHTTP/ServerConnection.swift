import Glibc
import CLibevent
import HTTPCore

/// One client connection: reads requests one at a time (see ServerConnection+Request.swift)
/// and writes their responses. The adapter between the socket and the connection's lifecycle
/// (`ServerConnectionState`), which decides what each event leads to.
///
/// An exchange is handed to the application as soon as its head is parsed; its body may still
/// be arriving (phase `.body` with an exchange), and is read on while the application decides.
final class ServerConnection: ChannelHandler {
    /// Strong: the server holds its open connections and each lets go when it closes
    /// (`HTTPServer.connectionClosed`). An `unowned` reference cost a checked retain and a
    /// release on every use, several per request (bench/RESULTS.md, the many-core profile).
    let server: HTTPServer
    let id: Int
    let channel: Channel
    let remoteIP: String
    let isTLS: Bool

    /// Where the connection is in its lifecycle, and its rules.
    var state = ServerConnectionState()
    /// The request being read (between its head and the end of its body).
    var head: RequestHead?
    var framing = BodyFraming.none
    var remaining = 0
    var chunked = ChunkedDecoder()
    var body: Body?
    /// The body handed to each bodiless request in turn (`bodilessBody`).
    var spareBody: Body?
    var exchange: ServerExchange?
    /// When the request head must be complete (monotonic nanoseconds; 0: not counting yet).
    var headDeadline: UInt64 = 0
    /// Empty lines skipped before the request line being read (`HTTPParser.maxEmptyLinesBeforeRequest`).
    var emptyLinesBeforeHead = 0
    /// When the body clock started, for `minBodyRate` (0: not yet).
    var bodyStartNanos: UInt64 = 0
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
        guard state.phase != .closed else { return }
        if channel.flush() { writable() }
    }

    func setReadTimeout(_ ms: Int?) {
        channel.setTimeouts(readMs: ms, writeMs: limits.writeTimeoutMs)
    }

    override func readable() {
        switch state.phase {
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

    override var acceptsDirectRead: Bool { state.phase == .head }

    override func readable(direct bytes: UnsafeRawBufferPointer) -> Int { takeWholeHead(bytes) }

    override func writable() {
        guard let exchange, state.phase != .closed else { return }
        if state.responseComplete {
            completeExchange()
        } else {
            exchange.onWritable?()
        }
    }

    func responseFinished() {
        state.responseWritten()
        flush()
    }

    private func completeExchange() {
        guard let ex = exchange, state.phase != .closed else { return }
        exchange = nil
        ex.detach()
        // Its headers' buffers go to the loop's pool, for a next request on any connection.
        requestHeaders.give(ex.head.headers)
        switch state.exchangeEnded(layerError: ex.isLayerError, draining: server.draining, isTLS: isTLS,
                                   inputBuffered: evbuffer_get_length(input) > 0) {
        case .linger:
            linger()
        case .close:
            close()
        case .awaitNext(let readNow):
            headDeadline = 0
            setReadTimeout(limits.idleTimeoutMs)
            channel.setReading(true)
            if readNow {
                server.loop.execute { [self] in
                    if state.readScheduledRuns() { process() }
                }
            }
        }
    }

    /// After answering before the request was all read, half-close and discard what the
    /// client still sends, for 2 s at most, so that it reads the answer instead of a
    /// connection reset.
    private func linger() {
        dropBody()
        head = nil
        lingerDeadline = EventLoop.coarseNanos() + 2_000_000_000
        shutdown(channel.socket, Int32(SHUT_WR))
        setReadTimeout(2_000)
        channel.setReading(true)
    }

    override func event(_ what: Int32) {
        if what & BEV_EVENT_TIMEOUT != 0 && what & BEV_EVENT_READING != 0 {
            switch state.readTimedOut(inputBuffered: evbuffer_get_length(input) > 0) {
            case .headTooSlow: fail(408, "the request head did not arrive within \(limits.headerTimeoutMs) ms")
            case .bodyTooSlow: fail(408, "no request body bytes arrived for \(limits.bodyTimeoutMs) ms")
            case .close: close()
            }
            return
        }
        // The client half-closed after sending its request: it still reads the answer, after
        // which the connection closes.
        if what & BEV_EVENT_EOF != 0 && state.peerClosed(exchangeOpen: exchange != nil) { return }
        guard what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT) != 0 else { return }
        close()
    }

    /// Lets go of an unfinished request body.
    func dropBody() {
        if let b = body, b.count >= 1 << 20 { server.releaseMemorySoon() }
        body = nil
    }

    func closeIfIdle() {
        if state.phase == .head && evbuffer_get_length(input) == 0 { close() }
    }

    func close() {
        guard state.close() else { return }
        dropBody()
        let ex = exchange
        exchange = nil
        channel.close()
        ex?.connectionLost()
        server.connectionClosed(self)
    }
}
