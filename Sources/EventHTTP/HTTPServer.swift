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
/// Confined to its loop, like everything it creates (checked in debug builds).
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
        loop.preconditionInEventLoop()
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
        var ssl: OpaquePointer?
        if let tls {
            ssl = SSL_new(tls.ctx)
            guard ssl != nil else { evutil_closesocket(fd); return }
        }
        guard let bev = BufferEvent.make(loop: loop, fd: fd, ssl: ssl, state: BUFFEREVENT_SSL_ACCEPTING) else {
            evutil_closesocket(fd)
            return
        }
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
        loop.preconditionInEventLoop()
        draining = true
        self.onDrained = onDrained
        if let l = listener { evconnlistener_free(l); listener = nil }
        acceptRetry?.cancel()
        for c in Array(connections.values) { c.closeIfIdle() }
        if connections.isEmpty { finishDrain() }
    }

    /// Closes every remaining connection (the drain deadline passed).
    public func closeAll() {
        loop.preconditionInEventLoop()
        for c in Array(connections.values) { c.close() }
    }

    private func finishDrain() {
        let cb = onDrained
        onDrained = nil
        cb?()
    }
}
