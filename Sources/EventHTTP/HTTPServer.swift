import Glibc
import CLibevent
import COpenSSL
import HTTPCore
import Synchronization

public struct ServerLimits: Sendable {
    public var maxHeaderBytes: Int
    public var maxBodyBytes: Int
    /// The whole request head must arrive within this, counted from the accept for a
    /// connection's first request, and from the first byte of the head for later ones
    /// (nginx's `client_header_timeout`). Not reset by a trickle of bytes.
    public var headerTimeoutMs: Int
    /// The longest pause between two reads of a request body (nginx's `client_body_timeout`);
    /// also the grace period before `minBodyRate` applies.
    public var bodyTimeoutMs: Int
    /// Bytes per second a request body must average, from its start, once it has been
    /// arriving for longer than `bodyTimeoutMs`; checked at each read. 0: no minimum.
    public var minBodyRate: Int
    /// Time a keep-alive connection may sit idle between requests.
    public var idleTimeoutMs: Int
    /// Time allowed for a response write to make progress.
    public var writeTimeoutMs: Int
    /// Connections one client address may hold open at once (0: no limit). A connection over
    /// it is closed as soon as it is accepted, before any byte is read.
    public var maxConnectionsPerClient: Int

    public init(maxHeaderBytes: Int = 16_384, maxBodyBytes: Int = 10 << 20, headerTimeoutMs: Int = 10_000,
                bodyTimeoutMs: Int = 10_000, minBodyRate: Int = 1024, idleTimeoutMs: Int = 75_000,
                writeTimeoutMs: Int = 60_000, maxConnectionsPerClient: Int = 256) {
        self.maxHeaderBytes = maxHeaderBytes
        self.maxBodyBytes = maxBodyBytes
        self.headerTimeoutMs = headerTimeoutMs
        self.bodyTimeoutMs = bodyTimeoutMs
        self.minBodyRate = minBodyRate
        self.idleTimeoutMs = idleTimeoutMs
        self.writeTimeoutMs = writeTimeoutMs
        self.maxConnectionsPerClient = maxConnectionsPerClient
    }
}

/// Open connections per client address, for `ServerLimits.maxConnectionsPerClient`. One
/// table can be shared by the servers of every worker (SO_REUSEPORT spreads a client's
/// connections over them), so the cap is per process; the lock is taken once at accept and
/// once at close.
public final class ClientConnectionTable: Sendable {
    public let limit: Int
    private let counts = Mutex<[String: Int]>([:])

    public init(limit: Int) { self.limit = limit }

    /// Counts one more connection from `address`, or returns false if it already has `limit`.
    func admit(_ address: String) -> Bool {
        counts.withLock { c in
            let n = c[address, default: 0]
            guard n < limit else { return false }
            c[address] = n + 1
            return true
        }
    }

    func release(_ address: String) {
        counts.withLock { c in
            guard let n = c[address] else { return }
            if n <= 1 { c.removeValue(forKey: address) } else { c[address] = n - 1 }
        }
    }

    /// The connections `address` holds now.
    public func count(_ address: String) -> Int { counts.withLock { $0[address, default: 0] } }
}

/// Builds the body of an error the HTTP layer answers by itself (400, 413, 431, ...), so that
/// the application decides its format.
public typealias ErrorBodyMaker = (_ status: Int, _ message: String) -> (contentType: String, body: [UInt8])

/// An HTTP/1.1 server on one loop: its own listener (SO_REUSEPORT) and its connections.
/// Confined to its loop, like everything it creates (checked in debug builds).
public final class HTTPServer {
    public let loop: EventLoop
    let limits: ServerLimits
    /// The context new connections are accepted with; replacing it (a certificate reload)
    /// leaves the connections already open on the old one.
    public var tls: TLSContext? {
        willSet { loop.preconditionInEventLoop() }
    }
    /// The `Strict-Transport-Security` value added to every response sent over TLS (the
    /// application's and this layer's own errors), unless the response carries one already.
    public var strictTransportSecurity: String? {
        willSet { loop.preconditionInEventLoop() }
    }
    let handler: (ServerExchange) -> Void
    let errorBody: ErrorBodyMaker
    /// Nil when connections per client are not limited.
    let clients: ClientConnectionTable?
    /// The group this server spreads its connections over, and its member there (nil: alone).
    private var balance: (group: ConnectionBalancer, member: ConnectionBalancer.Member)?
    private var listener: Listener?
    private var acceptRetry: LoopTimer?
    var connections: [ObjectIdentifier: ServerConnection] = [:]
    public private(set) var draining = false
    private var onDrained: (() -> Void)?
    /// Called when accept() fails (e.g. out of file descriptors).
    public var onAcceptError: ((String) -> Void)?
    /// Told +1 when a client connection opens and -1 when it closes (for metrics).
    public var onConnectionCountChange: ((Int) -> Void)?
    private var nextConnectionId = 0
    private var memoryRelease: LoopTimer?
    private var memoryReleasePending = false
    /// How `releaseMemorySoon` gives freed memory back to the system: glibc's `malloc_trim` by
    /// default; a program on another allocator sets its own (the txgate executable: mimalloc's
    /// `mi_collect`, on this loop's thread, where the bodies were freed).
    public var releaseFreedMemory: () -> Void = { _ = malloc_trim(0) }

