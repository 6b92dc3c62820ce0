import EventHTTP
import Foundation
import HTTPCore
import Logging
import TxGateCore
import TxGateRedis

/// One event loop on one thread, with its own listener and upstream pool. A connection
/// stays on the worker that serves it: the one that accepted it, or the one it handed it to
/// (`ConnectionBalancer`).
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
        pipeline = Self.pipeline(shared, worker: index, loop: loop, pool: pool, readiness: readiness, accessLogBuffer: accessLogBuffer)
        let stats = shared.metrics.workers[index]
        loop.setLocal(stats, for: WorkerStats.loopKey)
        pool.onDispatch = { reused in stats.dispatched(reused: reused) }
        // The handler runs on the worker's loop only, which runs only while `start`'s thread holds
        // the worker: `unowned(unsafe)` skips the checked retain `unowned` cost per request.
        server = try HTTPServer(loop: loop, address: shared.listenAddress, tls: shared.listenerTLS, limits: shared.limits,
                                clients: shared.clientConnections, balancer: shared.connectionBalancer,
                                errorBody: { status, message in (ErrorBody.contentType, ErrorBody.json(status: status, message: message)) },
                                handler: { [unowned(unsafe) self] exchange in self.handle(exchange) })
        server.onAcceptError = { [shared] message in shared.logger.error("\(message)") }
        server.onConnectionCountChange = { change in stats.connectionsChanged(by: change) }
        server.strictTransportSecurity = shared.strictTransportSecurity
    }

    static func pipeline(_ shared: SharedState, worker: Int, loop: EventLoop, pool: UpstreamPool, readiness: Readiness,
                         accessLogBuffer: AccessLogBuffer) -> Pipeline {
        // The worker's own policy objects, for its requests and its PDP (`PolicySet.copiedForWorker`).
        let policies = shared.policies.copiedForWorker()
        let pipeline = Pipeline(phases(shared, policies: policies, loop: loop, pool: pool, readiness: readiness),
                                logger: shared.logger, accessLog: shared.accessLog, accessLogBuffer: accessLogBuffer,
                                upstreamDescription: shared.upstreamDescription,
                                trustedProxies: shared.config.trustedProxies)
        pipeline.policies = policies
        pipeline.metrics = RequestMetrics(shared.metrics, worker: worker, policyNames: shared.policies.policies.map(\.name))
        return pipeline
    }

    /// A reload: new requests run the new configuration's phases, new connections get the new
    /// TLS certificate; the listener, the upstream pool and the connections stay.
    func switchTo(_ next: SharedState) {
        loop.execute { [self] in
            pipeline = Self.pipeline(next, worker: index, loop: loop, pool: pool, readiness: readiness, accessLogBuffer: accessLogBuffer)
            if next.listenerTLS != nil { server.tls = next.listenerTLS }
            server.strictTransportSecurity = next.strictTransportSecurity
        }
    }

    /// The phases of the configuration's plan (`PipelinePlan`), built for one worker; `policies`
    /// are the worker's own copy.
    static func phases(_ shared: SharedState, policies: PolicySet, loop: EventLoop, pool: UpstreamPool,
                       readiness: Readiness) -> [RequestPhase] {
        let config = shared.config
        let plan = shared.plan
        let publicURL = config.effectivePublicURL.description
        let decider = plan.decisions == .none ? nil : Decider(shared, policies: policies, plan: plan, loop: loop)
        return plan.slots.map { slot -> RequestPhase in
            switch slot {
            case .canonicalRequest: return CanonicalRequestPhase(paths: config.paths)
            case .forwardAuth: return ForwardAuthPhase(config: config.forwardAuth, paths: config.paths)
            case .metricsEndpoint: return MetricsEndpointPhase(metrics: shared.metrics)
            case .gatewayEndpoints:
                return GatewayEndpointsPhase(store: shared.store, loop: loop, workers: shared.workerCount, readiness: readiness,
                                             logger: shared.logger)
            case .cors: return CORSPhase(cors: config.cors)
            case .readBodyForAuthEndpoints: return ReadBodyPhase(.forAuthEndpoints)
            case .authEndpoints:
                return AuthEndpointsPhase(auth: shared.auth, pdp: shared.pdp, policies: shared.policies, oauth: shared.oauth, loop: loop)
            case .retryParameters: return RetryParametersPhase()
            case .identify:
                let d = decider!
                return IdentifyPhase(pdp: d.pdp, identifier: d.identifier, accessTokens: d.accessTokens,
                                     externalIssuers: d.externalIssuers, clock: shared.clock)
            case .replay: return ReplayPhase(parking: decider!.parking!, publicURL: publicURL)
            case .readBodyForDecision: return ReadBodyPhase(.forBoundTransaction)
            case .decide:
                let cache = DecisionCache<DecisionKey>(maxEntries: config.cache.maxEntries,
                                                       defaultTtlMs: Int64(config.cache.defaultTtlS) * 1000)
                return DecidePhase(pdp: decider!.pdp, loop: loop, cache: cache, clock: shared.clock, publicURL: publicURL)
            case .challenge:
                return ChallengePhase(publicURL: publicURL, amURI: decider!.amURI, bearerForm: config.challenges.bearer,
                                      parking: decider!.parking, resources: config.oauth2?.resources ?? [],
                                      scopeStepUp: config.bearer.transactionChallenge == "scope")
            case .forwardAuthAnswer: return ForwardAuthAnswerPhase()
            case .upstreamRequest:
                return UpstreamRequestFilter(upstreamAuthority: shared.upstreamAuthority,
                                             sessionCookieName: shared.auth?.config.session.cookieName)
            case .txnToken: return TxnTokenPhase(issuer: shared.txnTokens!)
            case .readBodyForUpstream: return ReadBodyPhase(.always)
            case .proxy: return ProxyPhase(pool: pool, basePath: shared.upstreamBasePath)
            }
        }
    }

    /// What the decision phases share on one worker: the PDP, where subjects come from, where
    /// clients run journeys, and where browsers' requests wait for approval. The plan has
    /// decision slots exactly when the shared state has a PDP (both follow the configuration).
    private struct Decider {
        let pdp: PolicyDecisionPoint
        let identifier: SubjectIdentifying
        /// Where clients run journeys: this gateway's `/am/`, or the remote AM's public URL.
        let amURI: String
        /// Only with a store of this gateway's own.
        let parking: RequestParking?
        let accessTokens: AccessTokenCache?
        let externalIssuers: ExternalIssuers?

        init(_ shared: SharedState, policies: PolicySet, plan: PipelinePlan, loop: EventLoop) {
            let config = shared.config
            externalIssuers = plan.externalIssuers
                ? ExternalIssuers(config: config.bearer, endpoints: shared.externalIssuerEndpoints, loop: loop, clock: shared.clock,
                                  users: shared.auth?.users ?? [:], logger: shared.logger)
                : nil
            switch plan.decisions {
            case .embedded:
                guard let pdp = shared.pdp, let auth = shared.auth, let store = shared.store else {
                    preconditionFailure("the pipeline plan has the embedded PDP, the shared state does not")
                }
                self.pdp = pdp.forWorker(policies: policies)
                identifier = auth.identifier(on: loop)
                amURI = config.effectivePublicURL.description + "/am/"
                parking = RequestParking(store: store, loop: loop, maxBodyBytes: config.limits.maxParkedBodyBytes, logger: shared.logger)
                accessTokens = plan.oauth ? shared.oauth.map { AccessTokenCache(provider: $0, loop: loop) } : nil
            case .none:
                preconditionFailure("a pipeline plan without a PDP has no decision phases")
            case .remote:
                guard let remote = shared.remotePDP, let amURI = config.pdp.amURI else {
                    preconditionFailure("the pipeline plan has a remote PDP, the shared state does not")
                }
                let am = AMClient(config: config.pdp, endpoint: remote.endpoint, loop: loop, cookieName: config.session.cookieName,
                                  password: remote.agentPassword, logger: shared.logger)
                pdp = RemotePDP(am: am, loginJourney: config.loginJourney, logger: shared.logger)
                identifier = RemoteSessions(am: am, cookieName: config.session.cookieName)
                self.amURI = amURI
                parking = nil
                accessTokens = nil
            }
        }
    }

    var boundPort: Int { server.boundPort }

    private func handle(_ exchange: ServerExchange) {
        let id = ProxyHeaders.acceptableRequestId(exchange.head.headers.first("X-Request-Id")) ?? requestIds.next()
        RequestContext(exchange: exchange, requestId: id, pipeline: pipeline).run()
    }

    /// Runs the loop on a new thread, pinned to `cpu` if given (`cpuAffinity`); `onExit` is
    /// called from that thread when it ends.
    func start(cpu: Int? = nil, returningFreedMemory returnFreedMemory: (@Sendable () -> Void)? = nil,
               onExit: @escaping @Sendable () -> Void) {
        loop.execute { [self] in
            readiness.start()
            if let returnFreedMemory { server.releaseFreedMemory = returnFreedMemory }
        }
        let t = Thread { [self] in
            // One name for every worker (the kernel keeps 15 bytes, too few for an index past 9):
            // `perf` and `top -H` count them together; the "listening" lines give each one's CPU.
            CurrentThread.name("txgate-worker")
            // Before the loop's first turn, so that what the worker allocates while it serves
            // (its requests' buffers and objects) is first touched on its CPU; what `init` made
            // was allocated on the main thread.
            if let cpu {
                let error = CurrentThread.pin(to: cpu)
                if error != 0 {
                    shared.logger.error("cannot pin the worker to its CPU: it runs wherever the scheduler places it", metadata: [
                        "worker": .stringConvertible(index), "cpu": .stringConvertible(cpu),
                        "error": .string(String(cString: strerror(error))),
                    ])
                }
            }
            loop.run()
            accessLogBuffer.flush()
            onExit()
        }
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
