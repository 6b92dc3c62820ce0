import EventHTTP
import TxGateCore

/// `/am/...` goes to the authentication service; nothing under it is ever proxied.
struct AuthEndpointsPhase: RequestPhase {
    /// A class: the phase unwraps it and a suspended endpoint's closure captures it on every
    /// request (as a struct, each copy retained all nine endpoints).
    private final class Endpoints {
        let auth: AuthService
        let authenticate: AuthenticateEndpoint
        let sessions: SessionsEndpoint
        let transactions: TransactionsEndpoint
        let approvals: ApprovalsEndpoint
        let approvalPage: ApprovalPage
        let passkeys: PasskeysEndpoint
        let policies: PoliciesEndpoint?
        let loginPage: LoginPage

        init(auth: AuthService, authenticate: AuthenticateEndpoint, sessions: SessionsEndpoint, transactions: TransactionsEndpoint,
             approvals: ApprovalsEndpoint, approvalPage: ApprovalPage, passkeys: PasskeysEndpoint, policies: PoliciesEndpoint?,
             loginPage: LoginPage) {
            self.auth = auth
            self.authenticate = authenticate
            self.sessions = sessions
            self.transactions = transactions
            self.approvals = approvals
            self.approvalPage = approvalPage
            self.passkeys = passkeys
            self.policies = policies
            self.loginPage = loginPage
        }
    }
    private let endpoints: Endpoints?
    private let oauth: OAuthEndpoints?
    var appliesTo: PathFamily { .auth }

    init(auth: AuthService?, pdp: PolicyDecisionPoint?, policies: PolicySet, oauth: OAuthProvider?, loop: EventLoop) {
        self.oauth = oauth.map { OAuthEndpoints(provider: $0, loop: loop) }
        endpoints = auth.map { auth in
            Endpoints(auth: auth, authenticate: AuthenticateEndpoint(auth: auth, loop: loop),
                      sessions: SessionsEndpoint(auth: auth, loop: loop),
                      transactions: TransactionsEndpoint(auth: auth, loop: loop),
                      approvals: ApprovalsEndpoint(auth: auth, loop: loop), approvalPage: ApprovalPage(auth: auth),
                      passkeys: PasskeysEndpoint(auth: auth, loop: loop),
                      policies: pdp.map { PoliciesEndpoint(auth: auth, pdp: $0, policies: policies, loop: loop) },
                      loginPage: LoginPage(auth: auth, loop: loop))
        }
    }

    func handle(_ ctx: RequestContext) -> PhaseStatus {
        let path = ctx.path
        if path.hasASCIIPrefix("/.well-known/"), let oauth, let answer = oauth.wellKnown(path, method: ctx.head.method) { return .reply(answer) }
        guard path == "/am" || path.hasASCIIPrefix("/am/") else { return .next }
        guard let endpoints else {
            return .fail(.notFound("the authentication service is not configured (no journeys in the configuration)"))
        }
        if path == "/am/oauth2" || path.hasPrefix("/am/oauth2/") {
            guard let oauth else { return .fail(.notFound("the OAuth 2.0 provider is not configured (no oauth2 in the configuration)")) }
            return ctx.suspend { oauth.handle(EndpointCall(ctx, $0)) }
        }
        if path == "/am/XUI" || path == "/am/XUI/" || path == "/am/XUI/index.html" {
            return ctx.suspend { endpoints.loginPage.serve(EndpointCall(ctx, $0)) }
        }
        if path == ApprovalPagePath.path {
            return ctx.suspend { endpoints.approvalPage.serve(EndpointCall(ctx, $0)) }
        }
        if path == PasskeysEndpoint.pagePath {
            return ctx.suspend { endpoints.passkeys.page(EndpointCall(ctx, $0)) }
        }
        guard path.hasPrefix("/am/json/"), let (realm, endpoint) = AuthService.route(path) else {
            return .fail(.notFound("no authentication service endpoint at \(path)"))
        }
        guard realm == "/" || endpoints.auth.config.realms.contains(String(realm.dropFirst())) else {
            return .fail(.notFound("realm '\(realm)' is not configured"))
        }
        guard ctx.head.method == "POST" else {
            return .fail(.methodNotAllowed("\(ctx.head.method) is not allowed here; use POST"))
        }
        switch endpoint {
        case "authenticate": return ctx.suspend { endpoints.authenticate.handle(EndpointCall(ctx, $0), realm: realm) }
        case "sessions": return ctx.suspend { endpoints.sessions.handle(EndpointCall(ctx, $0), realm: realm) }
        case "transactions": return ctx.suspend { endpoints.transactions.handle(EndpointCall(ctx, $0), realm: realm) }
        case "approvals": return ctx.suspend { endpoints.approvals.handle(EndpointCall(ctx, $0), realm: realm) }
        case "passkeys": return ctx.suspend { endpoints.passkeys.handle(EndpointCall(ctx, $0), realm: realm) }
        case "policies":
            guard let policies = endpoints.policies else { fallthrough }
            return ctx.suspend { policies.handle(EndpointCall(ctx, $0), realm: realm) }
        default: return .fail(.notFound("no authentication service endpoint at \(path)"))
        }
    }
}