    /// `clients`: a table shared with other servers, to cap connections per client address
    /// across them; by default this server keeps its own (`limits.maxConnectionsPerClient`).
    /// `balancer`: the group whose servers share out their connections (before any of their
    /// loops runs; see `ConnectionBalancer`); its servers share one `clients` table, or none.
    public init(loop: EventLoop, address: SocketAddress, tls: TLSContext?, limits: ServerLimits,
                clients: ClientConnectionTable? = nil, balancer: ConnectionBalancer? = nil,
                errorBody: @escaping ErrorBodyMaker, handler: @escaping (ServerExchange) -> Void) throws {
        loop.preconditionInEventLoop()
        self.loop = loop
        self.clients = clients ?? (limits.maxConnectionsPerClient > 0 ? ClientConnectionTable(limit: limits.maxConnectionsPerClient) : nil)
        self.tls = tls
        self.limits = limits
        self.errorBody = errorBody
        self.handler = handler
        // One handshake a turn on TLS (see Listener); a plain connection costs little to take.
        listener = try Listener(loop: loop, address: address, backlog: 1024,
                                acceptsPerTurn: tls == nil ? Self.plainAcceptsPerTurn : 1,
                                onAccept: { [unowned(unsafe) self] fd, peer in self.accept(fd: fd, peer: peer) },
                                onError: { [unowned(unsafe) self] error in self.acceptFailed(error) })
        balance = balancer.map { ($0, $0.join(self)) }
    }

    /// Connections a plain listener takes per loop turn.
    static let plainAcceptsPerTurn = 16

    deinit { listener?.close() }

    /// The port actually bound (useful when asked for port 0).
    public var boundPort: Int { listener?.port ?? 0 }

    public var connectionCount: Int { connections.count }

    private func accept(fd: Int32, peer: UnsafePointer<sockaddr>) {
        let ip = SocketAddress.numericHost(peer)
        if let clients, !clients.admit(ip) {
            // Over the cap: closed before any byte is read or written (no TLS handshake, no
            // buffers), which is the cheapest answer to a flood from one address.
            evutil_closesocket(fd)
            return
        }
        if let balance {
            // Counted where it goes, at once, so that the next accept anywhere sees it.
            let member = balance.group.place(from: balance.member)
            if member !== balance.member {
                let server = member.server
                member.loop.execute { server.adopt(fd: fd, ip: ip) }
                return
            }
        }
        open(fd: fd, ip: ip)
    }

    /// A connection another server of the group accepted and handed over, on this loop. A
    /// server that has begun to drain closes it, as it would close an idle connection.
    private func adopt(fd: Int32, ip: String) {
        guard !draining else {
            refuse(fd: fd, ip: ip)
            return
        }
        open(fd: fd, ip: ip)
    }

    /// Closes an accepted socket that gets no connection, and forgets it.
    private func refuse(fd: Int32, ip: String) {
        balance?.member.open.subtract(1, ordering: .relaxed)
        clients?.release(ip)
        evutil_closesocket(fd)
    }

    /// Starts serving an accepted socket (admitted and counted).
    private func open(fd: Int32, ip: String) {
        setNoDelay(fd)
        var ssl: OpaquePointer?
        if let tls {
            ssl = SSL_new(tls.ctx)
            guard ssl != nil else { refuse(fd: fd, ip: ip); return }
        }
        guard let channel = Channel.accepted(loop: loop, fd: fd, ssl: ssl) else {
            refuse(fd: fd, ip: ip)
            return
        }
        nextConnectionId += 1
        let c = ServerConnection(server: self, id: nextConnectionId, channel: channel, remoteIP: ip, isTLS: tls != nil)
        connections[ObjectIdentifier(c)] = c
        onConnectionCountChange?(1)
        c.start()
        // A client sends its request (or TLS hello) as soon as it is connected, so it has most
        // likely arrived by now, and more surely after a handover: read in this turn rather than
        // after the next wait for events (bench/RESULTS.md, nineteenth attempt).
        channel.readSoon()
    }

    /// Out of descriptors or similar: pause accepting briefly instead of spinning.
    private func acceptFailed(_ error: Int32) {
        onAcceptError?("accept failed: \(String(cString: strerror(error)))")
        guard let listener else { return }
        listener.disable()
        if acceptRetry == nil {
            acceptRetry = LoopTimer(loop: loop) { [weak self] in self?.listener?.enable() }
        }
        acceptRetry?.schedule(afterMs: 100)
    }

    /// A large request body was dropped unfinished (a slow or abandoned client): give the
    /// freed memory back to the system 100 ms later (once the exchange has let go of the body
    /// too; one release for all the bodies dropped meanwhile, `releaseFreedMemory`). glibc keeps
    /// freed heap memory otherwise, and mimalloc gives it back only when the thread next
    /// allocates, so twenty stalled 9 MiB bodies would stay in the resident set after their 408.
    func releaseMemorySoon() {
        guard !memoryReleasePending else { return }
        memoryReleasePending = true
        if memoryRelease == nil {
            memoryRelease = LoopTimer(loop: loop) { [weak self] in
                self?.memoryReleasePending = false
                self?.releaseFreedMemory()
            }
        }
        memoryRelease?.schedule(afterMs: 100)
    }

    func connectionClosed(_ c: ServerConnection) {
        if connections.removeValue(forKey: ObjectIdentifier(c)) != nil {
            balance?.member.open.subtract(1, ordering: .relaxed)
            onConnectionCountChange?(-1)
        }
        clients?.release(c.remoteIP)
        if draining && connections.isEmpty { finishDrain() }
    }

    /// Graceful shutdown: stop accepting, close idle keep-alive connections, let requests in
    /// flight finish (their responses carry `Connection: close`), then call `onDrained`.
    public func beginDrain(onDrained: @escaping () -> Void) {
        loop.preconditionInEventLoop()
        draining = true
        balance?.member.accepting.store(false, ordering: .relaxed)
        self.onDrained = onDrained
        listener?.close()
        listener = nil
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
