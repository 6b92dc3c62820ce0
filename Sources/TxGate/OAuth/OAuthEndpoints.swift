import EventHTTP
import HTTPCore
import TxGateCore

/// `/am/oauth2/realms/root[/realms/NAME]/...` on one worker: routes to the provider's endpoints.
struct OAuthEndpoints {
    let provider: OAuthProvider
    let loop: EventLoop
    private let authorize: AuthorizeEndpoint
    private let token: TokenEndpoint
    private let tokenInfo: TokenInfoEndpoints

    init(provider: OAuthProvider, loop: EventLoop) {
        self.provider = provider
        self.loop = loop
        authorize = AuthorizeEndpoint(provider: provider, loop: loop)
        token = TokenEndpoint(provider: provider, loop: loop)
        tokenInfo = TokenInfoEndpoints(provider: provider, loop: loop)
    }

    func handle(_ ctx: EndpointCall) {
        guard let (realm, endpoint) = OAuthProvider.route(ctx.path) else {
            ctx.fail(.notFound("no OAuth 2.0 endpoint at \(ctx.path)"))
            return
        }
        guard realm == "/" || provider.auth.config.realms.contains(String(realm.dropFirst())) else {
            ctx.fail(.notFound("realm '\(realm)' is not configured"))
            return
        }
        let method = ctx.head.method
        switch (endpoint, method) {
        case ("authorize", "GET"): authorize.handle(ctx, realm: realm)
        case (".well-known/openid-configuration", "GET"):
            ctx.respondJSON(status: 200, discovery(realm))
        case ("connect/jwk_uri", "GET"):
            var h = HTTPHeaders()
            h.add("Cache-Control", "max-age=300")
            ctx.respondJSON(status: 200, provider.keys.jwkSet, headers: h)
        case ("userinfo", "GET"), ("userinfo", "POST"): tokenInfo.userinfo(ctx)
        case ("connect/endSession", "GET"):
            tokenInfo.endSession(ctx, params: Dictionary(Query(target: ctx.head.target).pairs.map { ($0.name, $0.value) }) { a, _ in a },
                                 posted: false)
        case ("connect/endSession", "POST"):
            guard let form = Self.form(ctx) else { return }
            tokenInfo.endSession(ctx, params: form, posted: true)
        case ("access_token", "POST"), ("token/revoke", "POST"), ("introspect", "POST"):
            guard let form = Self.form(ctx) else { return }
            switch endpoint {
            case "access_token": token.handle(ctx, form: form)
            case "token/revoke": tokenInfo.revoke(ctx, form: form)
            default: tokenInfo.introspect(ctx, form: form)
            }
        case ("authorize", _), (".well-known/openid-configuration", _), ("connect/jwk_uri", _):
            ctx.fail(.methodNotAllowed("\(method) is not allowed here; use GET"))
        case ("connect/endSession", _):
            ctx.fail(.methodNotAllowed("\(method) is not allowed here; use GET or POST"))
        case ("access_token", _), ("token/revoke", _), ("introspect", _):
            ctx.fail(.methodNotAllowed("\(method) is not allowed here; use POST"))
        default:
            ctx.fail(.notFound("no OAuth 2.0 endpoint at \(ctx.path)"))
        }
    }

    /// The `application/x-www-form-urlencoded` body of a token-endpoint request (RFC 6749 §3.2):
    /// nil (and answered) if it is not one, or names a parameter twice.
    static func form(_ ctx: EndpointCall) -> [String: String]? {
        let type = ctx.head.headers.first("Content-Type").flatMap(MediaType.init)
        guard type?.isForm == true, let fields = FormBody.parse(ctx.exchange.body.bytes) else {
            OAuthProvider.refuse(ctx, .invalidRequest("the body must be application/x-www-form-urlencoded"))
            return nil
        }
        var out: [String: String] = [:]
        for f in fields {
            guard out[f.name] == nil else {
                OAuthProvider.refuse(ctx, .invalidRequest("'\(f.name)' appears more than once"))
                return nil
            }
            out[f.name] = f.value
        }
        return out
    }

    /// OpenID Connect Discovery 1.0 §3.
    private func discovery(_ realm: String) -> String {
        let issuer = provider.issuer(realm)
        let doc: [String: JSONValue] = [
            "issuer": .string(issuer),
            "authorization_endpoint": .string(issuer + "/authorize"),
            "token_endpoint": .string(issuer + "/access_token"),
            "userinfo_endpoint": .string(issuer + "/userinfo"),
            "jwks_uri": .string(issuer + "/connect/jwk_uri"),
            "revocation_endpoint": .string(issuer + "/token/revoke"),
            "introspection_endpoint": .string(issuer + "/introspect"),
            "end_session_endpoint": .string(issuer + "/connect/endSession"),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["ES256"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
            "scopes_supported": .array(Set(provider.config.clients.flatMap(\.scopes)).sorted().map { .string($0) }),
            "acr_values_supported": .array(provider.auth.config.journeys.keys.sorted().map { .string($0) }),
            "claims_supported": ["sub", "iss", "aud", "exp", "iat", "auth_time", "nonce", "acr", "name", "preferred_username", "email"],
            "prompt_values_supported": ["none", "login"],
            "authorization_response_iss_parameter_supported": true,
        ]
        return JSONValue.object(doc).canonical
    }
}
