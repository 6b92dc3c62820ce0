import Glibc
import CLibevent
import COpenSSL
import HTTPCore

public struct ServerLimits: Sendable {
    public var maxHeaderBytes: Int
    public var maxBodyBytes: Int
    /// Time allowed between bytes of a request in progress.
    public var requestTimeoutMs: Int
    /// Time a keep-alive connection may sit idle between requests.
    public var idleTimeoutMs: Int
    /// Time allowed for a response write to make progress.
    public var writeTimeoutMs: Int

    public init(maxHeaderBytes: Int = 16_384, maxBodyBytes: Int = 10 << 20, requestTimeoutMs: Int = 30_000,
                idleTimeoutMs: Int = 75_000, writeTimeoutMs: Int = 60_000) {
        self.maxHeaderBytes = maxHeaderBytes
        self.maxBodyBytes = maxBodyBytes
        self.requestTimeoutMs = requestTimeoutMs
        self.idleTimeoutMs = idleTimeoutMs
        self.writeTimeoutMs = writeTimeoutMs
    }
}

/// Builds the body of an error the HTTP layer answers by itself (400, 413, 431, ...), so that
/// the application decides its format.
public typealias ErrorBodyMaker = (_ status: Int, _ message: String) -> (contentType: String, body: [UInt8])

/// An HTTP/1.1 server on one loop: its own listener (SO_REUSEPORT) and its connections.
public final class HTTPServer {
    public let loop: EventLoop
    let limits: ServerLimits
    let tls: TLSContext?
    let handler: (ServerExchange) -> Void
    let errorBody: ErrorBodyMaker
    private var listener: OpaquePointer?
    private var acceptRetry: LoopTimer?
    var connections: [ObjectIdentifier: ServerConnection] = [:]
    public private(set) var draining = false
    private var onDrained: (() -> Void)?
    /// Called when accept() fails (e.g. out of file descriptors).
    public var onAcceptError: ((String) -> Void)?
    private var nextConnectionId = 0

    public init(loop: EventLoop, address: SocketAddress, tls: TLSContext?, limits: ServerLimits,
                errorBody: @escaping ErrorBodyMaker, handler: @escaping (ServerExchange) -> Void) throws {
        self.loop = loop
        self.tls = tls
        self.limits = limits
        self.errorBody = errorBody
        self.handler = handler
        let flags = UInt32(LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_REUSEABLE_PORT | LEV_OPT_CLOSE_ON_EXEC)
        let l = address.withSockaddr { sa, len in
            evconnlistener_new_bind(loop.base, { _, fd, addr, _, ctx in
                let server = Unmanaged<HTTPServer>.fromOpaque(ctx!).takeUnretainedValue()
                server.accept(fd: fd, peer: addr)
            }, Unmanaged.passUnretained(self).toOpaque(), flags, 1024, sa, len)
        }
        guard let l else {
            throw SocketError("cannot listen on \(address): \(String(cString: strerror(errno)))")
        }
        listener = l
        evconnlistener_set_error_cb(l) { l, ctx in
            Unmanaged<HTTPServer>.fromOpaque(ctx!).takeUnretainedValue().acceptFailed()
        }
    }

    deinit {
        if let listener { evconnlistener_free(listener) }
    }

    /// The port actually bound (useful when asked for port 0).
    public var boundPort: Int {
        guard let listener else { return 0 }
        var ss = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let fd = evconnlistener_get_fd(listener)
        _ = withUnsafeMutablePointer(to: &ss) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        return withUnsafePointer(to: ss) { p in
            p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
        }
    }

    public var connectionCount: Int { connections.count }

    private func accept(fd: Int32, peer: UnsafeMutablePointer<sockaddr>?) {
        setNoDelay(fd)
        let bev: OpaquePointer?
        if let tls {
            guard let ssl = SSL_new(tls.ctx) else { evutil_closesocket(fd); return }
            bev = bufferevent_openssl_socket_new(loop.base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                                 Int32(BEV_OPT_CLOSE_ON_FREE.rawValue))
            if let bev { bufferevent_openssl_set_allow_dirty_shutdown(bev, 1) }
        } else {
            bev = bufferevent_socket_new(loop.base, fd, Int32(BEV_OPT_CLOSE_ON_FREE.rawValue))
        }
        guard let bev else { evutil_closesocket(fd); return }
        let ip = peer.map { SocketAddress.numericHost($0) } ?? "unknown"
        nextConnectionId += 1
        let c = ServerConnection(server: self, id: nextConnectionId, bev: bev, fd: fd, remoteIP: ip, isTLS: tls != nil)
        connections[ObjectIdentifier(c)] = c
        c.start()
    }

