import EventHTTP
import TxGateCore

/// What one request came to, built once when it ends: the access log line and the metrics
/// both read it (Envoy's stream info at the end of a request).
struct RequestSummary {
    let requestId: String
    /// The request's own method and path, as received.
    let method: String
    let path: String
    /// The method decided on (a parked request's, the original one on `/-/authz`).
    let decidedMethod: String
    /// On `/-/authz`: the original request the proxy asked about.
    let original: String?
    /// The response status; 499 when the client left before one started.
    let status: Int
    let bytesSent: Int
    let durationNanos: UInt64
    let client: String
    /// The connection's peer, when a trusted proxy named the client.
    let peer: String?
    let decision: Decision?
    let policyName: String?
    /// The applicable policy's index, when the pipeline has policies.
    let policyIndex: Int?
    let user: String?
    let userAgent: String?
    let upstreamNanos: UInt64?
    /// Why the request ended the way it did (`ReplyDetails`, `RequestFailure.details`).
    let details: String

    init(_ ctx: RequestContext, details: String) {
        let ex = ctx.exchange
        requestId = ctx.requestId
        method = ex.head.method
        path = String(ex.head.path)
        decidedMethod = ctx.method
        original = ctx.forwardedBy != nil ? ctx.method + " " + ctx.target : nil
        status = ex.responseStarted ? ex.status : 499
        bytesSent = ex.bodyBytesSent
        durationNanos = EventLoop.nowNanos() - ex.startNanos
        client = ctx.client.address
        peer = ctx.client.viaTrustedProxy ? ex.remoteIP : nil
        decision = ctx.decision
        policyName = ctx.policyName
        policyIndex = ctx.hasPolicies ? ctx.policyIndex : nil
        user = ctx.subject?.uid
        userAgent = ex.head.headers.first("User-Agent")
        upstreamNanos = ctx.upstreamNanos
        self.details = details
    }
}
