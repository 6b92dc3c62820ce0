import HTTPCore
import TxGateCore

/// WIRE.md §3: a decision with advices becomes a challenge: 401 SSOADVICE for SDKs
/// (`x-authenticate-response: header`), RFC 9470 for bearer clients, 307 to the login page for
/// browsers. Allowed requests pass through.
struct ChallengePhase: RequestPhase {
    private let publicURL: String
    private let amURI: String
    private let bearerForm: String
    /// Where a browser's request waits for its approval (nil: the gateway has no store).
    private let parking: RequestParking?
    /// `oauth2.resources`: APIs whose clients step up by scope (MCP).
    private let resources: [OAuthResource]
    /// `bearer.transactionChallenge: scope`: elsewhere too, an access token's client is asked for
    /// a transaction by scope.
    private let scopeStepUp: Bool

    /// `amURI`: where clients run journeys (this gateway's `/am/`, or the remote AM's public URL).
    init(publicURL: String, amURI: String, bearerForm: String, parking: RequestParking?, resources: [OAuthResource] = [],
         scopeStepUp: Bool = false) {
        self.publicURL = publicURL
        self.amURI = amURI
        self.bearerForm = bearerForm
        self.parking = parking
        self.resources = resources
        self.scopeStepUp = scopeStepUp
    }

    func handle(_ ctx: RequestContext) -> PhaseStatus {
        guard let advices = ctx.decision?.advices, !advices.isEmpty, ctx.decision?.allows(ctx.method) != true else {
            return .next
        }
        if let resource = resources.first(where: { $0.contains(ctx.path[...]) }) {
            return resourceChallenge(ctx, advices, resource)
        }
        if scopeStepUp, let token = ctx.accessToken, let txid = advices[Advices.transaction]?.first {
            // The scopes the token has, and the transaction's (WIRE-EXTENSIONS §13).
            let held = (token.string("scope") ?? "").split(separator: " ").map(String.init).filter { !$0.hasPrefix(TransactionScope.prefix) }
            return scopeChallenge(advices, scope: held, txid: txid, metadata: publicURL + ProtectedResourceMetadata.wellKnown)
        }
        let wantsHeader = ctx.head.headers.first("x-authenticate-response").map { asciiCaseInsensitiveEquals($0, "header") } ?? false
        var h = HTTPHeaders()
        h.add("Cache-Control", "no-store")
        if wantsHeader || (ctx.bearer != nil && bearerForm == "ssoadvice") {
            h.add("WWW-Authenticate", ssoAdvice(advices))
        } else if ctx.bearer != nil {
            bearerChallenge(ctx, advices, &h)
        } else {
            return browserRedirect(ctx, advices, h)
        }
        let txid = advices[Advices.transaction]?.first
        let message = ctx.subject == nil ? "authentication required"
            : (txid != nil ? "this request needs its own approval" : "step-up authentication required")
        let members = #""advices":\#(advices.json),"am_uri":"\#(amURI)""#
        return .reply(.json(401, ErrorBody.json(status: 401, message: message, members: members), headers: h, details: .challenge))
    }

    /// On `/-/authz`, the login redirect the proxy can pass on (WIRE.md §10): Traefik a 302,
    /// nginx a 401 with `Location` (its `error_page 401` makes the redirect). The proxy holds the
    /// request: nothing is parked.
    static func browserStatus(_ proxy: ForwardedRequest.Proxy) -> Int {
        switch proxy {
        case .traefik: return 302
        case .nginx: return 401
        }
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
        let acr = txid != nil ? ctx.policy?.transactionJourney ?? ""
            : advices[Advices.authenticateToService]?.first.map { String($0.split(separator: ":").last ?? "") } ?? ""
        let maxAge = txid == nil ? ctx.policy?.stepUpMaxAge : nil
        h.add("WWW-Authenticate", Challenge.bearerStepUp(acr: acr, txid: txid, maxAge: maxAge))
        if bearerForm == "both" { h.add("WWW-Authenticate", ssoAdvice(advices)) }
    }

