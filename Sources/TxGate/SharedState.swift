import EventHTTP
import Foundation
import HTTPCore
import Logging
import TxGateCore
import TxGateRedis
import TxGateStore
import TxGateEmail

/// What the process opens once, at start, and keeps for its whole life: the listener's
/// address, the upstream, the store and the authentication service's signing key, the
/// counters. A reload never touches them (`ConfigReload.effective` puts their settings back).
final class ProcessResources: Sendable {
    let workerCount: Int
    let listenAddress: SocketAddress
    let upstream: UpstreamEndpoint
    let upstreamAuthority: String
    let upstreamBasePath: String
    let upstreamDescription: String
    let limits: ServerLimits
    /// Connections per client address, counted across every worker (nil: no cap).
    let clientConnections: ClientConnectionTable?
    /// Shares accepted connections out evenly over the workers (nil: one worker).
    let connectionBalancer: ConnectionBalancer?
    /// The counters, kept across reloads (each pipeline counts requests under its own policy names).
    let metrics: GatewayMetrics
    /// Sessions, transactions, journeys: opened when the configuration at start has journeys.
    let store: Store?
    /// The authentication service's key, kept so that journeys in progress continue across reloads.
    let signingKey: [UInt8]?

    /// `clock`: the time the store's expiries are measured against (SQLite's TTLs; Redis keeps
    /// its own), the same clock the shared state decides with. Tests pass a clock they advance.
    init(config: GatewayConfig, logger: Logger, clock: WallClock = .system) throws {
        workerCount = config.workers
        listenAddress = try SocketAddress(host: config.listen.host, port: config.listen.port)
        let u = config.upstream
        upstream = try SharedState.upstreamEndpoint(u)
        (upstreamAuthority, upstreamBasePath, upstreamDescription) = (u.url.authority, u.url.basePath, u.url.description)
        limits = SharedState.serverLimits(config.limits)
        let perClient = config.limits.maxConnectionsPerClient
        clientConnections = perClient > 0 ? ClientConnectionTable(limit: perClient) : nil
        connectionBalancer = config.workers > 1 ? ConnectionBalancer() : nil
        metrics = GatewayMetrics(config: config)
        if config.journeys.isEmpty {
            (store, signingKey) = (nil, nil)
        } else {
            (store, signingKey) = try SharedState.openStore(config, logger: logger, metrics: metrics, clock: clock)
        }
    }

    /// The store when it is Redis: each worker attaches its loop to it.
    var redis: RedisStore? { (store as? MeasuredStore)?.inner as? RedisStore }
}

/// What every worker shares, built from one configuration over the process's resources: the
/// same code at start and on a reload (SIGHUP), which builds a new one that workers switch to
/// for new requests.
final class SharedState: Sendable {
    let config: GatewayConfig
    let resources: ProcessResources
    let logger: Logger
    let accessLog: AccessLog?
    let listenerTLS: TLSContext?
    /// `tls.hsts` as the header value, for responses sent over TLS.
    let strictTransportSecurity: String?
    let clock: WallClock
    /// Sessions, transactions, journeys: present with the authentication service.
    let store: Store?
    let auth: AuthService?
    let policies: PolicySet
    let pdp: PolicyDecisionPoint?
    /// `pdp.type: "am"`: how each worker reaches the AM, and the agent's password.
    let remotePDP: RemotePDPSettings?
    /// The ES256 keys of issued tokens (with `oauth2` or `txnTokens`), read again on each reload.
    let tokenKeys: TokenKeys?
    /// The OAuth 2.0 / OpenID Connect provider (`oauth2`).
    let oauth: OAuthProvider?
    /// Transaction Tokens to the backend (`txnTokens.enabled`).
    let txnTokens: TxnTokenIssuer?
    /// Which phases every worker runs (`PipelinePlan`).
    let plan: PipelinePlan
    /// Where `bearer.issuers` publish their keys (`ExternalIssuers.endpoints`).
    let externalIssuerEndpoints: [String: UpstreamEndpoint]

