import EventHTTP
import HTTPCore
import TxGateCore

/// Who is asking: the session named by `Authorization: Bearer`, the token header or the
/// cookie. Skipped when the policy that applies does not need a subject, so that open routes
/// keep working when the store is down.
struct IdentifyPhase: RequestPhase {
    let pdp: PolicyDecisionPoint
    let identifier: SubjectIdentifying

    func handle(_ ctx: RequestContext) {
        ctx.bearer = Self.bearerToken(ctx.head.headers)
        guard pdp.needsSubject(path: ctx.path[...], method: ctx.method) else { ctx.proceed(); return }
        identifier.identifySubject(token: ctx.bearer ?? identifier.sessionToken(in: ctx.head.headers),
                                   receivedNanos: ctx.exchange.startNanos) { r in
            switch r {
            case .failure(let e):
                ctx.fail(e)
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

/// Where the subject behind a token comes from: this gateway's sessions, or the remote AM's.
protocol SubjectIdentifying {
    /// The session token a request carries (token header or cookie).
    func sessionToken(in headers: HTTPHeaders) -> String?
    /// The subject for `token`; nil for no token or no live session. `receivedNanos`: when the
    /// request arrived (a remote lookup's time budget counts from there).
    func identifySubject(token: String?, receivedNanos: UInt64, _ done: @escaping (Result<Subject?, RequestFailure>) -> Void)
}

extension SubjectIdentifier: SubjectIdentifying {
    func identifySubject(token: String?, receivedNanos: UInt64, _ done: @escaping (Result<Subject?, RequestFailure>) -> Void) {
        identify(token: token) { done($0.mapError { .storeUnavailable($0.description) }) }
    }
}
