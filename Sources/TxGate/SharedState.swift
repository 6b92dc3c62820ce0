import EventHTTP
import Foundation
import HTTPCore
import Logging
import TxGateCore
import TxGateRedis
import TxGateStore
import TxGateEmail

/// What every worker shares, built once at start-up and never changed after.
final class SharedState: Sendable {
    let config: GatewayConfig
    let logger: Logger
    let accessLog: AccessLog?
    let workerCount: Int
    let listenAddress: SocketAddress
    let listenerTLS: TLSContext?
    let upstream: UpstreamEndpoint
    let upstreamAuthority: String
    let upstreamBasePath: String
    let upstreamDescription: String
    let limits: ServerLimits
    /// Connections per client address, counted across every worker (nil: no cap).
    let clientConnections: ClientConnectionTable?
    let clock: WallClock
    /// Sessions, transactions, journeys: present with the authentication service.
    let store: Store?
    /// The store when it is Redis: each worker attaches its loop to it.
    var redis: RedisStore? { (store as? MeasuredStore)?.inner as? RedisStore }
    let auth: AuthService?
    let policies: PolicySet
    let pdp: PolicyDecisionPoint?
    let metrics: GatewayMetrics

    init(config: GatewayConfig, logger: Logger, clock: WallClock = .system) throws {
        self.config = config
        self.logger = logger
        self.clock = clock
        let metrics = GatewayMetrics(config: config)
        self.metrics = metrics
        accessLog = config.log.access ? AccessLog(logger: logger) : nil
        workerCount = config.workers
        listenAddress = try SocketAddress(host: config.listen.host, port: config.listen.port)
        listenerTLS = try config.tls.map { try TLSContext.server(certificateFile: $0.certificate, privateKeyFile: $0.privateKey) }
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
        let l = config.limits
        limits = ServerLimits(maxHeaderBytes: l.maxHeaderBytes, maxBodyBytes: l.maxBodyBytes, headerTimeoutMs: l.headerTimeoutMs,
                              bodyTimeoutMs: l.bodyTimeoutMs, minBodyRate: l.minBodyRate,
                              maxConnectionsPerClient: l.maxConnectionsPerClient)
        clientConnections = l.maxConnectionsPerClient > 0 ? ClientConnectionTable(limit: l.maxConnectionsPerClient) : nil
        // The authentication service and its store exist when there are journeys to run.
        (store, auth) = config.journeys.isEmpty ? (nil, nil) : try Self.authService(config, clock: clock, logger: logger, metrics: metrics)
        policies = PolicySet(config.policies ?? [])
        if let store, config.policies != nil, auth != nil {
            let decider = PolicyDecider(policies: policies, loginJourney: config.loginJourney,
                                        maxPending: config.security.maxPendingTransactions)
            pdp = EmbeddedPDP(decider: decider, store: store, clock: clock, logger: logger, metrics: metrics)
        } else {
            pdp = nil
        }
        for warning in config.warnings() { logger.warning("\(warning)") }
    }

    /// The store, the signing key, email delivery, and the service over them.
    private static func authService(_ config: GatewayConfig, clock: WallClock, logger: Logger,
                                    metrics: GatewayMetrics) throws -> (Store, AuthService) {
        let store: Store
        let storeDescription: String
        if let url = config.store.redis {
            store = MeasuredStore(RedisStore(url: url, keyPrefix: config.store.keyPrefix, timeoutMs: config.store.timeoutMs,
                               waitReplicas: config.store.waitReplicas, waitTimeoutMs: config.store.waitTimeoutMs, logger: logger), metrics: metrics)
            storeDescription = url.description
        } else {
            store = MeasuredStore(try SQLiteStore(path: config.store.path), metrics: metrics)
            storeDescription = "sqlite:\(config.store.path)"
        }
        let (key, source) = try SigningKey.load(file: config.secrets.signingKeyFile)
        logger.info("authentication service enabled", metadata: [
            "store": .string(storeDescription), "signing_key": .string(source.rawValue),
            "journeys": .string(config.journeys.keys.sorted().joined(separator: ",")),
            "users": .stringConvertible(config.users.count),
        ])
        var delivery: EmailDelivery?
        if let email = config.email {
            let sender = try emailSender(email)
            delivery = { message, loop, done in
                sender.send(message, on: loop) { r in
                    done(r.mapError { DeliveryError($0.description) })
                }
            }
            logger.info("email delivery", metadata: ["via": .string(describe(email))])
        }
        let service = AuthService(config: config, store: store, signingKey: key, emailDelivery: delivery, clock: clock, logger: logger,
                                  metrics: metrics)
        return (store, service)
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
}