    /// Out of descriptors or similar: pause accepting briefly instead of spinning.
    private func acceptFailed() {
        let err = String(cString: strerror(errno))
        onAcceptError?("accept failed: \(err)")
        guard let listener else { return }
        evconnlistener_disable(listener)
        if acceptRetry == nil {
            acceptRetry = LoopTimer(loop: loop) { [weak self] in
                if let l = self?.listener { evconnlistener_enable(l) }
            }
        }
        acceptRetry?.schedule(afterMs: 100)
    }

    func connectionClosed(_ c: ServerConnection) {
        connections.removeValue(forKey: ObjectIdentifier(c))
        if draining && connections.isEmpty { finishDrain() }
    }

    /// Graceful shutdown: stop accepting, close idle keep-alive connections, let requests in
    /// flight finish (their responses carry `Connection: close`), then call `onDrained`.
    public func beginDrain(onDrained: @escaping () -> Void) {
        draining = true
        self.onDrained = onDrained
        if let l = listener { evconnlistener_free(l); listener = nil }
        acceptRetry?.cancel()
        for c in Array(connections.values) { c.closeIfIdle() }
        if connections.isEmpty { finishDrain() }
    }

    /// Closes every remaining connection (the drain deadline passed).
    public func closeAll() {
        for c in Array(connections.values) { c.close() }
    }

    private func finishDrain() {
        let cb = onDrained
        onDrained = nil
        cb?()
    }
}

/// One client connection: reads requests one at a time and writes their responses.
final class ServerConnection {
    unowned let server: HTTPServer
    let id: Int
    let bev: OpaquePointer
    let fd: Int32
    let remoteIP: String
    let isTLS: Bool

    private enum State { case head, body, handling, lingering, closed }
    private var state = State.head
    private var head: RequestHead?
    private var framing = BodyFraming.none
    private var remaining = 0
    private var chunked = ChunkedDecoder()
    private var body: OpaquePointer?
    private(set) var exchange: ServerExchange?
    var keepAlive = true
    private var responseComplete = false

    init(server: HTTPServer, id: Int, bev: OpaquePointer, fd: Int32, remoteIP: String, isTLS: Bool) {
        self.server = server
        self.id = id
        self.bev = bev
        self.fd = fd
        self.remoteIP = remoteIP
        self.isTLS = isTLS
    }

    func start() {
        bufferevent_setcb(bev, { _, ctx in
            let c = Unmanaged<ServerConnection>.fromOpaque(ctx!).takeUnretainedValue()
            withExtendedLifetime(c) { c.readable() }
        }, { _, ctx in
            let c = Unmanaged<ServerConnection>.fromOpaque(ctx!).takeUnretainedValue()
            withExtendedLifetime(c) { c.writable() }
        }, { _, what, ctx in
            let c = Unmanaged<ServerConnection>.fromOpaque(ctx!).takeUnretainedValue()
            withExtendedLifetime(c) { c.event(what) }
        }, Unmanaged.passUnretained(self).toOpaque())
        setReadTimeout(server.limits.idleTimeoutMs)
        // Plain sockets write directly (see flush()); EV_WRITE is only for what is left over.
        bufferevent_enable(bev, Int16(isTLS ? EV_READ | EV_WRITE : EV_READ))
    }

    /// Sends buffered output now, with one writev, instead of arming a write event and
    /// waiting a loop iteration: that costs two epoll_ctl calls per response. What the socket
    /// does not take is left to libevent (EV_WRITE), which calls writable() when drained.
    func flush() {
        guard state != .closed else { return }
        let out = output
        guard !isTLS else {
            if evbuffer_get_length(out) == 0 { writable() }
            return
        }
        if evbuffer_get_length(out) > 0 { _ = evbuffer_write(out, fd) }
        if evbuffer_get_length(out) > 0 {
            bufferevent_enable(bev, Int16(EV_WRITE))
        } else {
            writable()
        }
    }

    private var input: OpaquePointer { bufferevent_get_input(bev)! }
    var output: OpaquePointer { bufferevent_get_output(bev)! }

    private func setReadTimeout(_ ms: Int?) {
        var w = timeval(milliseconds: server.limits.writeTimeoutMs)
        if let ms {
            var r = timeval(milliseconds: ms)
            bufferevent_set_timeouts(bev, &r, &w)
        } else {
            bufferevent_set_timeouts(bev, nil, &w)
        }
    }

    private func readable() {
        switch state {
        case .lingering:
            evbuffer_drain(input, evbuffer_get_length(input))
        case .handling:
            // A pipelined request waits its turn; stop reading if a client piles up too much.
            if evbuffer_get_length(input) > server.limits.maxHeaderBytes + 65_536 {
                bufferevent_disable(bev, Int16(EV_READ))
            }
        default:
            process()
        }
    }