    var workerCount: Int { resources.workerCount }
    var listenAddress: SocketAddress { resources.listenAddress }
    var upstream: UpstreamEndpoint { resources.upstream }
    var upstreamAuthority: String { resources.upstreamAuthority }
    var upstreamBasePath: String { resources.upstreamBasePath }
    var upstreamDescription: String { resources.upstreamDescription }
    var limits: ServerLimits { resources.limits }
    var clientConnections: ClientConnectionTable? { resources.clientConnections }
    var connectionBalancer: ConnectionBalancer? { resources.connectionBalancer }
    var metrics: GatewayMetrics { resources.metrics }
    var redis: RedisStore? { resources.redis }

    /// Builds the services of `config` over `resources`; the TLS certificate and key, the token
    /// keys and the password files are read each time. Journeys need the store opened at
    /// start: a reload that adds them is refused.
    init(config: GatewayConfig, resources: ProcessResources, logger: Logger, clock: WallClock = .system) throws {
        self.config = config
        self.resources = resources
        self.logger = logger
        self.clock = clock
        plan = PipelinePlan(config)
        externalIssuerEndpoints = try ExternalIssuers.endpoints(config.bearer)
        accessLog = config.log.access && logger.logLevel <= .info ? AccessLog(logger: logger) : nil
        listenerTLS = try config.tls.map { try TLSContext.server(certificateFile: $0.certificate, privateKeyFile: $0.privateKey) }
        strictTransportSecurity = config.tls?.hsts?.headerValue
        policies = PolicySet(config.policies ?? [])
        // Who decides follows the plan (its one test of the configuration), so that the phases it
        // names always find their PDP here.
        remotePDP = plan.decisions == .remote ? try RemotePDPSettings(config.pdp, logger: logger) : nil
        if config.journeys.isEmpty {
            (store, auth) = (nil, nil)
        } else if let store = resources.store, let key = resources.signingKey {
            self.store = store
            auth = try Self.authService(config, store: store, key: key, clock: clock, logger: logger, metrics: resources.metrics)
        } else {
            throw ReloadRefused("journeys: the authentication service (and its store) can only be turned on by a restart")
        }
        pdp = plan.decisions == .embedded
            ? Self.pdp(config, policies: policies, store: store, clock: clock, logger: logger, metrics: resources.metrics) : nil
        // The key folder is read again on a reload: a newer key added before the SIGHUP starts signing.
        (tokenKeys, oauth, txnTokens) = try Self.tokens(config, auth: auth, clock: clock, logger: logger)
        for warning in config.warnings() { logger.warning("\(warning)") }
    }

    /// The token keys (read from their folder at start and on each reload), the provider and the
    /// Transaction Token issuer.
    private static func tokens(_ config: GatewayConfig, auth: AuthService?, clock: WallClock,
                               logger: Logger) throws -> (TokenKeys?, OAuthProvider?, TxnTokenIssuer?) {
        guard let auth, config.oauth2 != nil || config.txnTokens.enabled else { return (nil, nil, nil) }
        let lifetimes = [config.oauth2?.accessTokenTtlS ?? 0, config.oauth2?.idTokenTtlS ?? 0, config.txnTokens.ttlS]
        let (keys, created) = try TokenKeys.load(folder: config.secrets.tokenKeysFolder, now: clock.now,
                                                 maxTokenLifetimeS: lifetimes.max() ?? 0)
        logger.info("token signing keys", metadata: [
            "folder": .string(config.secrets.tokenKeysFolder), "kid": .string(keys.signingKid),
            "published": .stringConvertible(keys.published.count), "created": .stringConvertible(created),
        ])
        let oauth = try config.oauth2.map { try OAuthProvider(config: $0, auth: auth, keys: keys) }
        let issuer = auth.publicURL + "/am/oauth2/realms/root"
        let txn = config.txnTokens.enabled ? TxnTokenIssuer(config: config.txnTokens, keys: keys, issuer: issuer, clock: clock) : nil
        return (keys, oauth, txn)
    }

    static func upstreamEndpoint(_ u: UpstreamConfig) throws -> UpstreamEndpoint {
        let tls = u.url.isTLS ? try TLSContext.client(caFile: u.caFile) : nil
        do {
            return UpstreamEndpoint(address: try SocketAddress(host: u.url.host, port: u.url.port), tls: tls, tlsHost: u.url.host,
                                    connectTimeoutMs: u.connectTimeoutMs, responseTimeoutMs: u.responseTimeoutMs, maxIdle: u.keepAlive,
                                    idleTimeoutMs: u.idleTimeoutMs)
        } catch {
            throw SocketError("upstream.url: \(error)")
        }
    }

