import EventHTTP
import HTTPCore
import Logging
import TxGateCore

/// `pdp.type: "am"`: every decision comes from a remote AM's `policies?_action=evaluate`
/// (WIRE.md §1), asked as the agent, for the user's session (`subject.ssoToken`), with
/// `environment.TxId` on a retry. The AM's answer is used exactly as the embedded engine's
/// would be; an answer that is late, not 200 or not a decision fails closed. One per worker,
/// on its loop.
final class RemotePDP: PolicyDecisionPoint, @unchecked Sendable {
    // @unchecked: built for one worker and only used on its loop (the AMClient's pool checks it).
    let am: AMClient
    let loginJourney: String
    let logger: Logger

    init(am: AMClient, loginJourney: String, logger: Logger) {
        self.am = am
        self.loginJourney = loginJourney
        self.logger = logger
    }

    /// Only the AM knows what a route needs: every request goes to it (unless cached).
    func needsSubject(applicable: Policy?) -> Bool { true }

    /// Per session: only the AM knows what a session has done (its journeys, its level).
    func cacheKey(for subject: Subject) -> SubjectKey { SubjectKey(id: subject.token) }

    func evaluate(_ q: DecisionQuery, on executor: CallbackExecutor, _ done: @escaping (Result<Decision, PDPError>) -> Void) {
        // No session: AM would judge the agent itself (its default subject), so the gateway
        // asks the user to log in first, as IG does.
        guard let subject = q.subject else { done(.success(PolicyDecider.treeAdvice(q, loginJourney))); return }
        // A verified OIDC token (`bearer.issuers`) goes as `subject.jwt`, an AM session as `ssoToken`.
        let jwt = JWS.unverifiedParts(subject.token) != nil
        let body = AMWire.evaluateRequest(resource: q.resource, application: am.config.application, ssoToken: jwt ? nil : subject.token,
                                          jwt: jwt ? subject.token : nil, txid: q.txid)
        // An evaluation that names a transaction consumes it at the AM: it never goes twice.
        am.postAsAgent("/policies?_action=evaluate", body, deadline: AMClient.Deadline(from: q.receivedNanos ?? EventLoop.nowNanos(), ms: am.config.timeoutMs),
                       resendable: q.txid == nil) { [logger] r in
            switch r {
            case .failure(let e):
                done(.failure(e))
            case .success(let resp) where resp.head.status != 200:
                logger.warning("pdp refused the evaluation", metadata: ["status": .stringConvertible(resp.head.status)])
                done(.failure(.remoteUnavailable("the AM answered the evaluation with \(resp.head.status)")))
            case .success(let resp):
                done(AMWire.decision(resp.body, resource: q.resource).mapError { .remoteUnavailable("the AM's decision: \($0)") })
            }
        }
    }
}

/// The user behind a session token, as the AM says (`sessions?_action=validate`), cached for
/// `pdp.sessionCacheMs` so that the access log names the user without a round trip per
/// request. A token the AM does not know is no subject (the AM decides what that means).
final class RemoteSessions: SubjectIdentifying {
    private let am: AMClient
    private let cookieName: String
    private var cache: [String: (subject: Subject?, expires: UInt64)] = [:]

    init(am: AMClient, cookieName: String) {
        self.am = am
        self.cookieName = cookieName
    }

    func sessionToken(in headers: HTTPHeaders) -> String? { SessionManager.token(in: headers, cookieName: cookieName) }

    func identifySubject(token: String?, receivedNanos: UInt64, _ done: @escaping (Result<Subject?, RequestFailure>) -> Void) {
        guard let token else { done(.success(nil)); return }
        // A JWT is no AM session: it is a subject only when `bearer.issuers` verified it
        // (IdentifyPhase, before this). Its unverified `sub` names nobody: the gateway never
        // names (in the log, `X-TxGate-User`, Txn-Tokens) a subject it has not verified.
        if JWS.unverifiedParts(token) != nil { done(.success(nil)); return }
        let now = EventLoop.nowNanos()
        if let hit = cache[token], hit.expires > now { done(.success(hit.subject)); return }
        let body = #"{"tokenId":"\#(JSONText.escape(token))"}"#
        am.postAsAgent("/sessions?_action=validate", body, deadline: AMClient.Deadline(from: receivedNanos, ms: am.config.timeoutMs),
                       resendable: true) { [self] r in
            switch r {
            case .failure(let e):
                done(.failure(RequestFailure(e)))
            case .success(let resp):
                switch AMWire.validatedUser(resp.body) {
                case .failure(let e) where resp.head.status == 200:
                    done(.failure(.pdpUnavailable("the AM's session validation: \(e)")))
                case .failure:
                    done(.failure(.pdpUnavailable("the AM answered the session validation with \(resp.head.status)")))
                case .success(let user):
                    let subject = user.map { Subject(uid: $0.uid, realm: $0.realm, journeys: [], attributes: [:], token: token) }
                    remember(token, subject, now: now)
                    done(.success(subject))
                }
            }
        }
    }

    private func remember(_ token: String, _ subject: Subject?, now: UInt64) {
        guard am.config.sessionCacheMs > 0 else { return }
        if cache.count >= 10_000 { cache = cache.filter { $0.value.expires > now } }
        if cache.count >= 10_000 { cache.removeAll() }
        cache[token] = (subject, now + UInt64(am.config.sessionCacheMs) * 1_000_000)
    }
}