    /// Parses as far as the buffered input allows.
    private func process() {
        while true {
            switch state {
            case .head:
                guard readHead() else { return }
            case .body:
                guard readBody() else { return }
            case .handling, .lingering, .closed:
                return
            }
        }
    }

    /// Returns true when state changed and processing should go on.
    private func readHead() -> Bool {
        let input = self.input
        let available = evbuffer_get_length(input)
        if available == 0 { return false }
        let limit = server.limits.maxHeaderBytes
        guard let end = EvBuffer.search(input, "\r\n\r\n") else {
            if available > limit {
                fail(431, "request header fields exceed the limit of \(limit) bytes")
            } else {
                setReadTimeout(server.limits.requestTimeoutMs)
            }
            return false
        }
        let headLength = end + 4
        guard headLength <= limit else {
            fail(431, "request header fields exceed the limit of \(limit) bytes")
            return false
        }
        let parsed: RequestHead
        do {
            let p = evbuffer_pullup(input, headLength)
            parsed = try HTTPParser.parseRequestHead(UnsafeRawBufferPointer(start: p, count: headLength))
            framing = try HTTPParser.requestFraming(parsed)
        } catch {
            fail(error.status, error.message)
            return false
        }
        evbuffer_drain(input, headLength)
        keepAlive = parsed.wantsKeepAlive && !server.draining
        if case .contentLength(let n) = framing, n > server.limits.maxBodyBytes {
            fail(413, "request body of \(n) bytes exceeds the limit of \(server.limits.maxBodyBytes) bytes")
            return false
        }
        if let expect = parsed.headers.first("Expect") {
            guard asciiCaseInsensitiveEquals(expect, "100-continue") else {
                fail(417, "unsupported Expect '\(expect)'")
                return false
            }
            if framing != .none && parsed.versionMinor >= 1 {
                EvBuffer.append(output, "HTTP/1.1 100 Continue\r\n\r\n")
                flush()
            }
        }
        head = parsed
        body = evbuffer_new()
        switch framing {
        case .none:
            dispatch()
        case .contentLength(let n):
            remaining = n
            state = .body
            setReadTimeout(server.limits.requestTimeoutMs)
        case .chunked, .untilClose:
            chunked = ChunkedDecoder()
            state = .body
            setReadTimeout(server.limits.requestTimeoutMs)
        }
        return true
    }

    private func readBody() -> Bool {
        guard let body else { return false }
        let input = self.input
        switch framing {
        case .contentLength:
            let n = min(remaining, evbuffer_get_length(input))
            if n == 0 { return false }
            evbuffer_remove_buffer(input, body, n)
            remaining -= n
            if remaining > 0 { return false }
        default:
            let done: Bool
            do {
                done = try chunked.decode(from: input, into: body)
            } catch {
                fail(error.status, error.message)
                return false
            }
            if evbuffer_get_length(body) > server.limits.maxBodyBytes {
                fail(413, "request body exceeds the limit of \(server.limits.maxBodyBytes) bytes")
                return false
            }
            if !done { return false }
        }
        dispatch()
        return true
    }

    private func dispatch() {
        guard let head, let body else { return }
        self.head = nil
        self.body = nil
        state = .handling
        responseComplete = false
        setReadTimeout(nil)
        let ex = ServerExchange(connection: self, head: head, body: body)
        exchange = ex
        server.handler(ex)
    }

    /// Answers an error the HTTP layer detected itself and closes the connection afterwards.
    private func fail(_ status: Int, _ message: String) {
        keepAlive = false
        state = .handling
        let methodHead = head ?? RequestHead(method: "GET", target: "/")
        if let body { evbuffer_free(body); self.body = nil }
        head = nil
        let ex = ServerExchange(connection: self, head: methodHead, body: evbuffer_new())
        ex.isLayerError = true
        exchange = ex
        let e = server.errorBody(status, message)
        var h = HTTPHeaders()
        h.add("Content-Type", e.contentType)
        ex.respond(status: status, headers: h, body: e.body)
    }

    private func writable() {
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
        setReadTimeout(server.limits.idleTimeoutMs)
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

    private func event(_ what: Int16) {
        let w = Int32(what)
        guard w & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT) != 0 else { return }
        close()
    }

    func closeIfIdle() {
        if state == .head && evbuffer_get_length(input) == 0 { close() }
    }

    func close() {
        guard state != .closed else { return }
        state = .closed
        if let body { evbuffer_free(body); self.body = nil }
        let ex = exchange
        exchange = nil
        bufferevent_disable(bev, Int16(EV_READ | EV_WRITE))
        bufferevent_free(bev)
        ex?.connectionLost()
        server.connectionClosed(self)
    }
}
