import EventHTTP
import Foundation
import HTTPCore
import Logging
import TxGateCore
import TxGateRedis
import TxGateStore
import TxGateEmail

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
    let store: Store?
    /// The store when it is Redis: each worker attaches its loop to it.
    var redis: RedisStore? { store as? RedisStore }
    let auth: AuthService?
    let pdp: PolicyDecisionPoint?
    let policies: [Policy]

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
        // The authentication service and its store exist when there are journeys to run.
        if config.journeys.isEmpty {
            store = nil
            auth = nil
        } else {
            let s: Store
            let storeDescription: String
            if let url = config.store.redis {
                s = RedisStore(url: url, keyPrefix: config.store.keyPrefix, timeoutMs: config.store.timeoutMs,
                               waitReplicas: config.store.waitReplicas, waitTimeoutMs: config.store.waitTimeoutMs, logger: logger)
                storeDescription = url.description
            } else {
                s = try SQLiteStore(path: config.store.path)
                storeDescription = "sqlite:\(config.store.path)"
            }
            let (key, source) = try SigningKey.load(file: config.secrets.signingKeyFile)
            logger.info("authentication service enabled", metadata: [
                "store": .string(storeDescription), "signing_key": .string(source.rawValue),
                "journeys": .string(config.journeys.keys.sorted().joined(separator: ",")),
                "users": .stringConvertible(config.users.count),
            ])
            store = s
            let service = AuthService(config: config, store: s, signingKey: key, logger: logger)
            if let email = config.email {
                let sender = try Self.emailSender(email)
                service.emailDelivery = { message, loop, done in
                    sender.send(EmailMessage(to: message.to, subject: message.subject, body: message.body), on: loop) { r in
                        done(r.mapError { DeliveryError($0.description) })
                    }
                }
                logger.info("email delivery", metadata: ["via": .string(Self.describe(email))])
            }
            auth = service
        }
        policies = config.policies ?? []
        if let auth, let store, config.policies != nil {
            let engine = EmbeddedPolicyEngine(policies: policies, store: store, users: auth.users, loginJourney: config.loginJourney,
                                              maxPending: config.security.maxPendingTransactions, logger: logger)
            pdp = engine
            auth.policiesEndpoint = { [policies] ctx, realm in
                PoliciesEndpoint.handle(ctx, realm: realm, auth: auth, pdp: engine, policies: policies)
            }
        } else {
            pdp = nil
        }
        for warning in config.warnings() { logger.warning("\(warning)") }
    }

    static func emailSender(_ config: EmailConfig) throws -> EmailSender {
        switch config.delivery {
        case .outbox(let folder):
            return try OutboxSender(folder: folder)
        case .smtp(let smtp):
            var password: String?
            if let file = smtp.passwordFile {
                guard let data = FileManager.default.contents(atPath: file) else {
                    throw SocketError("email.smtp.passwordFile: cannot read '\(file)'")
                }
                password = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .newlines)
            }
            return try SMTPSender(url: smtp.url, username: smtp.username, password: password, from: smtp.from,
                                  startTLS: smtp.startTls, caFile: smtp.caFile)
        }
    }

    static func describe(_ config: EmailConfig) -> String {
        switch config.delivery {
        case .outbox(let folder): return "outbox:" + folder
        case .smtp(let smtp): return smtp.url
        }
    }

    /// The journey of the transaction policy that applies to a request, if any.
    func transactionJourney(path: Substring, method: String) -> String? {
        guard let p = policies.first(where: { $0.applies(path: path, method: method) }),
              case .transaction(let rule) = p.requirement else { return nil }
        return rule.journey
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
    let cache: DecisionCache

    init(index: Int, shared: SharedState) throws {
        self.index = index
        self.shared = shared
        pool = UpstreamPool(loop: loop, endpoint: shared.upstream)
        shared.redis?.attach(to: loop, worker: index)
        var phases: [RequestPhase] = [GatewayEndpointsPhase(), AuthEndpointsPhase(auth: shared.auth)]
        if let pdp = shared.pdp, let auth = shared.auth {
            phases.append(PolicyPhase(pdp: pdp, auth: auth, config: shared.config))
        }
        phases.append(ProxyPhase())
        pipeline = Pipeline(phases)
        cache = DecisionCache(maxEntries: shared.config.cache.maxEntries, defaultTtlMs: Int64(shared.config.cache.defaultTtlS) * 1000)
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

    /// A decision from the cache, or from the PDP (and then cached when AM's rules allow).
    /// Requests that name a transaction are never answered from the cache.
    func decide(_ q: DecisionQuery, pdp: PolicyDecisionPoint, _ done: @escaping (Result<Decision, PDPError>) -> Void) {
        guard q.environment.isEmpty else { pdp.evaluate(q, on: loop, done); return }
        let subjectKey = q.subject.map { $0.uid + "|" + $0.journeys.joined(separator: ",") } ?? "-"
        let key = DecisionCache.key(resource: q.resource, method: q.method, subject: subjectKey)
        let nowMs = Int64(Date().timeIntervalSince1970 * 1000)
        if let d = cache.get(key, nowMs: nowMs) { done(.success(d)); return }
        pdp.evaluate(q, on: loop) { [cache] r in
            if case .success(let d) = r { cache.put(key, d, nowMs: nowMs) }
            done(r)
        }
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
                shared.redis?.detach(from: loop)
                done()
                loop.stop()
            }
        }
    }

    func forceClose() {
        loop.execute { [self] in server.closeAll() }
    }
}
