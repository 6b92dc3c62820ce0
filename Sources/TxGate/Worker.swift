import EventHTTP
import Foundation
import HTTPCore
import Logging
import TxGateCore
import TxGateRedis

/// One event loop on one thread, with its own listener and upstream pool. A connection
/// stays on the worker that accepted it.
// @unchecked Sendable: built on the main thread before its loop runs; after that its pool,
// server, pipeline and ids are only used on its loop (checked in EventHTTP in debug builds),
// and the main thread only calls `drain`/`forceClose`/`switchTo`, which hop onto the loop.
final class Worker: @unchecked Sendable {
    let index: Int
    /// The state the worker started with: its listener, upstream and store attachment.
    let shared: SharedState
    let loop = EventLoop()
    let pool: UpstreamPool
    private(set) var server: HTTPServer!
    /// Replaced by a reload; requests in flight keep the one they started with.
    private var pipeline: Pipeline
    let readiness: Readiness
    /// Access lines wait here until written out in one go (at most 100 ms).
    let accessLogBuffer: AccessLogBuffer
    private var requestIds = RequestIdGenerator()

    init(index: Int, shared: SharedState) throws {
        self.index = index
        self.shared = shared
        pool = UpstreamPool(loop: loop, endpoint: shared.upstream)
        accessLogBuffer = AccessLogBuffer(loop: loop)
        shared.redis?.attach(to: loop, worker: index)
        readiness = Readiness(loop: loop, upstream: shared.upstream, store: shared.store,
                              intervalMs: shared.config.readiness.intervalMs, worker: index, logger: shared.logger)
        pipeline = Self.pipeline(shared, loop: loop, pool: pool, readiness: readiness, accessLogBuffer: accessLogBuffer)
        pool.onDispatch = { [m = shared.metrics] reused in (reused ? m.upstreamReused : m.upstreamNew).increment() }
        server = try HTTPServer(loop: loop, address: shared.listenAddress, tls: shared.listenerTLS, limits: shared.limits,
                                clients: shared.clientConnections,
                                errorBody: { status, message in (ErrorBody.contentType, ErrorBody.json(status: status, message: message)) },
                                handler: { [unowned self] exchange in self.handle(exchange) })
        server.onAcceptError = { [shared] message in shared.logger.error("\(message)") }
        server.onConnectionCountChange = { [m = shared.metrics] change in m.clientConnections.increment(by: Double(change)) }
        server.strictTransportSecurity = shared.strictTransportSecurity
    }

    static func pipeline(_ shared: SharedState, loop: EventLoop, pool: UpstreamPool, readiness: Readiness,
                         accessLogBuffer: AccessLogBuffer) -> Pipeline {
        let pipeline = Pipeline(phases(shared, loop: loop, pool: pool, readiness: readiness), logger: shared.logger,
                                accessLog: shared.accessLog, accessLogBuffer: accessLogBuffer,
                                upstreamDescription: shared.upstreamDescription,
                                trustedProxies: shared.config.trustedProxies)
        pipeline.policies = shared.policies
        pipeline.metrics = RequestMetrics(shared.metrics)
        return pipeline
    }

    /// A reload: new requests run the new configuration's phases, new connections get the new
    /// TLS certificate; the listener, the upstream pool and the connections stay.
    func switchTo(_ next: SharedState) {
        loop.execute { [self] in
            pipeline = Self.pipeline(next, loop: loop, pool: pool, readiness: readiness, accessLogBuffer: accessLogBuffer)
            if next.listenerTLS != nil { server.tls = next.listenerTLS }
            server.strictTransportSecurity = next.strictTransportSecurity
        }
    }

