import EventHTTP
import HTTPCore
import TxGateCore

/// What can be asked about or done with an issued token: `userinfo` (OIDC Core §5.3),
/// `token/revoke` (RFC 7009), `introspect` (RFC 7662) and `connect/endSession` (OIDC
/// RP-Initiated Logout). An access token counts as revoked once its refresh family (`sid`) is.
struct TokenInfoEndpoints {
    let provider: OAuthProvider
    let loop: EventLoop

    private var store: Store { provider.auth.store }

    func userinfo(_ ctx: EndpointCall) {
        guard let token = IdentifyPhase.bearerToken(ctx.head.headers) else {
            invalidToken(ctx, "send the access token as Authorization: Bearer")
            return
        }
        liveAccessToken(ctx, token) { v in
            guard let v, let uid = v.string("sub") else { invalidToken(ctx, "the access token is not valid"); return }
            let scope = (v.string("scope") ?? "").split(separator: " ").map(String.init)
            let claims = TokenClaims.userClaims(uid: uid, attributes: provider.userAttributes(uid), scope: scope)
            ctx.respondJSON(status: 200, JSONValue.object(claims).canonical, headers: OAuthProvider.noStore())
        }
    }

    /// RFC 7009: the token's family is revoked; an unknown token is not an error (200 either way).
    func revoke(_ ctx: EndpointCall, form: [String: String]) {
        provider.withClient(ctx, form, on: loop) { client in revoke(ctx, form: form, client: client) }
    }

    private func revoke(_ ctx: EndpointCall, form: [String: String], client: OAuthClient) {
        guard let token = form["token"] else { OAuthProvider.refuse(ctx, .invalidRequest("token is required")); return }
        family(of: token, client: client) { family in
            guard let family else { ctx.respondJSON(status: 200, "{}", headers: OAuthProvider.noStore()); return }
            store.delete(RefreshRecord.familyKey(family), on: loop) { r in
                if case .failure(let e) = r { ctx.fail(.storeUnavailable(e.description)); return }
                provider.auth.logger.info("token revoked", metadata: ["request_id": .string(ctx.requestId),
                                                                      "client_id": .string(client.clientId)])
                ctx.respondJSON(status: 200, "{}", headers: OAuthProvider.noStore())
            }
        }
    }

    /// RFC 7662, for confidential clients (a backend registers as one): the caller must
    /// authenticate (§2.1); a public client, which can only name itself, is refused.
    func introspect(_ ctx: EndpointCall, form: [String: String]) {
        provider.withClient(ctx, form, on: loop) { client in
            guard !client.isPublic else {
                OAuthProvider.refuse(ctx, .invalidClient("introspection needs client authentication (RFC 7662 §2.1): '\(client.clientId)' is a public client"))
                return
            }
            introspectToken(ctx, form: form)
        }
    }

