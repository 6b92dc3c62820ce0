import EventHTTP
import HTTPCore
import Logging
import TxGateCore

/// Why a request ends without reaching the upstream, or with the upstream failing. The
/// pipeline turns each into the gateway's JSON error and logs what needs logging, in one
/// place (Pingora's `fail_to_proxy`).
enum RequestFailure: Error, Equatable {
    case badRequest(String)
    case forbidden(String)
    case notFound(String)
    case methodNotAllowed(String)
    case unsupportedMediaType(String)
    /// 413: a body the gateway would have to keep (a parked browser request) is too large.
    case payloadTooLarge(String)
    case tooManyTransactions(Int)
    /// The store cannot be reached; the reason goes to the log, not to the client.
    case storeUnavailable(String)
    /// The remote PDP (AM) cannot be reached or answered nonsense; the reason goes to the log.
    case pdpUnavailable(String)
    case upstream(UpstreamFailure)
    case internalError(String)

    init(_ e: PDPError) {
        switch e {
        case .unavailable(let why): self = .storeUnavailable(why)
        case .remoteUnavailable(let why): self = .pdpUnavailable(why)
        case .badRequest(let message): self = .badRequest(message)
        case .tooManyTransactions(let n): self = .tooManyTransactions(n)
        case .unsupportedMediaType(let message): self = .unsupportedMediaType(message)
        }
    }

    var status: Int {
        switch self {
        case .badRequest: return 400
        case .forbidden: return 403
        case .notFound: return 404
        case .methodNotAllowed: return 405
        case .unsupportedMediaType: return 415
        case .payloadTooLarge: return 413
        case .tooManyTransactions: return 429
        case .storeUnavailable, .pdpUnavailable: return 503
        case .upstream(let f): return f.status
        case .internalError: return 500
        }
    }

    /// The access log's `details`: the kind of failure.
    var details: String {
        switch self {
        case .badRequest: return "bad_request"
        case .forbidden: return "forbidden"
        case .notFound: return "not_found"
        case .methodNotAllowed: return "method_not_allowed"
        case .unsupportedMediaType: return "unsupported_media_type"
        case .payloadTooLarge: return "payload_too_large"
        case .tooManyTransactions: return "too_many_transactions"
        case .storeUnavailable: return "store_unavailable"
        case .pdpUnavailable: return "pdp_unavailable"
        case .upstream(let f): return f.details
        case .internalError: return "internal_error"
        }
    }

    /// What the client reads.
    var message: String {
        switch self {
        case .badRequest(let m), .forbidden(let m), .notFound(let m), .methodNotAllowed(let m), .unsupportedMediaType(let m),
             .payloadTooLarge(let m), .internalError(let m):
            return m
        case .tooManyTransactions(let n):
            return "more than \(n) transactions are waiting for approval; approve or let them expire first"
        case .storeUnavailable:
            return "the authentication service cannot reach its store; try again shortly"
        case .pdpUnavailable:
            return "the policy decision point cannot be reached; try again shortly"
        case .upstream(let f):
            return Self.clientMessage(f)
        }
    }

    /// JSON members after `message`: an upstream failure after the request may have been
    /// processed says that its outcome is unknown (WIRE-EXTENSIONS), so that a client does not
    /// take a 502 for "nothing happened" and send the transfer again.
    var bodyMembers: String {
        if case .upstream(let f) = self, f.requestMayHaveBeenProcessed { return #""outcome":"unknown""# }
        return ""
    }

    /// What a client reads about an upstream failure: the kind, never the detail (OpenSSL's
    /// error strings, addresses), which goes to the log.
    static func clientMessage(_ f: UpstreamFailure) -> String {
        switch f {
        case .connectFailed: return "the upstream cannot be reached"
        case .connectTimeout: return "the upstream did not accept a connection in time"
        case .responseTimeout: return "the upstream did not respond in time"
        case .protocolError: return "the upstream sent an invalid response"
        case .closed: return "the upstream closed the connection before its response was complete"
        }
    }
}

extension UpstreamFailure {
    /// The access log's `details` for a request that failed upstream.
    var details: String {
        switch self {
        case .connectFailed: return "upstream_connect_failed"
        case .connectTimeout: return "upstream_connect_timeout"
        case .responseTimeout: return "upstream_response_timeout"
        case .protocolError: return "upstream_protocol_error"
        case .closed: return "upstream_closed"
        }
    }
}

/// The fixed list of phases a worker runs for each request, and the one exit for failures
/// and for the access log.
final class Pipeline {
    /// Each phase in a class of its own concrete type (`PhaseCell`), and those cells unretained,
    /// for the phase loop: calling a phase through an array of existentials copied it for every
    /// call, retaining and releasing its box or each of its references (about 16 atomic
    /// operations per proxied request); a cell is called at +0 and calls its phase in place.
    /// `cells` keeps them alive, and a request holds its pipeline.
    let cells: [PhaseCaller]
    let callers: [Unmanaged<PhaseCaller>]
    private let logger: Logger
    private let accessLog: AccessLog?
    /// The worker's buffer for access lines: it outlives a reload's pipeline.
    private let accessLogBuffer: AccessLogBuffer
    private let upstreamDescription: String
    /// Whose `X-Forwarded-For` names the client (`RequestContext.client`).
    let trustedProxies: TrustedProxies
    /// The configuration's policies (`RequestContext.policy` finds the applicable one once).
    var policies = PolicySet([])
    /// Requests counted as they end (`/-/metrics`).
    var metrics: RequestMetrics?

