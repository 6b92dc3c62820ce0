import EventHTTP
import TxGateCore

/// What one request came to, built once when it ends: the access log line and the metrics
/// both read it (Envoy's stream info at the end of a request). What can still change (the
/// status, the bytes sent, the time) is taken then; the rest is read from the request as
/// asked, so that a field no one logs costs nothing.
struct RequestSummary {
    /// The response status; 499 when the client left before one started.
    let status: Int
    let bytesSent: Int
    let durationNanos: UInt64
    /// Why the request ended the way it did (`ReplyDetails`, `RequestFailure.details`).
    let details: String
    private let ctx: RequestContext

    init(_ ctx: RequestContext, details: String) {
        let ex = ctx.exchange
        self.ctx = ctx
        status = ex.responseStarted ? ex.status : 499
        bytesSent = ex.bodyBytesSent
        durationNanos = EventLoop.nowNanos() - ex.startNanos
        self.details = details
    }

    var requestId: String { ctx.requestId }
    /// The request's own method and target (its path, then any query), as received.
    var method: String { ctx.head.method }
    var target: String { ctx.head.target }
    /// The method decided on (a parked request's, the original one on `/-/authz`).
    var decidedMethod: String { ctx.method }
    /// On `/-/authz`: the original request the proxy asked about.
    var original: String? { ctx.forwardedBy != nil ? ctx.method + " " + ctx.target : nil }
    var client: String { ctx.client.address }
    /// The connection's peer, when a trusted proxy named the client.
    var peer: String? { ctx.client.viaTrustedProxy ? ctx.exchange.remoteIP : nil }
    var decision: Decision? { ctx.decision }
    /// The decision as the metrics count it (`RequestContext.decisionCount`).
    var decisionCount: WorkerStats.DecisionCount? { ctx.decisionCount }
    var policyName: String? { ctx.policyName }
    /// The applicable policy's index, when the pipeline has policies.
    var policyIndex: Int? { ctx.hasPolicies ? ctx.policyIndex : nil }
    var user: String? { ctx.subject?.uid }
    var userAgent: String? { ctx.head.headers.first("User-Agent") }
    var upstreamNanos: UInt64? { ctx.upstreamNanos }
    /// The approval request named, masked: enough to correlate, not to open its page.
    var approval: String? { ctx.approvalId.map(masked) }
}
