import HTTPCore
import TxGateCore

/// WIRE.md §3c: a retried request names its transaction with `_txid` (or `X-TxID`). The
/// parameters are removed from what goes upstream, so the resource a transaction binds to is
/// the same on the first try and on the retry.
struct RetryParametersPhase: RequestPhase {
    func handle(_ ctx: RequestContext) -> PhaseStatus {
        let (target, queryTxid) = RetryParameters.strip(ctx.target)
        ctx.target = target
        ctx.txid = queryTxid ?? ctx.head.headers.first("X-TxID")
        return .next
    }
}
