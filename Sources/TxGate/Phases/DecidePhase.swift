import EventHTTP
import HTTPCore
import TxGateCore

/// Asks for a decision: from the worker's cache, else from the PDP (then cached when AM's
/// rules allow). Allow → next phase; advice → the challenge phase; otherwise 403.
struct DecidePhase: RequestPhase {
    let pdp: PolicyDecisionPoint
    let loop: EventLoop
    let cache: DecisionCache
    let clock: WallClock
    let publicURL: String

    func handle(_ ctx: RequestContext) {
        ctx.policyName = ctx.policy?.name
        var q = DecisionQuery(realm: "/", path: ctx.path[...], resource: publicURL + ctx.target, method: ctx.method,
                              subject: ctx.subject, txid: ctx.txid, body: { ctx.bodyBytes }, contentType: ctx.contentType)
        q.receivedNanos = ctx.exchange.startNanos
        decide(q) { r in
            switch r {
            case .failure(let e):
                ctx.fail(RequestFailure(e))
            case .success(let d):
                ctx.decision = d
                if d.allows(q.method) || !d.advices.isEmpty {
                    ctx.proceed()
                } else {
                    ctx.fail(.forbidden("no policy allows \(q.method) \(q.path)" + (q.subject.map { " for \($0.uid)" } ?? "")))
                }
            }
        }
    }

    /// A decision from the cache, or from the PDP. Requests that name a transaction are never
    /// answered from the cache.
    private func decide(_ q: DecisionQuery, _ done: @escaping (Result<Decision, PDPError>) -> Void) {
        guard q.txid == nil else { pdp.evaluate(q, on: loop, done); return }
        let subjectKey = q.subject.map { pdp.cacheKey(for: $0) } ?? "-"
        let key = DecisionCache.key(resource: q.resource, method: q.method, subject: subjectKey)
        let nowMs = clock.nowMs()
        if let d = cache.get(key, nowMs: nowMs) { done(.success(d)); return }
        pdp.evaluate(q, on: loop) { [cache] r in
            if case .success(let d) = r { cache.put(key, d, nowMs: nowMs) }
            done(r)
        }
    }
}
