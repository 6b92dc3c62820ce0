import EventHTTP
import HTTPCore
import TxGateCore

/// What goes upstream: the request's headers under the header rules (hop-by-hop removed,
/// forwarding headers set), without the gateway's own credentials. A request that spends an
/// approval carries `Idempotency-Key` with its TxId (draft-ietf-httpapi-idempotency-key-header),
/// replacing the client's: however the request reaches the backend, the backend can tell a
/// repetition of the approved one. A request with a subject the gateway verified carries it as
/// `X-TxGate-User` (the client's own is never passed on), as forward-auth's answer does.
struct UpstreamRequestFilter: RequestPhase {
    let upstreamAuthority: String
    /// The session cookie/header name, when there is an authentication service.
    let sessionCookieName: String?

    func handle(_ ctx: RequestContext) -> PhaseStatus {
        // Built in place: made here and stored, the fields were copied once more (six retains
        // and releases per request).
        ctx.upstreamHeaders = ForwardedFields(ctx.exchange.head.headers)
        fill(&ctx.upstreamHeaders!, ctx)
        return .next
    }

    private func fill(_ headers: inout ForwardedFields, _ ctx: RequestContext) {
        let ex = ctx.exchange
        ProxyHeaders.upstreamRequest(&headers, clientIP: ex.remoteIP, forwardedChain: ctx.client.viaTrustedProxy,
                                     isTLS: ex.isTLS, upstreamAuthority: upstreamAuthority, requestId: ctx.requestId,
                                     credentials: sessionCookieName.map {
                                         GatewayCredentials(cookieName: $0, bearerToken: ctx.subject?.token)
                                     })
        if let parked = ctx.replay {
            // The parked request's own representation headers, not the GET's that brought the browser back.
            headers.remove("Content-Type")
            headers.remove("Accept")
            if let type = parked.contentType { headers.add("Content-Type", type) }
            if let accept = parked.accept { headers.add("Accept", accept) }
        }
        if let subject = ctx.subject { headers.add("X-TxGate-User", subject.uid) }
        if let txid = ctx.consumedTxid {
            headers.remove("Idempotency-Key")
            headers.add("Idempotency-Key", "\"" + txid + "\"")
        }
    }
}
