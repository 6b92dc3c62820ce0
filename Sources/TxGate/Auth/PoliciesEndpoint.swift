import EventHTTP
import Foundation
import TxGateCore

/// AM's REST policy evaluation (`POST /am/json/realms/root/policies?_action=evaluate`), so
/// that other PEPs, or another TxGate, can use this gateway as their PDP. The caller
/// authenticates with a session token in the session header.
final class PoliciesEndpoint {
    static let methods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
    private let auth: AuthService
    private let pdp: PolicyDecisionPoint
    private let policies: PolicySet
    private let loop: EventLoop
    private let identifier: SubjectIdentifier

    init(auth: AuthService, pdp: PolicyDecisionPoint, policies: PolicySet, loop: EventLoop) {
        self.auth = auth
        self.pdp = pdp
        self.policies = policies
        self.loop = loop
        identifier = auth.identifier(on: loop)
    }

    /// What the caller asks: resources, the subject's description, the environment's TxId.
    struct Request {
        var resources: [String]
        var subject: JSONValue?
        var txid: String?
    }

    static func parse(_ body: [UInt8], action: String) -> Result<Request, RequestFailure> {
        guard action == "evaluate" || action == "evaluateTree" else { return .failure(.badRequest("_action must be evaluate or evaluateTree")) }
        guard let body = JSONValue.parse(body), body.objectValue != nil else {
            return .failure(.badRequest("the request body is not a JSON object"))
        }
        var request = Request(resources: [], subject: body["subject"], txid: body["environment"]?["TxId"]?.arrayValue?.first?.stringValue)
        if action == "evaluate" {
            guard let list = body["resources"]?.arrayValue?.compactMap(\.stringValue), !list.isEmpty else {
                return .failure(.badRequest("'resources' must be a non-empty array of URLs"))
            }
            request.resources = list
        } else {
            guard let r = body["resource"]?.stringValue else { return .failure(.badRequest("'resource' must be a URL")) }
            request.resources = [r]
        }
        return .success(request)
    }

    func handle(_ ctx: EndpointCall, realm: String) {
        let request: Request
        switch Self.parse(ctx.exchange.body.bytes, action: Query(target: ctx.head.target)["_action"] ?? "") {
        case .failure(let f): ctx.fail(f); return
        case .success(let r): request = r
        }
        guard let caller = identifier.sessionToken(in: ctx.head.headers) else {
            ctx.respondJSON(status: 401, AuthService.accessDenied)
            return
        }
        identify(ctx, caller) { [self] callerSubject in
            guard let callerSubject else {
                ctx.respondJSON(status: 401, AuthService.accessDenied)
                return
            }
            resolveSubject(ctx, request.subject) { [self] subject in
                // Asking about someone else would fill their pending transactions and tell
                // which users exist: only the configured evaluators (a PEP's agent) may.
                // (An unknown `claims.sub` is refused the same way, so nothing tells who exists.)
                if let named = request.subject?["claims"]?["sub"]?.stringValue ?? subject?.uid, named != callerSubject.uid,
                   !auth.config.security.policyEvaluators.contains(callerSubject.uid) {
                    auth.logger.warning("policy evaluation for another subject refused", metadata: [
                        "request_id": .string(ctx.requestId), "caller": .string(callerSubject.uid),
                    ])
                    ctx.fail(.forbidden("only security.policyEvaluators may evaluate policies for another subject"))
                    return
                }
                evaluateAll(request, realm: realm, subject: subject) { result in
                    switch result {
                    case .failure(let e): ctx.fail(RequestFailure(e))
                    case .success(let decisions): ctx.respondJSON(status: 200, "[" + decisions.map(\.json).joined(separator: ",") + "]")
                    }
                }
            }
        }
    }

    private func identify(_ ctx: EndpointCall, _ token: String?, _ then: @escaping (Subject?) -> Void) {
        identifier.identify(token: token) { r in
            switch r {
            case .failure(let e): ctx.fail(.storeUnavailable(e.description))
            case .success(let s): then(s)
            }
        }
    }

    /// `{"ssoToken": ...}` is a session; `{"claims": {"sub": ...}}` names a user without one.
    private func resolveSubject(_ ctx: EndpointCall, _ s: JSONValue?, _ then: @escaping (Subject?) -> Void) {
        if let token = s?["ssoToken"]?.stringValue {
            identify(ctx, token, then)
        } else if let sub = s?["claims"]?["sub"]?.stringValue, let user = auth.users[sub] {
            then(Subject(uid: sub, realm: "/", journeys: [], attributes: user.attributes, token: ""))
        } else {
            then(nil)
        }
    }

    /// One decision per resource; its actions are every method a policy names for that path.
    private func evaluateAll(_ request: Request, realm: String, subject: Subject?,
                             _ done: @escaping (Result<[Decision], PDPError>) -> Void) {
        var decisions: [Decision] = []
        func next(_ i: Int) {
            guard i < request.resources.count else { done(.success(decisions)); return }
            let resource = request.resources[i]
            let path = Substring(URLComponents(string: resource)?.percentEncodedPath ?? resource)
            let queries = policies.methods(for: path, among: Self.methods).map {
                DecisionQuery(realm: realm, path: path, resource: resource, method: $0, subject: subject, txid: request.txid)
            }
            evaluate(queries[...], merged: Decision(resource: resource)) { r in
                switch r {
                case .failure(let e): done(.failure(e))
                case .success(let d):
                    decisions.append(d)
                    next(i + 1)
                }
            }
        }
        next(0)
    }

    /// Asks for each method in turn and merges the answers into one decision.
    private func evaluate(_ queries: ArraySlice<DecisionQuery>, merged: Decision,
                          _ done: @escaping (Result<Decision, PDPError>) -> Void) {
        guard let q = queries.first else { done(.success(merged)); return }
        pdp.evaluate(q, on: loop) { [self] r in
            switch r {
            case .failure(let e): done(.failure(e))
            case .success(let d):
                var merged = merged
                if d.allows(q.method) { merged.actions[q.method] = true }
                for e in d.advices.entries where merged.advices[e.name] == nil { merged.advices.entries.append(e) }
                if let t = d.ttl { merged.ttl = min(merged.ttl ?? t, t) }
                evaluate(queries.dropFirst(), merged: merged, done)
            }
        }
    }
}
