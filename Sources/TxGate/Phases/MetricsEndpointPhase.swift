import EventHTTP
import HTTPCore
import TxGateCore

/// `/-/metrics`: the Prometheus text format, to clients in `metrics.allowFrom` only (by default
/// loopback). The client is the one a trusted proxy relays for (`RequestContext.client`), not
/// the connection's peer: with nginx on loopback in front, the peer is always allowed.
/// Everything else goes on to the other gateway endpoints and the proxy.
struct MetricsEndpointPhase: RequestPhase {
    static let path = "/-/metrics"
    var appliesTo: PathFamily { .gateway }
    static let contentType = "text/plain; version=0.0.4; charset=utf-8"
    let metrics: GatewayMetrics

    func handle(_ ctx: RequestContext) -> PhaseStatus {
        guard ctx.path == Self.path else { return .next }
        guard metrics.allowFrom.contains(address: ctx.client.address) else {
            return .fail(.forbidden("metrics are not served to this address (see metrics.allowFrom)"))
        }
        guard ctx.head.method == "GET" || ctx.head.method == "HEAD" else {
            return .fail(.methodNotAllowed("\(ctx.head.method) is not allowed on \(Self.path); use GET"))
        }
        var h = HTTPHeaders()
        h.add("Content-Type", Self.contentType)
        h.add("Cache-Control", "no-store")
        return .reply(LocalReply(status: 200, headers: h, body: metrics.exposition(), details: .gatewayEndpoint))
    }
}
