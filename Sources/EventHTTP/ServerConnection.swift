import Glibc
import CLibevent
import HTTPCore

/// One client connection: reads requests one at a time (see ServerConnection+Request.swift)
/// and writes their responses.
final class ServerConnection: BufferEventHandler {
    unowned let server: HTTPServer
    let id: Int
    let bev: OpaquePointer
    let fd: Int32
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
    var exchange: ServerExchange?
    var keepAlive = true
    var responseComplete = false

    init(server: HTTPServer, id: Int, bev: OpaquePointer, fd: Int32, remoteIP: String, isTLS: Bool) {
        self.server = server
        self.id = id
        self.bev = bev
        self.fd = fd
        self.remoteIP = remoteIP
        self.isTLS = isTLS
    }

    var limits: ServerLimits { server.limits }
    var input: OpaquePointer { bufferevent_get_input(bev)! }
    var output: OpaquePointer { bufferevent_get_output(bev)! }

    func start() {
        BufferEvent.route(bev, to: self)
        setReadTimeout(limits.idleTimeoutMs)
        // Plain sockets write directly (see flush()); EV_WRITE is only for what is left over.
        bufferevent_enable(bev, Int16(isTLS ? EV_READ | EV_WRITE : EV_READ))
    }

    /// Sends buffered output now (see BufferEvent.writeDirectly); writable() runs once all
    /// of it is gone.
    func flush() {
        guard state != .closed else { return }
        if isTLS {
            if evbuffer_get_length(output) == 0 { writable() }
        } else if BufferEvent.writeDirectly(bev) {
            writable()
        }
    }

    func setReadTimeout(_ ms: Int?) {
        BufferEvent.setTimeouts(bev, readMs: ms, writeMs: limits.writeTimeoutMs)
    }

    override func readable() {
        switch state {
        case .lingering:
            evbuffer_drain(input, evbuffer_get_length(input))
        case .handling:
            // A pipelined request waits its turn; stop reading if a client piles up too much.
            if evbuffer_get_length(input) > limits.maxHeaderBytes + 65_536 {
                bufferevent_disable(bev, Int16(EV_READ))
            }
        default:
            process()
        }
    }

    override func writable() {
        if !isTLS && evbuffer_get_length(output) == 0 { bufferevent_disable(bev, Int16(EV_WRITE)) }
        if state == .handling {
            if responseComplete {
                completeExchange()
            } else {
                exchange?.onWritable?()
            }
        }
    }

    func responseFinished() {
        responseComplete = true
        flush()
    }

    private func completeExchange() {
        guard state == .handling else { return }
        let wasError = exchange?.isLayerError ?? false
        exchange?.detach()
        exchange = nil
        if !keepAlive || server.draining {
            if wasError && !isTLS { linger() } else { close() }
            return
        }
        state = .head
        setReadTimeout(limits.idleTimeoutMs)
        bufferevent_enable(bev, Int16(EV_READ))
        process()
    }

    /// After an error answered mid-request, half-close and discard what the client still
    /// sends for a moment, so that it reads the error instead of a connection reset.
    private func linger() {
        state = .lingering
        shutdown(fd, Int32(SHUT_WR))
        setReadTimeout(2_000)
        bufferevent_enable(bev, Int16(EV_READ))
    }

    override func event(_ what: Int32) {
        guard what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT) != 0 else { return }
        close()
    }

    func closeIfIdle() {
        if state == .head && evbuffer_get_length(input) == 0 { close() }
    }

    func close() {
        guard state != .closed else { return }
        state = .closed
        body = nil
        let ex = exchange
        exchange = nil
        bufferevent_disable(bev, Int16(EV_READ | EV_WRITE))
        bufferevent_free(bev)
        ex?.connectionLost()
        server.connectionClosed(self)
    }
}
