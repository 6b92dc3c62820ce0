import EventHTTP
import Foundation
import HTTPCore
import Logging
import TxGateCore

/// What every worker shares, read-only, built once at start-up.
final class SharedState: @unchecked Sendable {
    let config: GatewayConfig
    let logger: Logger
    let accessLogger: Logger
    let accessLog: Bool
    let workerCount: Int
    let listenAddress: SocketAddress
    let listenerTLS: TLSContext?
    let upstream: UpstreamEndpoint
    let upstreamAuthority: String
    let upstreamBasePath: String
    let upstreamDescription: String
    let limits: ServerLimits

    init(config: GatewayConfig, logger: Logger) throws {
        self.config = config
        self.logger = logger
        var access = logger
        access[metadataKey: "log"] = "access"
        accessLogger = access
        accessLog = config.log.access
        workerCount = config.workers
        listenAddress = try SocketAddress(host: config.listen.host, port: config.listen.port)
        if let tls = config.tls {
            listenerTLS = try TLSContext.server(certificateFile: tls.certificate, privateKeyFile: tls.privateKey)
        } else {
            listenerTLS = nil
        }
        let u = config.upstream
        let upstreamTLS = u.url.isTLS ? try TLSContext.client(caFile: u.caFile) : nil
        do {
            upstream = UpstreamEndpoint(address: try SocketAddress(host: u.url.host, port: u.url.port), tls: upstreamTLS,
                                        tlsHost: u.url.host, connectTimeoutMs: u.connectTimeoutMs,
                                        responseTimeoutMs: u.responseTimeoutMs, maxIdle: u.keepAlive)
        } catch {
            throw SocketError("upstream.url: \(error)")
        }
        upstreamAuthority = u.url.authority
        upstreamBasePath = u.url.basePath
        upstreamDescription = u.url.description
        limits = ServerLimits(maxHeaderBytes: config.limits.maxHeaderBytes, maxBodyBytes: config.limits.maxBodyBytes)
    }
}

/// One event loop on one thread, with its own listener and upstream pool. A connection
/// stays on the worker that accepted it.
final class Worker: @unchecked Sendable {
    let index: Int
    let shared: SharedState
    let loop = EventLoop()
    let pool: UpstreamPool
    private(set) var server: HTTPServer!
    let pipeline: Pipeline
    private var requestIds = RequestIdGenerator()

    init(index: Int, shared: SharedState) throws {
        self.index = index
        self.shared = shared
        pool = UpstreamPool(loop: loop, endpoint: shared.upstream)
        pipeline = Pipeline([GatewayEndpointsPhase(), ProxyPhase()])
        server = try HTTPServer(loop: loop, address: shared.listenAddress, tls: shared.listenerTLS, limits: shared.limits,
                                errorBody: { status, message in (ErrorBody.contentType, ErrorBody.json(status: status, message: message)) },
                                handler: { [unowned self] exchange in self.handle(exchange) })
        server.onAcceptError = { [shared] message in shared.logger.error("\(message)") }
    }

    var boundPort: Int { server.boundPort }

    private func handle(_ exchange: ServerExchange) {
        let id = ProxyHeaders.acceptableRequestId(exchange.head.headers.first("X-Request-Id")) ?? requestIds.next()
        RequestContext(exchange: exchange, worker: self, requestId: id).next()
    }

    /// Runs the loop on a new thread; `onExit` is called from that thread when it ends.
    func start(onExit: @escaping @Sendable () -> Void) {
        let t = Thread { [self] in
            loop.run()
            onExit()
        }
        t.name = "txgate-worker-\(index)"
        t.start()
    }

    /// Graceful stop, on the worker's thread: no new connections, in-flight requests finish.
    func drain(then done: @escaping () -> Void) {
        loop.execute { [self] in
            server.beginDrain { [self] in
                pool.closeIdle()
                done()
                loop.stop()
            }
        }
    }

    func forceClose() {
        loop.execute { [self] in server.closeAll() }
    }
}