    /// An OAuth resource (an MCP server) is never a browser's page: no token is `401` naming
    /// its RFC 9728 metadata; a transaction is `403 insufficient_scope` asking for the scope
    /// `transaction:<TxId>` (WIRE.md §13), which `authorize` approves; a step-up is RFC 9470's
    /// challenge, with the metadata named too.
    private func resourceChallenge(_ ctx: RequestContext, _ advices: Advices, _ resource: OAuthResource) -> PhaseStatus {
        var h = HTTPHeaders()
        h.add("Cache-Control", "no-store")
        let metadata = resource.metadataURL(publicURL: publicURL)
        let scopes = resource.scopes.joined(separator: " ")
        let members = #""advices":\#(advices.json),"am_uri":"\#(amURI)""#
        guard ctx.subject != nil else {
            h.add("WWW-Authenticate", Challenge.bearerResourceMetadata(metadata, error: ctx.bearer != nil ? "invalid_token" : nil, scope: scopes))
            let message = ctx.bearer != nil ? "the access token is not valid for this resource" : "authentication required"
            return .reply(.json(401, ErrorBody.text(status: 401, message: message, members: members), headers: h, details: .challenge))
        }
        if let txid = advices[Advices.transaction]?.first {
            return scopeChallenge(advices, scope: resource.scopes, txid: txid, metadata: metadata)
        }
        bearerChallenge(ctx, advices, &h)
        return .reply(.json(401, ErrorBody.text(status: 401, message: "step-up authentication required", members: members),
                            headers: h, details: .challenge))
    }

    /// `403 insufficient_scope` asking for `scope` and the transaction's scope `transaction:<TxId>`.
    private func scopeChallenge(_ advices: Advices, scope: [String], txid: String, metadata: String) -> PhaseStatus {
        var h = HTTPHeaders()
        h.add("Cache-Control", "no-store")
        let asked = (scope + [TransactionScope.scope(txid)]).joined(separator: " ")
        h.add("WWW-Authenticate", Challenge.bearerInsufficientScope(scope: asked, resourceMetadata: metadata))
        let members = #""advices":\#(advices.json),"am_uri":"\#(amURI)""#
        return .reply(.json(403, ErrorBody.text(status: 403, message: "this request needs its own approval", members: members),
                            headers: h, details: .challenge))
    }

    /// A browser goes to the login page (on `/-/authz`, `browserStatus`) with IG's 307; a
    /// browser's form navigation (`ParkedRequest.isFormNavigation`) with 303 instead, so that the
    /// browser does not re-send its body to the login page, and a transaction's request is
    /// parked first, to be replayed when the browser comes back approved (WIRE-EXTENSIONS §3b).
    private func browserRedirect(_ ctx: RequestContext, _ advices: Advices, _ headers: HTTPHeaders) -> PhaseStatus {
        var h = headers
        h.add("Location", loginRedirect(ctx, advices))
        let status = ctx.forwardedBy.map(Self.browserStatus) ?? (ParkedRequest.isFormNavigation(method: ctx.method, headers: ctx.head.headers) ? 303 : 307)
        let body = ErrorBody.text(status: status, message: "authentication required", members: #""advices":\#(advices.json)"#)
        if status == 303, let parking, let txid = advices[Advices.transaction]?.first {
            return parking.park(ctx, txid: txid, then: .json(status, body, headers: h, details: .challengeParked))
        }
        return .reply(.json(status, body, headers: h, details: .challenge))
    }

    /// The login page, with `goto` back to the request (and its `_txid` for a transaction).
    /// A request that named its own transaction (a browser back from an approval, e.g. through
    /// a link opened in another browser, with no session there yet) keeps its `_txid` in `goto`,
    /// so that the parked request is replayed once the user has signed in.
    private func loginRedirect(_ ctx: RequestContext, _ advices: Advices) -> String {
        let original = publicURL + ctx.target
        let txid = advices[Advices.transaction]?.first ?? ctx.txid.flatMap { PolicyDecider.isTxId($0) ? $0 : nil }
        let goto = txid.map { Challenge.addingQuery(original, "_txid", $0) } ?? original
        guard ctx.subject != nil else { return "\(amURI)XUI/?goto=\(Query.encode(goto))" }
        return Challenge.loginRedirect(loginPage: "\(amURI)XUI/", goto: goto, realm: "/", advices: advices)
    }
}
