import EventHTTP
import Foundation
import HTTPCore
import TxGateCore
import TxGateCrypto

/// The OAuth 2.0 / OpenID Connect provider's shared parts (built once, used by every worker's
/// `OAuthEndpoints`): the registered clients, the signing keys, and the tokens it issues.
final class OAuthProvider: Sendable {
    let config: OAuth2Config
    let auth: AuthService
    let keys: TokenKeys
    let publicURL: String
    let audience: String
    /// The identifiers of `oauth2.resources` (RFC 8707): a token may be issued for one of them.
    let resourceIdentifiers: Set<String>
    /// MACs dynamically registered clients' IDs (`DynamicClientID`): derived from the signing
    /// key (through `AuthService.codeKey`), so that every instance that shares it knows them.
    private let registrationKey: [UInt8]
    /// The `authorization_details` types transaction policies map (RFC 9396).
    let detailsMappings: [String: DetailsMapping]
    /// Clients whose ID is their metadata document's URL; nil: off.
    let metadataDocuments: ClientMetadataDocuments?

    init(config: OAuth2Config, auth: AuthService, keys: TokenKeys) throws {
        detailsMappings = auth.config.detailsMappings
        metadataDocuments = try config.clientIdMetadataDocuments.map {
            try ClientMetadataDocuments(config: $0, allowedScopes: config.offeredScopes, logger: auth.logger)
        }
        self.config = config
        self.auth = auth
        self.keys = keys
        publicURL = auth.publicURL
        audience = config.audience ?? auth.publicURL
        resourceIdentifiers = Set(config.resources.map { $0.identifier(publicURL: auth.publicURL) })
        registrationKey = Crypto.hmacSHA256(key: auth.codeKey, data: Array("txgate dynamic client registration".utf8))
    }

    /// A configured client, one registered at run time (`oauth2.dynamicRegistration`), or one
    /// whose metadata document was fetched (`resolveClient`).
    func client(_ id: String) -> OAuthClient? {
        if let c = config.client(id) { return c }
        if let found = metadataDocuments?.client(id) { return found.client }
        guard config.dynamicRegistration != nil else { return nil }
        return DynamicClientID.client(id, key: registrationKey, allowedScopes: config.offeredScopes)
    }

    /// Fetches the metadata document `clientId` names, if it names one and the feature is on,
    /// before `client(_:)` is asked; `then` gets why it cannot be used, if it cannot.
    func resolveClient(_ clientId: String?, on loop: EventLoop, _ then: @escaping (OAuthError?) -> Void) {
        guard let documents = metadataDocuments, let clientId, config.client(clientId) == nil else { then(nil); return }
        documents.resolve(clientId, on: loop, then)
    }

    /// A client that is not configured gets a code only with the person's consent: through this
    /// journey (nil for a configured client).
    func consentJourney(_ clientId: String) -> String? {
        guard config.client(clientId) == nil else { return nil }
        // By the ID's shape, not by what is kept: a document dropped from the cache meanwhile
        // must not make its client one that needs no consent.
        if metadataDocuments != nil, ClientMetadataDocument.location(clientId) != nil { return config.clientIdMetadataDocuments?.consentJourney }
        return config.dynamicRegistration?.consentJourney
    }

    /// What the consent calls a client that is not configured.
    func clientName(_ clientId: String) -> String? {
        if let found = metadataDocuments?.client(clientId) { return ClientMetadataDocument.displayName(found.name, url: clientId) }
        return DynamicClientID.name(clientId)
    }

    /// `authorization_details`, checked (RFC 9396): against the configured types, and with one
    /// entry at most that opens a request.
    func authorizationDetails(_ text: String) -> Result<[JSONValue], OAuthError> {
        AuthorizationDetails.parse(text, types: config.authorizationDetailsTypes)
            .flatMap { entries in AuthorizationDetails.binding(entries, mappings: detailsMappings).map { _ in entries } }
    }

