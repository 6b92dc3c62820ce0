import EventHTTP
import HTTPCore
import TxGateCore
import TxGateCrypto

/// `access_token` (RFC 6749 §4.1.3, §6): an authorization code with its PKCE verifier, or a
/// refresh token, for an access token (RFC 9068), an ID token and a new refresh token.
/// Refresh tokens rotate; one presented twice revokes its family (RFC 9700 §4.14.2).
struct TokenEndpoint {
    let provider: OAuthProvider
    let loop: EventLoop

    private var store: Store { provider.auth.store }

    func handle(_ ctx: EndpointCall, form: [String: String]) {
        provider.withClient(ctx, form, on: loop) { client in handle(ctx, form: form, client: client) }
    }

    private func handle(_ ctx: EndpointCall, form: [String: String], client: OAuthClient) {
        switch form["grant_type"] {
        case "authorization_code": redeemCode(ctx, form, client)
        case "refresh_token": refresh(ctx, form, client)
        case CIBARequest.grantType: CIBAEndpoint(provider: provider, loop: loop).poll(ctx, form: form, client: client, tokens: self)
        case nil: OAuthProvider.refuse(ctx, .invalidRequest("grant_type is required"))
        default: OAuthProvider.refuse(ctx, OAuthError("unsupported_grant_type", "grant_type must be authorization_code, refresh_token or "
                                                      + CIBARequest.grantType))
        }
    }

    /// The code is taken from the store before anything is checked: whatever the outcome, it never works twice.
    private func redeemCode(_ ctx: EndpointCall, _ form: [String: String], _ client: OAuthClient) {
        guard let code = form["code"] else { OAuthProvider.refuse(ctx, .invalidRequest("code is required")); return }
        store.take(AuthorizationGrant.key(code), on: loop) { r in
            switch r {
            case .failure(let e): ctx.fail(.storeUnavailable(e.description))
            case .success(let bytes):
                guard let grant = bytes.flatMap(AuthorizationGrant.decode) else {
                    refused(ctx, .invalidGrant("the code is unknown, expired or already used"), client)
                    return
                }
                if let e = grant.redeemRefusal(clientId: client.clientId, redirectUri: form["redirect_uri"], verifier: form["code_verifier"],
                                               resource: form["resource"]) {
                    refused(ctx, e, client)
                    return
                }
                newFamily(ctx, grant)
            }
        }
    }

    func newFamily(_ ctx: EndpointCall, _ grant: AuthorizationGrant) {
        let family = Base64URL.encode(Crypto.randomBytes(16))
        let ttl = provider.config.refreshTokenTtlS
        store.put(RefreshRecord.familyKey(family), value: Array(grant.uid.utf8), ttlMs: ttl * 1000, on: loop) { r in
            if case .failure(let e) = r { ctx.fail(.storeUnavailable(e.description)); return }
            let now = provider.auth.now
            var record = RefreshRecord(family: family, clientId: grant.clientId, uid: grant.uid, realm: grant.realm, scope: grant.scope,
                                       acr: grant.acr, authTime: grant.authTime, expires: now + ttl, resource: grant.resource)
            record.authorizationDetails = grant.authorizationDetails
            guard let session = grant.session else { issue(ctx, grant, record); return }
            // Ending the SSO session revokes the family (connect/endSession).
            SessionFamilies.add(family, to: session, ttlMs: provider.auth.config.session.maxLifetimeS * 1000, store: store, loop: loop) { r in
                if case .failure(let e) = r { ctx.fail(.storeUnavailable(e.description)); return }
                issue(ctx, grant, record)
            }
        }
    }

    private func refresh(_ ctx: EndpointCall, _ form: [String: String], _ client: OAuthClient) {
        guard let token = form["refresh_token"] else { OAuthProvider.refuse(ctx, .invalidRequest("refresh_token is required")); return }
        let key = RefreshRecord.key(token)
        store.get(key, on: loop) { r in
            switch r {
            case .failure(let e): ctx.fail(.storeUnavailable(e.description))
            case .success(let bytes):
                let record = bytes.flatMap(RefreshRecord.decode)
                switch RefreshRecord.plan(record, clientId: client.clientId, now: provider.auth.now) {
                case .refuse(let e): refused(ctx, e, client)
                case .revokeFamily(let family, let e): revoke(ctx, family, e, client)
                case .rotate:
                    guard let bytes, let record else { return }
                    rotate(ctx, key, bytes, record, client)
                }
            }
        }
    }

