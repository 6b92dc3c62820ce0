import TxGateCore

/// Adds `Txn-Token` to what goes upstream; a `Txn-Token` the client sent is never forwarded.
struct TxnTokenPhase: RequestPhase {
    let issuer: TxnTokenIssuer

    func handle(_ ctx: RequestContext) -> PhaseStatus {
        ctx.upstreamHeaders?.remove("Txn-Token")
        if let token = issuer.token(ctx) { ctx.upstreamHeaders?.add("Txn-Token", token) }
        return .next
    }
}
