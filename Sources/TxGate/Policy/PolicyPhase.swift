import EventHTTP
import Foundation
import HTTPCore
import Logging
import TxGateCore

/// The policy enforcement point: every request that reaches it is decided before it can be
/// proxied. Allow → next phase; advice → a challenge; otherwise 403.
final class PolicyPhase: RequestPhase {
    let pdp: PolicyDecisionPoint
    let auth: AuthService
    let publicURL: HTTPURL
    let amURI: String
    let bearerForm: String

    init(pdp: PolicyDecisionPoint, auth: AuthService, config: GatewayConfig) {
        self.pdp = pdp
        self.auth = auth
        publicURL = config.effectivePublicURL
        amURI = publicURL.description + "/am/"
        bearerForm = config.challenges.bearer
    }

    func handle(_ ctx: RequestContext) {
        // The resource a transaction binds to is the same on the first try and on the retry.
        let (target, queryTxid) = RetryParameters.strip(ctx.head.target)
        ctx.upstreamTarget = target
        let txid = queryTxid ?? ctx.head.headers.first("X-TxID")
        let bearer = Self.bearerToken(ctx.head.headers)
        let identify: (@escaping (Subject?) -> Void) -> Void = pdp.needsSubject(path: ctx.head.path, method: ctx.head.method)
            ? { [auth] then in auth.identify(ctx, bearer: bearer, then) } : { then in then(nil) }
        identify { [self] subject in
            let q = DecisionQuery(
                realm: "/", path: ctx.head.path, resource: publicURL.description + target, method: ctx.head.method,
                subject: subject, environment: txid.map { ["TxId": [$0]] } ?? [:],
                body: { ctx.exchange.body.bytes })
            ctx.worker.decide(q, pdp: pdp) { [self] result in
                switch result {
                case .failure(.unavailable(let why)):
                    auth.unavailable(ctx, why)
                case .failure(.badRequest(let message)):
                    ctx.respondError(status: 400, message: message)
                case .failure(.tooManyTransactions(let n)):
                    ctx.respondError(status: 429, message: "more than \(n) transactions are waiting for approval; approve or let them expire first")
                case .success(let d):
                    if d.allows(ctx.head.method) {
                        if let s = subject { ctx.subject = s }
                        ctx.next()
                    } else if !d.advices.isEmpty {
                        challenge(ctx, d.advices, subject: subject, bearer: bearer != nil, target: target)
                    } else {
                        ctx.respondError(status: 403, message: "no policy allows \(ctx.head.method) \(ctx.head.path)" + (subject.map { " for \($0.uid)" } ?? ""))
                    }
                }
            }
        }
    }

    static func bearerToken(_ h: HTTPHeaders) -> String? {
        guard let a = h.first("Authorization"), a.count > 7, a.prefix(7).lowercased() == "bearer " else { return nil }
        return String(a.dropFirst(7)).trimmingOWS()
    }

    /// WIRE.md §3: 401 SSOADVICE for SDKs, RFC 9470 for bearer clients, 307 for browsers.
    private func challenge(_ ctx: RequestContext, _ advices: Advices, subject: Subject?, bearer: Bool, target: String) {
        let wantsHeader = ctx.head.headers.first("x-authenticate-response").map { asciiCaseInsensitiveEquals($0, "header") } ?? false
        let txid = advices[Advices.transaction]?.first
        let original = publicURL.description + target
        var h = HTTPHeaders()
        h.add("Cache-Control", "no-store")
        if wantsHeader || (bearer && bearerForm == "ssoadvice") {
            h.add("WWW-Authenticate", Challenge.ssoAdviceHeader(realm: "/", advices: advices, amURI: amURI))
        } else if bearer {
            if subject == nil {
                h.add("WWW-Authenticate", #"Bearer error="invalid_token", error_description="The access token is not valid""#)
            } else {
                // acr_values names the journey that satisfies the advice ("/:NAME" → NAME).
                let acr = txid != nil ? journeyOf(ctx)
                    : advices[Advices.authenticateToService]?.first.map { String($0.split(separator: ":").last ?? "") } ?? ""
                h.add("WWW-Authenticate", Challenge.bearerStepUp(acr: acr, txid: txid))
                if bearerForm == "both" { h.add("WWW-Authenticate", Challenge.ssoAdviceHeader(realm: "/", advices: advices, amURI: amURI)) }
            }
        } else {
            let goto = txid.map { Challenge.addingQuery(original, "_txid", $0) } ?? original
            if subject == nil {
                h.add("Location", "\(amURI)XUI/?goto=\(Query.encode(goto))")
            } else {
                h.add("Location", Challenge.loginRedirect(loginPage: "\(amURI)XUI/", goto: goto, realm: "/", advices: advices))
            }
            ctx.respondJSON(status: 307, #"{"code":307,"reason":"Temporary Redirect","message":"authentication required","advices":\#(advices.json)}"#, headers: h)
            return
        }
        let message = subject == nil ? "authentication required" : (txid != nil ? "this request needs its own approval" : "step-up authentication required")
        ctx.respondJSON(status: 401, #"{"code":401,"reason":"Unauthorized","message":"\#(message)","advices":\#(advices.json),"am_uri":"\#(amURI)"}"#, headers: h)
    }

    /// The journey a transaction challenge asks for, for RFC 9470's acr_values.
    private func journeyOf(_ ctx: RequestContext) -> String {
        ctx.worker.shared.transactionJourney(path: ctx.head.path, method: ctx.head.method) ?? ""
    }
}