    /// Marks the token used (only over what was read: of two concurrent uses, one rotates and
    /// the other is reuse), checks the family is alive, and issues the successor.
    private func rotate(_ ctx: EndpointCall, _ key: String, _ read: [UInt8], _ record: RefreshRecord, _ client: OAuthClient) {
        var used = record
        used.used = true
        store.compareAndSwap(key, expected: read, new: used.encoded, ttlMs: nil, on: loop) { r in
            switch r {
            case .failure(let e): ctx.fail(.storeUnavailable(e.description))
            case .success(false): revoke(ctx, record.family, .invalidGrant("the refresh token was used concurrently; its family is revoked"), client)
            case .success(true):
                store.get(RefreshRecord.familyKey(record.family), on: loop) { r in
                    switch r {
                    case .failure(let e): ctx.fail(.storeUnavailable(e.description))
                    case .success(nil): refused(ctx, .invalidGrant("the refresh token was revoked"), client)
                    case .success: successor(ctx, record)
                    }
                }
            }
        }
    }

    private func successor(_ ctx: EndpointCall, _ record: RefreshRecord) {
        let next = record.successor(now: provider.auth.now, ttlS: provider.config.refreshTokenTtlS)
        var grant = AuthorizationGrant(clientId: record.clientId, redirectUri: "", codeChallenge: "", uid: record.uid, realm: record.realm,
                                       scope: record.scope, nonce: nil, acr: record.acr, authTime: record.authTime, txn: nil)
        grant.resource = record.resource
        grant.authorizationDetails = record.authorizationDetails
        issue(ctx, grant, next)
    }

    private func revoke(_ ctx: EndpointCall, _ family: String, _ e: OAuthError, _ client: OAuthClient) {
        store.delete(RefreshRecord.familyKey(family), on: loop) { r in
            if case .failure(let err) = r { ctx.fail(.storeUnavailable(err.description)); return }
            provider.auth.logger.warning("refresh token reuse: family revoked", metadata: [
                "request_id": .string(ctx.requestId), "client_id": .string(client.clientId), "family": .string(masked(family)),
            ])
            OAuthProvider.refuse(ctx, e)
        }
    }

    /// Writes the new refresh token and answers with the token response (RFC 6749 §5.1).
    private func issue(_ ctx: EndpointCall, _ grant: AuthorizationGrant, _ record: RefreshRecord) {
        let refreshToken = Base64URL.encode(Crypto.randomBytes(32))
        let ttl = max(1, record.expires - provider.auth.now)
        store.create(RefreshRecord.key(refreshToken), value: record.encoded, ttlMs: ttl * 1000, on: loop) { r in
            switch r {
            case .failure(let e): ctx.fail(.storeUnavailable(e.description))
            case .success(false): ctx.fail(.internalError("refresh token collision"))
            case .success(true):
                let now = provider.auth.now
                var body: [String: JSONValue] = [
                    "access_token": .string(provider.accessToken(grant, family: record.family, now: now)), "token_type": "Bearer",
                    "expires_in": .number(provider.config.accessTokenTtlS), "refresh_token": .string(refreshToken),
                    "scope": .string(grant.scope.joined(separator: " ")),
                ]
                if grant.scope.contains("openid") { body["id_token"] = .string(provider.idToken(grant, now: now)) }
                if let details = grant.authorizationDetails { body["authorization_details"] = details }
                provider.auth.logger.info("tokens issued", metadata: [
                    "request_id": .string(ctx.requestId), "client_id": .string(grant.clientId), "user": .string(grant.uid),
                ])
                ctx.respondJSON(status: 200, JSONValue.object(body).canonical, headers: OAuthProvider.noStore())
            }
        }
    }

    private func refused(_ ctx: EndpointCall, _ e: OAuthError, _ client: OAuthClient) {
        provider.auth.logger.warning("token request refused", metadata: [
            "request_id": .string(ctx.requestId), "client_id": .string(client.clientId), "error": .string(e.code),
            "reason": .string(e.description),
        ])
        OAuthProvider.refuse(ctx, e)
    }
}