    /// Writes the transaction `entries` ask `uid` to approve, ahead of its request
    /// (`TransactionRecord.fromDetails`): approved through the journey of the entry that opens a
    /// request (else the first entry's type's), living that type's `ttlS`; counted among the
    /// user's transactions waiting, as any is (its approval lowers the count again).
    func createApproval(_ entries: [JSONValue], uid: String, realm: String, on loop: EventLoop,
                        _ done: @escaping (Result<TransactionRecord, RequestFailure>) -> Void) {
        let types = config.authorizationDetailsTypes
        guard case .success(let opening) = AuthorizationDetails.binding(entries, mappings: detailsMappings),
              let typeName = opening?.type ?? entries.first?["type"]?.stringValue, let type = types[typeName] else {
            done(.failure(.internalError("authorization_details not checked before use")))
            return
        }
        let record = TransactionRecord.fromDetails(
            txid: Crypto.uuidV4(), entries: entries, type: opening?.type, bound: opening?.bound ?? [:], realm: realm,
            subject: uid, journey: type.journey, display: AuthorizationDetails.display(entries, types: types),
            expires: auth.now + type.ttlS)
        auth.store.create(TransactionRecord.key(record.txid), value: record.encoded, ttlMs: type.ttlS * 1000, on: loop) { [auth] r in
            switch r {
            case .failure(let e): done(.failure(.storeUnavailable(e.description)))
            case .success(false): done(.failure(.internalError("transaction id collision")))
            case .success(true):
                auth.store.increment(TransactionRecord.pendingKey(uid), ttlMs: type.ttlS * 1000, on: loop) { _ in }
                done(.success(record))
            }
        }
    }

    /// Registers a client (RFC 7591): its ID is its metadata, MACed.
    func register(_ m: DynamicClientID.Metadata) -> String { DynamicClientID.issue(m, key: registrationKey) }

    /// AM's issuer: `{public}/am/oauth2/realms/root[/realms/NAME]`.
    func issuer(_ realm: String) -> String {
        publicURL + "/am/oauth2/realms/root" + (realm == "/" ? "" : "/realms" + realm)
    }

    /// `/am/oauth2[/realms/root[/realms/NAME]]/<endpoint>` → (realm, endpoint).
    static func route(_ path: String) -> (realm: String, endpoint: String)? {
        var rest = path.dropFirst("/am/oauth2".count)
        guard rest.hasPrefix("/") else { return nil }
        var realm = "/"
        if rest.hasPrefix("/realms/root/") {
            rest = rest.dropFirst("/realms/root".count)
            if rest.hasPrefix("/realms/") {
                let parts = rest.split(separator: "/", maxSplits: 2)
                guard parts.count == 3 else { return nil }
                realm = "/" + parts[1]
                rest = "/" + parts[2]
            }
        }
        let endpoint = String(rest.dropFirst())
        return endpoint.isEmpty ? nil : (realm, endpoint)
    }

    /// RFC 6749 §2.3: a confidential client authenticates (HTTP Basic or form secret, or RFC 7523
    /// `private_key_jwt` with a key of its `jwksFile`), a public one names itself. An assertion's
    /// `jti` is claimed in the store for its lifetime: the same assertion twice is refused.
    func authenticateClient(_ form: [String: String], _ headers: HTTPHeaders, on loop: EventLoop,
                            _ done: @escaping (Result<OAuthClient, OAuthError>) -> Void) {
        resolveClient(form["client_id"], on: loop) { [self] refused in
            if let refused { done(.failure(refused)); return }
            checkedClient(form, headers, on: loop, done)
        }
    }

    private func checkedClient(_ form: [String: String], _ headers: HTTPHeaders, on loop: EventLoop,
                               _ done: @escaping (Result<OAuthClient, OAuthError>) -> Void) {
        switch checkClient(form, headers, tokenEndpoint: issuer("/") + "/access_token") {
        case .failure(let e): done(.failure(e))
        case .success(let (client, nil)): done(.success(client))
        case .success(let (client, assertion?)):
            let key = "oauth2:jti:" + Crypto.hex(Crypto.sha256(Array((client.clientId + "\u{0}" + assertion.jti).utf8)))
            auth.store.create(key, value: [1], ttlMs: max(1, assertion.exp - auth.now + 60) * 1000, on: loop) { r in
                switch r {
                case .failure(let e): done(.failure(OAuthError("temporarily_unavailable", e.description, status: 503)))
                case .success(false): done(.failure(.invalidClient("the client assertion was used already (jti)")))
                case .success(true): done(.success(client))
                }
            }
        }
    }