    init(_ phases: [RequestPhase], logger: Logger, accessLog: AccessLog?, accessLogBuffer: AccessLogBuffer,
         upstreamDescription: String, trustedProxies: TrustedProxies = TrustedProxies()) {
        self.accessLogBuffer = accessLogBuffer
        cells = phases.map { PhaseCaller.cell(for: $0) }
        callers = cells.map { Unmanaged.passUnretained($0) }
        self.trustedProxies = trustedProxies
        self.logger = logger
        self.accessLog = accessLog
        self.upstreamDescription = upstreamDescription
    }

    func fail(_ ctx: RequestContext, _ failure: RequestFailure) {
        switch failure {
        case .storeUnavailable(let why):
            logger.error("store unavailable", metadata: ["request_id": .string(ctx.requestId), "error": .string(why)])
        case .pdpUnavailable(let why):
            logger.error("pdp unavailable", metadata: ["request_id": .string(ctx.requestId), "error": .string(why)])
        case .upstream(let f):
            metrics?.metrics.upstreamFailed(f)
            var m: Logger.Metadata = [
                "request_id": .string(ctx.requestId), "error": .string(f.description), "upstream": .string(upstreamDescription),
                "method": .string(ctx.method), "path": .string(ctx.path),
            ]
            if f.requestMayHaveBeenProcessed {
                // The backend may have executed it: an operator reconciling needs to know which approval.
                m["outcome"] = "unknown"
                if let txid = ctx.consumedTxid { m["txid"] = .string(masked(txid)) }
            }
            logger.warning("upstream request failed", metadata: m)
        case .internalError(let why):
            logger.error("internal error", metadata: ["request_id": .string(ctx.requestId), "error": .string(why)])
        default:
            break
        }
        let ex = ctx.exchange
        if ex.responseStarted && !ex.withdrawUnsentResponse() {
            // Too late for an error response: cut the connection so the client sees a truncated body.
            ex.abort()
        } else {
            var h = HTTPHeaders()
            h.add("Content-Type", ErrorBody.contentType)
            send(ctx, status: failure.status, headers: h,
                        body: ErrorBody.json(status: failure.status, message: failure.message, members: failure.bodyMembers))
        }
        log(ctx, details: failure.details)
    }

    /// Sends an answer of the gateway's own (a local reply, or a failure's error body), with the
    /// request id and the headers a phase added for every answer (`ctx.responseHeaders`).
    /// The request id and `ctx.responseHeaders` are written into the head after `headers`,
    /// not added to them: a reply's headers are still shared with the reply, and adding a field
    /// copied them whole.
    private func send(_ ctx: RequestContext, status: Int, headers: HTTPHeaders, body: [UInt8]) {
        let more = ctx.responseHeaders
        ctx.exchange.respond(status: status, headers: headers, body: body,
                             moreHaveStrictTransportSecurity: more.contains("Strict-Transport-Security")) { w in
            w.writeField("X-Request-Id", ctx.requestId)
            w.writeFields(more)
        }
    }

    /// Sends a local reply and logs it: the authentication service's refusals in AM's form are
    /// logged like the gateway's own failures (they never reach `fail`: AM's clients read their body).
    func reply(_ ctx: RequestContext, _ reply: LocalReply) {
        send(ctx, status: reply.status, headers: reply.headers, body: reply.body)
        if reply.details == .authServiceRefused {
            logger.info("authentication service refused the request", metadata: [
                "request_id": .string(ctx.requestId), "status": .stringConvertible(reply.status), "path": .string(ctx.path),
            ])
        }
        log(ctx, details: reply.details.rawValue)
    }

    /// A phase broke the rules of `PhaseResume` (a bug): logged, never silent.
    func misuse(_ ctx: RequestContext, _ what: String) {
        logger.error("internal error", metadata: ["request_id": .string(ctx.requestId), "error": .string(what)])
    }

    /// A proxied request about to go upstream a second time: never silent.
    func resent(_ ctx: RequestContext, after f: UpstreamFailure) {
        metrics?.metrics.upstreamResends.increment()
        logger.warning("upstream request re-sent on a new connection", metadata: [
            "request_id": .string(ctx.requestId), "method": .string(ctx.method), "path": .string(ctx.path),
            "error": .string(f.description), "upstream": .string(upstreamDescription),
        ])
    }

    /// The request is over (answered, proxied, or the client left): one summary feeds the
    /// access log and the metrics, once.
    func log(_ ctx: RequestContext, details: String) {
        let summary = RequestSummary(ctx, details: details)
        if let accessLog { accessLogBuffer.append(accessLog, summary) }
        metrics?.finished(summary)
    }
}
