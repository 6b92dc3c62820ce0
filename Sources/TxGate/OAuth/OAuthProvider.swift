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

    init(config: OAuth2Config, auth: AuthService, keys: TokenKeys) {
        self.config = config
        self.auth = auth
        self.keys = keys
        publicURL = auth.publicURL
        audience = config.audience ?? auth.publicURL
        resourceIdentifiers = Set(config.resources.map { $0.identifier(publicURL: auth.publicURL) })
        registrationKey = Crypto.hmacSHA256(key: auth.codeKey, data: Array("txgate dynamic client registration".utf8))
    }

    /// A configured client, or one registered at run time (`oauth2.dynamicRegistration`).
    func client(_ id: String) -> OAuthClient? {
        if let c = config.client(id) { return c }
        guard config.dynamicRegistration != nil else { return nil }
        return DynamicClientID.client(id, key: registrationKey, allowedScopes: config.offeredScopes)
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

    /// RFC 6749 §2.3: a confidential client authenticates (HTTP Basic or form), a public one names itself.
    func authenticateClient(_ form: [String: String], _ headers: HTTPHeaders) -> Result<OAuthClient, OAuthError> {
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
        if client.isPublic { return .success(client) }
        guard let secret, let expected = client.clientSecret,
              Crypto.constantTimeEquals(Array(secret.utf8), Array(expected.utf8)) else {
            return .failure(.invalidClient("client authentication failed"))
        }
        return .success(client)
    }

    /// A signed access token (RFC 9068) for a grant; `family` is its refresh family (`sid`).
    func accessToken(_ g: AuthorizationGrant, family: String, now: Int) -> String {
        var claims = TokenClaims.accessToken(issuer: issuer(g.realm), audience: g.resource ?? audience, uid: g.uid, clientId: g.clientId,
                                             scope: g.scope, acr: g.acr, authTime: g.authTime,
                                             jti: Base64URL.encode(Crypto.randomBytes(16)), now: now, ttlS: config.accessTokenTtlS,
                                             txn: g.txn)
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