    /// `authenticateClient`, answering the request when it fails.
    func withClient(_ ctx: EndpointCall, _ form: [String: String], on loop: EventLoop, _ then: @escaping (OAuthClient) -> Void) {
        authenticateClient(form, ctx.head.headers, on: loop) { r in
            switch r {
            case .success(let client): then(client)
            case .failure(let e) where e.status == 503: ctx.fail(.storeUnavailable(e.description))
            case .failure(let e): OAuthProvider.refuse(ctx, e)
            }
        }
    }

    static let assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

    /// The client the request authenticates as, and its assertion's `jti` and `exp` when it used one.
    private func checkClient(_ form: [String: String], _ headers: HTTPHeaders,
                             tokenEndpoint: String) -> Result<(OAuthClient, (jti: String, exp: Int)?), OAuthError> {
        if let assertion = form["client_assertion"] {
            guard form["client_assertion_type"] == Self.assertionType else {
                return .failure(.invalidClient("client_assertion_type must be \(Self.assertionType)"))
            }
            return privateKeyJWT(assertion, clientId: form["client_id"], tokenEndpoint: tokenEndpoint).map { ($0.0, $0.1) }
        }
        var id = form["client_id"], secret = form["client_secret"]
        if let basic = headers.first("Authorization"), basic.lowercased().hasPrefix("basic "),
           let decoded = Base64.decode(String(basic.dropFirst(6)).trimmingCharacters(in: .whitespaces)) {
            let pair = String(decoding: decoded, as: UTF8.self).split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            if pair.count == 2 {
                id = pair[0].removingPercentEncoding ?? String(pair[0])
                secret = pair[1].removingPercentEncoding ?? String(pair[1])
            }
        }
        guard let id, let client = client(id) else { return .failure(.invalidClient("unknown client")) }
        if client.isPublic { return .success((client, nil)) }
        guard let secret, let expected = client.clientSecret,
              Crypto.constantTimeEquals(Array(secret.utf8), Array(expected.utf8)) else {
            return .failure(.invalidClient("client authentication failed"))
        }
        return .success((client, nil))
    }

    /// RFC 7523 §3 (and OIDC Core §9): `iss` and `sub` the client, `aud` the token endpoint or
    /// the issuer, signed (ES256 or RS256) with a key of the client's JWK Set, not expired and
    /// expiring within the hour (authlib's default lifetime), with a `jti`.
    private func privateKeyJWT(_ assertion: String, clientId: String?, tokenEndpoint: String) -> Result<(OAuthClient, (jti: String, exp: Int)), OAuthError> {
        guard let claims = JWS.unverifiedParts(assertion)?.claims, let iss = claims["iss"]?.stringValue,
              let client = client(iss), let jwks = client.jwks.flatMap(JWSKey.parseSet) else {
            return .failure(.invalidClient("the client assertion names no client with a JWK Set"))
        }
        if let clientId, clientId != iss { return .failure(.invalidClient("client_id is not the assertion's issuer")) }
        let now = auth.now
        let v: JWS.Verified
        do { v = try JWS.verify(assertion, typ: nil, now: now, key: { jwks[$0] }) } catch {
            return .failure(.invalidClient("the client assertion does not verify: \(error)"))
        }
        let aud = v.claims["aud"].map { $0.arrayValue?.compactMap(\.stringValue) ?? [$0.stringValue ?? ""] } ?? []
        guard v.string("sub") == iss, aud.contains(where: { $0 == tokenEndpoint || $0 == issuer("/") }) else {
            return .failure(.invalidClient("the client assertion's sub must be the client and its aud this provider"))
        }
        guard let jti = v.string("jti"), !jti.isEmpty, let exp = v.int("exp"), exp <= now + 3_600 else {
            return .failure(.invalidClient("the client assertion needs a jti and an exp at most an hour ahead"))
        }
        return .success((client, (jti, exp)))
    }

