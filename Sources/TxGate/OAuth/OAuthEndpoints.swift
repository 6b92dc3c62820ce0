import EventHTTP
import Foundation
import HTTPCore
import TxGateCore
import TxGateCrypto

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
        case ("register", "POST"): register(ctx, realm: realm)
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
        case ("access_token", "POST"), ("token/revoke", "POST"), ("introspect", "POST"), ("par", "POST"), ("bc-authorize", "POST"):
            guard let form = Self.form(ctx) else { return }
            switch endpoint {
            case "access_token": token.handle(ctx, form: form)
            case "bc-authorize": CIBAEndpoint(provider: provider, loop: loop).authorize(ctx, form: form)
            case "par": authorize.push(ctx, form: form, realm: realm)
            case "token/revoke": tokenInfo.revoke(ctx, form: form)
            default: tokenInfo.introspect(ctx, form: form)
            }
        case ("register", _):
            ctx.fail(.methodNotAllowed("\(method) is not allowed here; use POST"))
        case ("authorize", _), (".well-known/openid-configuration", _), ("connect/jwk_uri", _):
            ctx.fail(.methodNotAllowed("\(method) is not allowed here; use GET"))
        case ("connect/endSession", _):
            ctx.fail(.methodNotAllowed("\(method) is not allowed here; use GET or POST"))
        case ("access_token", _), ("token/revoke", _), ("introspect", _), ("par", _), ("bc-authorize", _):
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

    /// The gateway's own well-known documents, when they exist: RFC 9728 protected resource
    /// metadata (`/.well-known/oauth-protected-resource`, for the gateway's audience, and
    /// `…/oauth-protected-resource/<path>` for a resource), and RFC 8414 authorization server
    /// metadata at the issuer's path-inserted well-known URLs. nil: not the gateway's (it goes to
    /// the backend, as before).
    func wellKnown(_ path: String, method: String) -> LocalReply? {
        let publicURL = provider.publicURL
        var doc: String?
        if path == ProtectedResourceMetadata.wellKnown {
            doc = ProtectedResourceMetadata.document(resource: provider.audience, issuer: provider.issuer("/"),
                                                     scopes: Set(provider.config.clients.flatMap(\.scopes)).sorted())
        } else if path.hasPrefix(ProtectedResourceMetadata.wellKnown + "/"),
                  let r = provider.config.resources.first(where: { path == ProtectedResourceMetadata.wellKnown + $0.path }) {
            doc = ProtectedResourceMetadata.document(resource: r.identifier(publicURL: publicURL), issuer: provider.issuer("/"), scopes: r.scopes)
        } else {
            for prefix in ["/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"] where path.hasPrefix(prefix + "/am/oauth2") {
                if let (realm, rest) = OAuthProvider.route(String(path.dropFirst(prefix.count)) + "/x"), rest == "x",
                   realm == "/" || provider.auth.config.realms.contains(String(realm.dropFirst())) {
                    doc = discovery(realm)
                }
            }
        }
        guard let doc else { return nil }
        guard method == "GET" || method == "HEAD" else {
            return .json(405, ErrorBody.text(status: 405, message: "\(method) is not allowed here; use GET"), details: .authService)
        }
        var h = HTTPHeaders()
        h.add("Cache-Control", "max-age=300")
        h.add("Access-Control-Allow-Origin", "*")
        return .json(200, doc, headers: h, details: .authService)
    }

    /// RFC 7591 dynamic client registration (when `oauth2.dynamicRegistration` allows it): a
    /// public client whose ID is its metadata (`DynamicClientID`), answered 201 with the metadata
    /// as registered.
    private func register(_ ctx: EndpointCall, realm: String) {
        guard let settings = provider.config.dynamicRegistration else {
            ctx.fail(.notFound("dynamic client registration is not enabled (oauth2.dynamicRegistration)"))
            return
        }
        if let expected = settings.initialAccessToken {
            let given = ctx.head.headers.first("Authorization").flatMap { h -> String? in
                h.lowercased().hasPrefix("bearer ") ? String(h.dropFirst(7)).trimmingCharacters(in: .whitespaces) : nil
            }
            guard let given, Crypto.constantTimeEquals(Array(given.utf8), Array(expected.utf8)) else {
                var h = OAuthProvider.noStore()
                h.add("WWW-Authenticate", #"Bearer error="invalid_token", error_description="an initial access token is required""#)
                ctx.respondJSON(status: 401, OAuthError("invalid_token", "an initial access token is required", status: 401).json, headers: h)
                return
            }
        }
        guard ctx.head.headers.first("Content-Type").flatMap(MediaType.init)?.isJSON == true,
              let body = JSONValue.parse(ctx.exchange.body.bytes) else {
            OAuthProvider.refuse(ctx, OAuthError("invalid_client_metadata", "the body must be a JSON object (application/json)"))
            return
        }
        switch DynamicClientID.metadata(body, allowedScopes: provider.config.offeredScopes) {
        case .failure(let e):
            ctx.respondJSON(status: 400, e.json, headers: OAuthProvider.noStore())
        case .success(let m):
            let id = provider.register(m)
            provider.auth.logger.info("client registered", metadata: [
                "request_id": .string(ctx.requestId), "client_name": .string(m.name ?? "-"),
                "redirect_uris": .string(m.redirectUris.joined(separator: " ")),
            ])
            var doc: [String: JSONValue] = [
                "client_id": .string(id), "client_id_issued_at": .number(provider.auth.now),
                "redirect_uris": .array(m.redirectUris.map { .string($0) }), "token_endpoint_auth_method": "none",
                "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
                "scope": .string(m.scopes.joined(separator: " ")),
            ]
            if let name = m.name { doc["client_name"] = .string(name) }
            ctx.respondJSON(status: 201, JSONValue.object(doc).canonical, headers: OAuthProvider.noStore())
        }
    }

    /// OpenID Connect Discovery 1.0 §3, which is RFC 8414's authorization server metadata too.
    func discovery(_ realm: String) -> String {
        let issuer = provider.issuer(realm)
        var doc: [String: JSONValue] = [
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
            "token_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post", "private_key_jwt"],
            "token_endpoint_auth_signing_alg_values_supported": ["ES256", "RS256"],
            "scopes_supported": .array(provider.config.offeredScopes.sorted().map { .string($0) }),
            "acr_values_supported": .array(provider.auth.config.journeys.keys.sorted().map { .string($0) }),
            "claims_supported": ["sub", "iss", "aud", "exp", "iat", "auth_time", "nonce", "acr", "name", "preferred_username", "email"],
            "prompt_values_supported": ["none", "login"],
            "authorization_response_iss_parameter_supported": true,
        ]
        if provider.config.dynamicRegistration != nil { doc["registration_endpoint"] = .string(issuer + "/register") }
        doc["pushed_authorization_request_endpoint"] = .string(issuer + "/par")
        if provider.config.ciba != nil {
            doc["backchannel_authentication_endpoint"] = .string(issuer + "/bc-authorize")
            doc["backchannel_token_delivery_modes_supported"] = ["poll", "ping"]
            doc["backchannel_user_code_parameter_supported"] = false
            doc["grant_types_supported"] = ["authorization_code", "refresh_token", .string(CIBARequest.grantType)]
        }
        doc["require_pushed_authorization_requests"] = false
        if !provider.resourceIdentifiers.isEmpty { doc["resource_indicators_supported"] = true }
        if provider.metadataDocuments != nil { doc["client_id_metadata_document_supported"] = true }
        if !provider.config.authorizationDetailsTypes.isEmpty {
            doc["authorization_details_types_supported"] = .array(provider.config.authorizationDetailsTypes.keys.sorted().map { .string($0) })
        }
        return JSONValue.object(doc).canonical
    }
}
