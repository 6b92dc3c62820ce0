import EventHTTP
import TxGateCore

/// `/am/...` goes to the authentication service; nothing under it is ever proxied.
struct AuthEndpointsPhase: RequestPhase {
    private struct Endpoints {
        let auth: AuthService
        let authenticate: AuthenticateEndpoint
        let sessions: SessionsEndpoint
        let transactions: TransactionsEndpoint
        let policies: PoliciesEndpoint?
        let loginPage: LoginPage
    }
    private let endpoints: Endpoints?
    private let oauth: OAuthEndpoints?

    init(auth: AuthService?, pdp: PolicyDecisionPoint?, policies: PolicySet, oauth: OAuthProvider?, loop: EventLoop) {
        self.oauth = oauth.map { OAuthEndpoints(provider: $0, loop: loop) }
        endpoints = auth.map { auth in
            Endpoints(auth: auth, authenticate: AuthenticateEndpoint(auth: auth, loop: loop),
                      sessions: SessionsEndpoint(auth: auth, loop: loop),
                      transactions: TransactionsEndpoint(auth: auth, loop: loop),
                      policies: pdp.map { PoliciesEndpoint(auth: auth, pdp: $0, policies: policies, loop: loop) },
                      loginPage: LoginPage(auth: auth, loop: loop))
        }
    }

    func handle(_ ctx: RequestContext) {
        let path = ctx.path
        guard path == "/am" || path.hasPrefix("/am/") else { ctx.proceed(); return }
        guard let endpoints else {
            ctx.fail(.notFound("the authentication service is not configured (no journeys in the configuration)"))
            return
        }
        if path == "/am/oauth2" || path.hasPrefix("/am/oauth2/") {
            guard let oauth else { ctx.fail(.notFound("the OAuth 2.0 provider is not configured (no oauth2 in the configuration)")); return }
            oauth.handle(ctx)
            return
        }
        if path == "/am/XUI" || path == "/am/XUI/" || path == "/am/XUI/index.html" {
            endpoints.loginPage.serve(ctx)
            return
        }
        guard path.hasPrefix("/am/json/"), let (realm, endpoint) = AuthService.route(path) else {
            ctx.fail(.notFound("no authentication service endpoint at \(path)"))
            return
        }
        guard realm == "/" || endpoints.auth.config.realms.contains(String(realm.dropFirst())) else {
            ctx.fail(.notFound("realm '\(realm)' is not configured"))
            return
        }
        guard ctx.head.method == "POST" else {
            ctx.fail(.methodNotAllowed("\(ctx.head.method) is not allowed here; use POST"))
            return
        }
        switch endpoint {
        case "authenticate": endpoints.authenticate.handle(ctx, realm: realm)
        case "sessions": endpoints.sessions.handle(ctx, realm: realm)
        case "transactions": endpoints.transactions.handle(ctx, realm: realm)
        case "policies" where endpoints.policies != nil: endpoints.policies?.handle(ctx, realm: realm)
        default: ctx.fail(.notFound("no authentication service endpoint at \(path)"))
        }
    }
}