    /// A signed access token (RFC 9068) for a grant; `family` is its refresh family (`sid`).
    func accessToken(_ g: AuthorizationGrant, family: String, now: Int) -> String {
        var claims = TokenClaims.accessToken(issuer: issuer(g.realm), audience: g.resource ?? audience, uid: g.uid, clientId: g.clientId,
                                             scope: g.scope, acr: g.acr, authTime: g.authTime,
                                             jti: Base64URL.encode(Crypto.randomBytes(16)), now: now, ttlS: config.accessTokenTtlS,
                                             txn: g.txn, authorizationDetails: g.authorizationDetails)
        claims["sid"] = .string(family)
        return keys.sign(claims, typ: "at+jwt")
    }

    func idToken(_ g: AuthorizationGrant, now: Int) -> String {
        keys.sign(TokenClaims.idToken(issuer: issuer(g.realm), clientId: g.clientId, uid: g.uid, nonce: g.nonce, acr: g.acr,
                                      authTime: g.authTime, now: now, ttlS: config.idTokenTtlS, attributes: userAttributes(g.uid),
                                      scope: g.scope), typ: "JWT")
    }

    func userAttributes(_ uid: String) -> [String: String] {
        guard let u = auth.users[uid] else { return [:] }
        var a = u.attributes
        if let email = u.email { a["email"] = email }
        return a
    }

    /// Verifies an access token this provider issued: ES256 with a published key, `typ`
    /// at+jwt, not expired, one of this provider's issuers, and `aud` naming the gateway.
    func verifyAccessToken(_ token: String, now: Int) throws(JWSError) -> JWS.Verified {
        let v = try JWS.verify(token, typ: "at+jwt", now: now, keys: keys.key)
        let iss = v.string("iss") ?? ""
        guard iss == issuer("/") || auth.config.realms.contains(where: { iss == issuer("/" + $0) }) else {
            throw .invalidClaims("the token was issued by another issuer")
        }
        // The gateway's audience, or one resource's (RFC 8707): a resource's token is good for
        // that resource's paths alone (`tokenFits`).
        let aud = v.claims["aud"]
        guard aud?.stringValue == audience || aud?.arrayValue?.contains(.string(audience)) == true
                || aud?.stringValue.map(resourceIdentifiers.contains) == true else {
            throw .invalidClaims("the token is for another audience")
        }
        guard v.string("sub") != nil else { throw .invalidClaims("no sub") }
        return v
    }

    /// Whether a verified token may be used on `path`: a token for a resource (RFC 8707) only
    /// under that resource's path, and a token for the gateway's audience not on a resource
    /// (which has tokens of its own).
    func tokenFits(_ v: JWS.Verified, path: Substring) -> Bool {
        let resource = config.resource(containing: path).map { $0.identifier(publicURL: publicURL) }
        guard let aud = v.claims["aud"]?.stringValue, resourceIdentifiers.contains(aud) else { return resource == nil }
        return aud == resource
    }

    /// The realm an issuer names.
    func realm(ofIssuer iss: String) -> String {
        let root = issuer("/")
        return iss == root ? "/" : "/" + iss.dropFirst((root + "/realms/").count)
    }

    static func noStore() -> HTTPHeaders {
        var h = HTTPHeaders()
        h.add("Cache-Control", "no-store")
        h.add("Pragma", "no-cache")
        return h
    }

    static func refuse(_ ctx: EndpointCall, _ e: OAuthError) {
        var h = noStore()
        if e.status == 401 { h.add("WWW-Authenticate", #"Basic realm="txgate""#) }
        ctx.respondJSON(status: e.status, e.json, headers: h)
    }
}

extension OAuthProvider {
    /// The subject an access token names: its `acr` counts as a completed journey, `auth_time`
    /// as the time of the last authentication.
    func subject(_ v: JWS.Verified, token: String) -> Subject {
        let uid = v.string("sub") ?? ""
        return Subject(uid: uid, realm: realm(ofIssuer: v.string("iss") ?? ""), journeys: v.string("acr").map { [$0] } ?? [],
                       attributes: auth.users[uid]?.attributes ?? [:], token: token, authTime: v.int("auth_time"))
    }
}