    static func serverLimits(_ l: LimitsConfig) -> ServerLimits {
        ServerLimits(maxHeaderBytes: l.maxHeaderBytes, maxBodyBytes: l.maxBodyBytes, headerTimeoutMs: l.headerTimeoutMs,
                     bodyTimeoutMs: l.bodyTimeoutMs, minBodyRate: l.minBodyRate, maxConnectionsPerClient: l.maxConnectionsPerClient)
    }

    /// The embedded engine over the store (there is one whenever the plan has the embedded PDP:
    /// journeys, hence the store, and policies).
    private static func pdp(_ config: GatewayConfig, policies: PolicySet, store: Store?, clock: WallClock,
                            logger: Logger, metrics: GatewayMetrics) -> PolicyDecisionPoint? {
        guard let store else { return nil }
        let decider = PolicyDecider(policies: policies, loginJourney: config.loginJourney,
                                    maxPending: config.security.maxPendingTransactions)
        logger.info("policy decisions from the embedded engine", metadata: ["policies": .stringConvertible(policies.policies.count)])
        return EmbeddedPDP(decider: decider, store: store, clock: clock, logger: logger, metrics: metrics,
                           auditRetentionMs: config.audit.retentionMs)
    }

    /// The store and the signing key: opened once per process (a reload keeps them).
    static func openStore(_ config: GatewayConfig, logger: Logger, metrics: GatewayMetrics,
                          clock: WallClock = .system) throws -> (Store, [UInt8]) {
        let store: Store
        let storeDescription: String
        if let url = config.store.redis {
            let gauge = metrics.storeEvictionPolicyOK
            let redis = RedisStore(url: url, keyPrefix: config.store.keyPrefix, timeoutMs: config.store.timeoutMs,
                                   waitReplicas: config.store.waitReplicas, waitTimeoutMs: config.store.waitTimeoutMs,
                                   fenced: .oneShot, allowEviction: config.store.allowEviction,
                                   onEvictionPolicy: { ok in gauge.record(ok ? 1 : 0) }, logger: logger)
            // Before any worker: a Redis that may evict keys is refused here, with the fix.
            if let warning = try redis.checkEvictionPolicyAtStart() { logger.warning("\(warning)") }
            store = MeasuredStore(redis, metrics: metrics)
            storeDescription = url.description
        } else {
            store = MeasuredStore(try SQLiteStore(path: config.store.path, clock: clock.nowMs), metrics: metrics)
            storeDescription = "sqlite:\(config.store.path)"
        }
        let (key, source) = try SigningKey.load(file: config.secrets.signingKeyFile)
        logger.info("authentication service enabled", metadata: [
            "store": .string(storeDescription), "signing_key": .string(source.rawValue),
            "journeys": .string(config.journeys.keys.sorted().joined(separator: ",")),
            "users": .stringConvertible(config.users.count),
        ])
        return (store, key)
    }

    /// Email delivery and the service over the store (built again on a reload).
    private static func authService(_ config: GatewayConfig, store: Store, key: [UInt8], clock: WallClock,
                                    logger: Logger, metrics: GatewayMetrics) throws -> AuthService {
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
        let webhook = try config.approvals.webhook.map(WebhookTarget.make)
        if let webhook {
            logger.info("approval requests webhook", metadata: ["url": .string(webhook.config.url.description)])
        }
        return AuthService(config: config, store: store, signingKey: key, emailDelivery: delivery, webhook: webhook, clock: clock, logger: logger,
                           metrics: metrics)
    }

    static func emailSender(_ config: EmailConfig) throws -> EmailSender {
        switch config.delivery {
        case .outbox(let folder):
            return try OutboxSender(folder: folder)
        case .smtp(let smtp):
            return try smtpSender(smtp)
        }
    }

    /// Reads the password file and checks the settings; connects to nothing.
    static func smtpSender(_ smtp: SMTPConfig) throws -> SMTPSender {
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

    static func describe(_ config: EmailConfig) -> String {
        switch config.delivery {
        case .outbox(let folder): return "outbox:" + folder
        case .smtp(let smtp): return smtp.url
        }
    }
}
