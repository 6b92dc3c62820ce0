import EventHTTP
import HTTPCore
import TxGateCore

/// Who is asking: the session named by `Authorization: Bearer`, the token header or the
/// cookie. Skipped when the policy that applies does not need a subject, so that open routes
/// keep working when the store is down.
struct IdentifyPhase: RequestPhase {
    let pdp: PolicyDecisionPoint
    let identifier: SubjectIdentifier

    func handle(_ ctx: RequestContext) {
        ctx.bearer = Self.bearerToken(ctx.head.headers)
        guard pdp.needsSubject(path: ctx.path[...], method: ctx.head.method) else { ctx.proceed(); return }
        identifier.identify(token: ctx.bearer ?? identifier.sessionToken(in: ctx.head.headers)) { r in
            switch r {
            case .failure(let e):
                ctx.fail(.storeUnavailable(e.description))
            case .success(let subject):
                ctx.subject = subject
                ctx.proceed()
            }
        }
    }

    static func bearerToken(_ h: HTTPHeaders) -> String? {
        guard let a = h.first("Authorization"), a.count > 7, a.prefix(7).lowercased() == "bearer " else { return nil }
        return String(a.dropFirst(7)).trimmingOWS()
    }
}