    /// DESIGN.md's request phases, in order, for one worker.
    static func phases(_ shared: SharedState, loop: EventLoop, pool: UpstreamPool, readiness: Readiness) -> [RequestPhase] {
        let config = shared.config
        let publicURL = config.effectivePublicURL.description
        var phases: [RequestPhase] = [
            CanonicalRequestPhase(paths: config.paths),
            ForwardAuthPhase(config: config.forwardAuth, paths: config.paths),
            MetricsEndpointPhase(metrics: shared.metrics),
            GatewayEndpointsPhase(store: shared.store, loop: loop, workers: shared.workerCount, readiness: readiness,
                                  logger: shared.logger),
        ]
        if !config.cors.allowedOrigins.isEmpty { phases.append(CORSPhase(cors: config.cors)) }
        phases += [
            ReadBodyPhase(.forAuthEndpoints),
            AuthEndpointsPhase(auth: shared.auth, pdp: shared.pdp, policies: shared.policies, oauth: shared.oauth, loop: loop),
        ]
        if let pdp = shared.pdp, let auth = shared.auth {
            let parking = shared.store.map {
                RequestParking(store: $0, loop: loop, maxBodyBytes: config.limits.maxParkedBodyBytes, logger: shared.logger)
            }
            phases += decisionPhases(shared, loop: loop, pdp: pdp, identifier: auth.identifier(on: loop), amURI: publicURL + "/am/",
                                     parking: parking, accessTokens: shared.oauth.map { AccessTokenCache(provider: $0, loop: loop) })
        } else if let remote = shared.remotePDP, let amURI = config.pdp.amURI {
            let am = AMClient(config: config.pdp, endpoint: remote.endpoint, loop: loop, cookieName: config.session.cookieName,
                              password: remote.agentPassword, logger: shared.logger)
            phases += decisionPhases(shared, loop: loop, pdp: RemotePDP(am: am, loginJourney: config.loginJourney, logger: shared.logger),
                                     identifier: RemoteSessions(am: am, cookieName: config.session.cookieName), amURI: amURI, parking: nil)
        }
        phases += [
            ForwardAuthAnswerPhase(),
            UpstreamRequestFilter(upstreamAuthority: shared.upstreamAuthority, sessionCookieName: shared.auth?.config.session.cookieName),
        ]
        if let issuer = shared.txnTokens { phases.append(TxnTokenPhase(issuer: issuer)) }
        phases += [
            ReadBodyPhase(.always),
            ProxyPhase(pool: pool, basePath: shared.upstreamBasePath),
        ]
        return phases
    }

    /// Identify, (replay), decide, challenge: the same phases whichever PDP decides. `parking`:
    /// where browsers' requests wait for approval (only with a store of this gateway's own).
    static func decisionPhases(_ shared: SharedState, loop: EventLoop, pdp: PolicyDecisionPoint, identifier: SubjectIdentifying,
                               amURI: String, parking: RequestParking?, accessTokens: AccessTokenCache? = nil) -> [RequestPhase] {
        // `bearer.issuers`: its addresses and TLS files were checked with the configuration (ConfigCheck).
        let externalIssuers = shared.config.bearer.issuers.isEmpty ? nil
            : try? ExternalIssuers(config: shared.config.bearer, loop: loop, clock: shared.clock, users: shared.auth?.users ?? [:],
                                   logger: shared.logger)
        let config = shared.config
        let publicURL = config.effectivePublicURL.description
        let cache = DecisionCache<DecisionKey>(maxEntries: config.cache.maxEntries, defaultTtlMs: Int64(config.cache.defaultTtlS) * 1000)
        var phases: [RequestPhase] = [
            RetryParametersPhase(),
            IdentifyPhase(pdp: pdp, identifier: identifier, accessTokens: accessTokens, externalIssuers: externalIssuers, clock: shared.clock),
        ]
        if let parking { phases.append(ReplayPhase(parking: parking, publicURL: publicURL)) }
        return phases + [
            ReadBodyPhase(.forBoundTransaction),
            DecidePhase(pdp: pdp, loop: loop, cache: cache, clock: shared.clock, publicURL: publicURL),
            ChallengePhase(publicURL: publicURL, amURI: amURI, bearerForm: config.challenges.bearer, parking: parking),
        ]
    }

    var boundPort: Int { server.boundPort }

    private func handle(_ exchange: ServerExchange) {
        let id = ProxyHeaders.acceptableRequestId(exchange.head.headers.first("X-Request-Id")) ?? requestIds.next()
        RequestContext(exchange: exchange, requestId: id, pipeline: pipeline).run()
    }

    /// Runs the loop on a new thread; `onExit` is called from that thread when it ends.
    func start(onExit: @escaping @Sendable () -> Void) {
        loop.execute { [self] in readiness.start() }
        let t = Thread { [self] in
            loop.run()
            accessLogBuffer.flush()
            onExit()
        }
        t.name = "txgate-worker-\(index)"
        t.start()
    }

    /// Graceful stop, on the worker's thread: no new connections, in-flight requests finish.
    func drain(then done: @escaping () -> Void) {
        loop.execute { [self] in
            readiness.stop()
            server.beginDrain { [self] in
                pool.closeIdle()
                accessLogBuffer.flush()
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
