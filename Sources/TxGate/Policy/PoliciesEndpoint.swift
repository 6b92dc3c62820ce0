import EventHTTP
import Foundation
import TxGateCore

/// AM's REST policy evaluation (`POST /am/json/realms/root/policies?_action=evaluate`), so
/// that other PEPs, or another TxGate, can use this gateway as their PDP. The caller
/// authenticates with a session token in the session header.
enum PoliciesEndpoint {
    static let methods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]

    static func handle(_ ctx: RequestContext, realm: String, auth: AuthService, pdp: PolicyDecisionPoint, policies: [Policy]) {
        let action = Query(target: ctx.head.target)["_action"] ?? ""
        guard action == "evaluate" || action == "evaluateTree" else {
            ctx.respondError(status: 400, message: "_action must be evaluate or evaluateTree")
            return
        }
        guard let body = JSONValue.parse(ctx.exchange.body.bytes), body.objectValue != nil else {
            ctx.respondError(status: 400, message: "the request body is not a JSON object")
            return
        }
        let resources: [String]
        if action == "evaluate" {
            guard let list = body["resources"]?.arrayValue?.compactMap(\.stringValue), !list.isEmpty else {
                ctx.respondError(status: 400, message: "'resources' must be a non-empty array of URLs")
                return
            }
            resources = list
        } else {
            guard let r = body["resource"]?.stringValue else {
                ctx.respondError(status: 400, message: "'resource' must be a URL")
                return
            }
            resources = [r]
        }
        var environment: [String: [String]] = [:]
        for (k, v) in body["environment"]?.objectValue ?? [:] { environment[k] = v.arrayValue?.compactMap(\.stringValue) ?? [] }

        guard let caller = auth.sessions.token(in: ctx.head.headers) else {
            ctx.respondJSON(status: 401, #"{"code":401,"reason":"Unauthorized","message":"Access Denied"}"#)
            return
        }
        auth.identify(ctx, bearer: caller) { callerSubject in
            guard callerSubject != nil else {
                ctx.respondJSON(status: 401, #"{"code":401,"reason":"Unauthorized","message":"Access Denied"}"#)
                return
            }
            resolveSubject(body["subject"], ctx, auth) { subject in
                evaluateAll(resources, realm: realm, subject: subject, environment: environment, ctx, pdp, policies) { result in
                    switch result {
                    case .failure(.unavailable(let why)): auth.unavailable(ctx, why)
                    case .failure(.tooManyTransactions(let n)):
                        ctx.respondError(status: 429, message: "more than \(n) transactions are waiting for approval")
                    case .failure(.badRequest(let message)):
                        ctx.respondError(status: 400, message: message)
                    case .success(let decisions):
                        ctx.respondJSON(status: 200, "[" + decisions.map(\.json).joined(separator: ",") + "]")
                    }
                }
            }
        }
    }

    /// `{"ssoToken": ...}` is a session; `{"claims": {"sub": ...}}` names a user without one.
    static func resolveSubject(_ s: JSONValue?, _ ctx: RequestContext, _ auth: AuthService, _ then: @escaping (Subject?) -> Void) {
        if let token = s?["ssoToken"]?.stringValue {
            auth.identify(ctx, bearer: token, then)
        } else if let sub = s?["claims"]?["sub"]?.stringValue, auth.users[sub] != nil {
            then(Subject(uid: sub, realm: "/", journeys: [], attributes: auth.users[sub]?.attributes ?? [:], token: ""))
        } else {
            then(nil)
        }
    }

    /// One decision per resource; its actions are every method a policy names for that path.
    static func evaluateAll(_ resources: [String], realm: String, subject: Subject?, environment: [String: [String]],
                            _ ctx: RequestContext, _ pdp: PolicyDecisionPoint, _ policies: [Policy],
                            _ done: @escaping (Result<[Decision], PDPError>) -> Void) {
        var decisions: [Decision] = []
        func next(_ i: Int) {
            guard i < resources.count else { done(.success(decisions)); return }
            let resource = resources[i]
            let path = URLComponents(string: resource)?.percentEncodedPath ?? resource
            let methods = methods.filter { m in policies.contains { $0.applies(path: Substring(path), method: m) } }
            var merged = Decision(resource: resource)
            func method(_ j: Int) {
                guard j < methods.count else {
                    decisions.append(merged)
                    next(i + 1)
                    return
                }
                let q = DecisionQuery(realm: realm, path: Substring(path), resource: resource, method: methods[j],
                                      subject: subject, environment: environment, body: { [] })
                pdp.evaluate(q, on: ctx.worker.loop) { r in
                    switch r {
                    case .failure(let e): done(.failure(e))
                    case .success(let d):
                        if d.allows(methods[j]) { merged.actions[methods[j]] = true }
                        for e in d.advices.entries where merged.advices[e.name] == nil { merged.advices.entries.append(e) }
                        if let t = d.ttl { merged.ttl = min(merged.ttl ?? t, t) }
                        method(j + 1)
                    }
                }
            }
            method(0)
        }
        next(0)
    }
}
