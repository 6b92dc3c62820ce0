import HTTPCore
import TxGateCore

/// WIRE.md §3: a decision with advices becomes a challenge: 401 SSOADVICE for SDKs
/// (`x-authenticate-response: header`), RFC 9470 for bearer clients, 307 to the login page for
/// browsers. Allowed requests pass through.
struct ChallengePhase: RequestPhase {
    private let publicURL: String
    private let amURI: String
    private let bearerForm: String
    /// The journey a transaction challenge asks for, for RFC 9470's `acr_values`.
    private let policies: PolicySet

    init(publicURL: String, bearerForm: String, policies: PolicySet) {
        self.publicURL = publicURL
        amURI = publicURL + "/am/"
        self.bearerForm = bearerForm
        self.policies = policies
    }

    func handle(_ ctx: RequestContext) {
        guard let advices = ctx.decision?.advices, !advices.isEmpty, ctx.decision?.allows(ctx.head.method) != true else {
            ctx.proceed()
            return
        }
        let wantsHeader = ctx.head.headers.first("x-authenticate-response").map { asciiCaseInsensitiveEquals($0, "header") } ?? false
        var h = HTTPHeaders()
        h.add("Cache-Control", "no-store")
        if wantsHeader || (ctx.bearer != nil && bearerForm == "ssoadvice") {
            h.add("WWW-Authenticate", ssoAdvice(advices))
        } else if ctx.bearer != nil {
            bearerChallenge(ctx, advices, &h)
        } else {
            h.add("Location", loginRedirect(ctx, advices))
            let body = ErrorBody.text(status: 307, message: "authentication required", members: #""advices":\#(advices.json)"#)
            ctx.respondJSON(status: 307, body, headers: h)
            return
        }
        let txid = advices[Advices.transaction]?.first
        let message = ctx.subject == nil ? "authentication required"
            : (txid != nil ? "this request needs its own approval" : "step-up authentication required")
        let members = #""advices":\#(advices.json),"am_uri":"\#(amURI)""#
        ctx.respondJSON(status: 401, ErrorBody.text(status: 401, message: message, members: members), headers: h)
    }

    private func ssoAdvice(_ advices: Advices) -> String {
        Challenge.ssoAdviceHeader(realm: "/", advices: advices, amURI: amURI)
    }

    /// RFC 9470 (and SSOADVICE too with `challenges.bearer: both`).
    private func bearerChallenge(_ ctx: RequestContext, _ advices: Advices, _ h: inout HTTPHeaders) {
        guard ctx.subject != nil else {
            h.add("WWW-Authenticate", #"Bearer error="invalid_token", error_description="The access token is not valid""#)
            return
        }
        let txid = advices[Advices.transaction]?.first
        // acr_values names the journey that satisfies the advice ("/:NAME" → NAME).
        let acr = txid != nil ? policies.transactionJourney(path: ctx.path[...], method: ctx.head.method) ?? ""
            : advices[Advices.authenticateToService]?.first.map { String($0.split(separator: ":").last ?? "") } ?? ""
        let maxAge = txid == nil ? policies.stepUpMaxAge(path: ctx.path[...], method: ctx.head.method) : nil
        h.add("WWW-Authenticate", Challenge.bearerStepUp(acr: acr, txid: txid, maxAge: maxAge))
        if bearerForm == "both" { h.add("WWW-Authenticate", ssoAdvice(advices)) }
    }

    /// The login page, with `goto` back to the request (and its `_txid` for a transaction).
    private func loginRedirect(_ ctx: RequestContext, _ advices: Advices) -> String {
        let original = publicURL + ctx.target
        let goto = advices[Advices.transaction]?.first.map { Challenge.addingQuery(original, "_txid", $0) } ?? original
        guard ctx.subject != nil else { return "\(amURI)XUI/?goto=\(Query.encode(goto))" }
        return Challenge.loginRedirect(loginPage: "\(amURI)XUI/", goto: goto, realm: "/", advices: advices)
    }
}
