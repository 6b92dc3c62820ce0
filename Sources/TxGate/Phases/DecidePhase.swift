import EventHTTP
import HTTPCore
import TxGateCore

/// Asks for a decision: from the worker's cache, else from the PDP (then cached when AM's
/// rules allow). Allow → next phase; advice → the challenge phase; otherwise 403.
///
/// A cached answer costs a hash of the request's own strings (`DecisionKey`): the query for the
/// PDP, with the resource's URL, is built only when the PDP is asked.
struct DecidePhase: RequestPhase {
    let pdp: PolicyDecisionPoint
    let loop: EventLoop
    let cache: DecisionCache<DecisionKey>
    let clock: WallClock
    let publicURL: String

    func handle(_ ctx: RequestContext) -> PhaseStatus {
        ctx.policyName = ctx.policy?.name
        // Requests that name a transaction are never answered from the cache.
        guard ctx.txid == nil else { return ask(ctx, caching: nil) }
        let key = DecisionKey(method: ctx.method, target: ctx.target, subject: ctx.subject.map { pdp.cacheKey(for: $0) })
        let nowMs = clock.nowMs()
        if let d = cache.get(key, nowMs: nowMs) {
            return conclude(ctx, d)
        }
        return ask(ctx, caching: (key, nowMs))
    }

    /// Asks the PDP; caches its answer under `caching` when given (and when AM's rules allow).
    private func ask(_ ctx: RequestContext, caching: (key: DecisionKey, nowMs: Int64)?) -> PhaseStatus {
        var q = DecisionQuery(realm: "/", path: ctx.path[...], resource: publicURL + ctx.target, method: ctx.method,
                              subject: ctx.subject, txid: ctx.txid, body: { ctx.bodyBytes }, contentType: ctx.contentType)
        q.receivedNanos = ctx.exchange.startNanos
        q.requestId = ctx.requestId
        q.txidApprovedAhead = ctx.txidApprovedAhead
        return ctx.suspend { resume in
            var resume = Optional(resume)
            pdp.evaluate(q, on: loop) { [cache] r in
                switch r {
                case .failure(let e):
                    resume.take()?.fail(RequestFailure(e))
                case .success(let d):
                    if let caching { cache.put(caching.key, d, nowMs: caching.nowMs) }
                    resume.take()?.resume(conclude(ctx, d))
                }
            }
        }
    }

    private func conclude(_ ctx: RequestContext, _ d: Decision) -> PhaseStatus {
        ctx.decision = d
        if d.allows(ctx.method) || !d.advices.isEmpty {
            return .next
        }
        return .fail(.forbidden("no policy allows \(ctx.method) \(ctx.path)" + (ctx.subject.map { " for \($0.uid)" } ?? "")))
    }
}