    private func introspectToken(_ ctx: EndpointCall, form: [String: String]) {
        guard let token = form["token"] else { OAuthProvider.refuse(ctx, .invalidRequest("token is required")); return }
        liveAccessToken(ctx, token) { v in
            guard let v else { ctx.respondJSON(status: 200, #"{"active":false}"#, headers: OAuthProvider.noStore()); return }
            var out: [String: JSONValue] = ["active": true, "token_type": "Bearer"]
            for name in ["scope", "client_id", "sub", "exp", "iat", "iss", "aud", "acr", "auth_time", "jti", "txn", "authorization_details"] {
                if let value = v.claims[name] { out[name] = value }
            }
            ctx.respondJSON(status: 200, JSONValue.object(out).canonical, headers: OAuthProvider.noStore())
        }
    }

    /// Ends the browser's session (OIDC RP-Initiated Logout, `GET` with the query or `POST`
    /// with a form); redirects to `post_logout_redirect_uri` only when it is registered for the
    /// client the `id_token_hint` was issued to. Without a valid hint nothing shows that the
    /// user asked for it (any page could navigate there: logout CSRF), so a `GET` asks the user
    /// first (§2: a page with a button that POSTs back), and a `POST` without a hint must come
    /// from the gateway's own origin (`Origin`, else `Sec-Fetch-Site: same-origin`).
    func endSession(_ ctx: EndpointCall, params q: [String: String], posted: Bool) {
        var client: OAuthClient?
        if let hint = q["id_token_hint"] {
            // An expired ID token still names who logs out (RP-Initiated Logout §2): exp is not checked.
            guard let v = try? JWS.verify(hint, typ: nil, now: 0, keys: provider.keys.key), let aud = v.string("aud") else {
                OAuthProvider.refuse(ctx, .invalidRequest("id_token_hint is not an ID token this provider issued"))
                return
            }
            client = provider.config.client(aud)
        }
        var target: String?
        if let uri = q["post_logout_redirect_uri"] {
            guard let client, client.postLogoutRedirectUris.contains(uri) else {
                OAuthProvider.refuse(ctx, .invalidRequest("post_logout_redirect_uri is not registered (and needs an id_token_hint)"))
                return
            }
            target = q["state"].map { AuthorizationRequest.redirect(uri, [("state", $0)]) } ?? uri
        }
        let sessions = provider.auth.sessions
        guard let token = sessions.token(in: ctx.head.headers) else { loggedOut(ctx, target: target); return }
        if q["id_token_hint"] == nil {
            guard posted else { confirmLogout(ctx); return }
            guard isSameOrigin(ctx.head.headers) else {
                ctx.fail(.forbidden("a logout without id_token_hint must be confirmed on the gateway's own page"))
                return
            }
        }
        SessionFamilies.revokeAll(of: SessionManager.key(token), store: store, loop: loop) { r in
            guard case .success(let revoked) = r else {
                if case .failure(let e) = r { ctx.fail(.storeUnavailable(e.description)) }
                return
            }
            sessions.delete(token, on: loop) { r in
                if case .failure(let e) = r { ctx.fail(.storeUnavailable(e.description)); return }
                provider.auth.logger.info("session ended (OIDC end session)", metadata: [
                    "request_id": .string(ctx.requestId), "refresh_families_revoked": .stringConvertible(revoked),
                ])
                loggedOut(ctx, target: target)
            }
        }
    }

    private func loggedOut(_ ctx: EndpointCall, target: String?) {
        var h = OAuthProvider.noStore()
        h.add("Set-Cookie", provider.auth.sessions.clearCookie())
        if let target {
            h.add("Location", target)
            ctx.respond(status: 302, headers: h, body: [])
        } else if ctx.head.headers.first("Accept").map(ParkedRequest.prefersHTML) == true {
            // A person signing out (the confirmation page's button, an app's sign-out form)
            // ends on the sign-in page, not on JSON.
            h.add("Location", provider.publicURL + "/am/XUI/")
            ctx.respond(status: 303, headers: h, body: [])
        } else {
            ctx.respondJSON(status: 200, #"{"loggedOut":true}"#, headers: h)
        }
    }

    /// A page that asks the user to sign out, with a button that POSTs back here.
    private func confirmLogout(_ ctx: EndpointCall) {
        var h = OAuthProvider.noStore()
        h.add("Content-Type", "text/html; charset=utf-8")
        h.add("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
        let html = """
            <!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>Sign out</title><style>body{font-family:system-ui,sans-serif;max-width:28rem;margin:4rem auto;padding:0 1rem}
            button{font-size:1rem;padding:.6rem 1.2rem}</style></head><body><h1>Sign out?</h1>
            <p>An application asked to end your session here. Sign out only if you meant to.</p>
            <form method="post" action="\(ctx.path)"><button type="submit">Sign out</button></form></body></html>
            """
        ctx.respond(status: 200, headers: h, body: Array(html.utf8))
    }

    /// Whether a POST comes from a page of the gateway's own origin.
    private func isSameOrigin(_ headers: HTTPHeaders) -> Bool {
        if let origin = headers.first("Origin") {
            return HTTPURL(parsing: provider.publicURL).map { $0.origin == origin.trimmingOWS() } ?? false
        }
        return headers.first("Sec-Fetch-Site").map { asciiCaseInsensitiveEquals($0.trimmingOWS(), "same-origin") } ?? false
    }

    /// A verified access token whose family has not been revoked, else nil.
    private func liveAccessToken(_ ctx: EndpointCall, _ token: String, _ then: @escaping (JWS.Verified?) -> Void) {
        guard let v = try? provider.verifyAccessToken(token, now: provider.auth.now) else { then(nil); return }
        guard let family = v.string("sid") else { then(v); return }
        store.get(RefreshRecord.familyKey(family), on: loop) { r in
            switch r {
            case .failure(let e): ctx.fail(.storeUnavailable(e.description))
            case .success(let alive): then(alive == nil ? nil : v)
            }
        }
    }

    /// The refresh family of a refresh token or an access token issued to `client`, else nil.
    private func family(of token: String, client: OAuthClient, _ then: @escaping (String?) -> Void) {
        if let v = try? provider.verifyAccessToken(token, now: provider.auth.now) {
            then(v.string("client_id") == client.clientId ? v.string("sid") : nil)
            return
        }
        store.get(RefreshRecord.key(token), on: loop) { r in
            let record = (try? r.get())?.flatMap(RefreshRecord.decode)
            then(record?.clientId == client.clientId ? record?.family : nil)
        }
    }

    private func invalidToken(_ ctx: EndpointCall, _ description: String) {
        var h = OAuthProvider.noStore()
        h.add("WWW-Authenticate", #"Bearer error="invalid_token", error_description="\#(description)""#)
        ctx.respondJSON(status: 401, OAuthError("invalid_token", description, status: 401).json, headers: h)
    }
}
