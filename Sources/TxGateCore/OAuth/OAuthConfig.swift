import Foundation

/// `oauth2` in gateway.json: the OAuth 2.0 / OpenID Connect provider under `/am/oauth2/`.
public struct OAuth2Config: ConfigObject, Sendable, Equatable {
    public var clients: [OAuthClient] = []
    public var accessTokenTtlS = 300
    public var idTokenTtlS = 300
    public var refreshTokenTtlS = 86_400
    /// `aud` of access tokens: the APIs the gateway protects (default: its public URL).
    public var audience: String?
    /// APIs with their own tokens (RFC 8707) and metadata (RFC 9728): an MCP server behind the gateway.
    public var resources: [OAuthResource] = []
    /// RFC 7591 dynamic client registration; nil: off.
    public var dynamicRegistration: DynamicRegistrationConfig?
    /// OpenID CIBA (back-channel authentication); nil: off.
    public var ciba: CIBAConfig?
    /// RFC 9396: the `authorization_details` types accepted, by name; empty: none.
    public var authorizationDetailsTypes: [String: AuthorizationDetailsType] = [:]
    /// Client ID Metadata Documents (a `client_id` that is an https URL, fetched); nil: off.
    public var clientIdMetadataDocuments: ClientIDMetadataConfig?

    public init() {}

    enum Key: String, ConfigKey {
        case clients, accessTokenTtlS, idTokenTtlS, refreshTokenTtlS, audience, resources, dynamicRegistration, ciba,
             authorizationDetailsTypes, clientIdMetadataDocuments
    }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        clients = o.value(.clients, default: clients)
        accessTokenTtlS = o.int(.accessTokenTtlS, default: accessTokenTtlS, atLeast: 1)
        idTokenTtlS = o.int(.idTokenTtlS, default: idTokenTtlS, atLeast: 1)
        refreshTokenTtlS = o.int(.refreshTokenTtlS, default: refreshTokenTtlS, atLeast: 1)
        audience = o.optional(.audience)
        resources = o.value(.resources, default: resources)
        dynamicRegistration = o.optional(.dynamicRegistration)
        ciba = o.optional(.ciba)
        authorizationDetailsTypes = o.value(.authorizationDetailsTypes, default: [:])
        clientIdMetadataDocuments = o.optional(.clientIdMetadataDocuments)
        for (i, r) in resources.enumerated() where resources[..<i].contains(where: { $0.contains(r.path[...]) || r.contains($0.path[...]) }) {
            o.invalid(.resources, index: i, "'\(r.path)' overlaps another resource's path")
        }
        var seen = Set<String>()
        for c in clients where !seen.insert(c.clientId).inserted { o.invalid(.clients, "duplicate clientId '\(c.clientId)'") }
    }

    public func client(_ id: String) -> OAuthClient? { clients.first { $0.clientId == id } }

    /// The resource a request path is under, if any.
    public func resource(containing path: Substring) -> OAuthResource? { resources.first { $0.contains(path) } }

    /// Every scope a client may be given: the configured clients', the resources', and what
    /// dynamic registration offers (with `openid`, `profile`, `email`).
    public var offeredScopes: Set<String> {
        var s = Set(clients.flatMap(\.scopes) + resources.flatMap(\.scopes))
        if let d = dynamicRegistration { s.formUnion(d.scopes + ["openid", "profile", "email"]) }
        if clientIdMetadataDocuments != nil { s.formUnion(["openid", "profile", "email"]) }
        return s
    }
}

/// One registered client (`oauth2.clients[]`). Public clients must use PKCE; confidential ones
/// authenticate with the secret read from `clientSecretFile` (PKCE is still required).
public struct OAuthClient: ConfigObject, Sendable, Equatable {
    public var clientId: String
    /// Compared exactly (no prefix, no wildcard).
    public var redirectUris: [String]
    public var postLogoutRedirectUris: [String] = []
    public var scopes: [String]
    public var isPublic: Bool
    public var clientSecretFile: String?
    /// Filled from `clientSecretFile` when the configuration is loaded.
    public var clientSecret: String?
    /// May ask for users' approval on the back channel (CIBA), and for whom.
    public var ciba: CIBAClientConfig?
    /// A JWK Set file: the client authenticates with `private_key_jwt` (RFC 7523) signed by one
    /// of its keys.
    public var jwksFile: String?
    /// Filled from `jwksFile` when the configuration is loaded.
    public var jwks: [UInt8]?

    public init(clientId: String, redirectUris: [String], scopes: [String], isPublic: Bool = true) {
        self.clientId = clientId
        self.redirectUris = redirectUris
        self.scopes = scopes
        self.isPublic = isPublic
    }

    enum Key: String, ConfigKey {
        case clientId, redirectUris, postLogoutRedirectUris, scopes, `public`, clientSecretFile, ciba, jwksFile
    }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        clientId = o.required(.clientId) ?? ""
        redirectUris = o.required(.redirectUris) ?? []
        postLogoutRedirectUris = o.value(.postLogoutRedirectUris, default: postLogoutRedirectUris)
        scopes = o.value(.scopes, default: ["openid"])
        isPublic = o.value(.public, default: false)
        clientSecretFile = o.optional(.clientSecretFile)
        ciba = o.optional(.ciba)
        jwksFile = o.optional(.jwksFile)
        if isPublic && jwksFile != nil { o.invalid(.jwksFile, "a public client has no keys") }
        if isPublic && ciba != nil { o.invalid(.ciba, "a public client cannot authenticate on the back channel: give it a clientSecretFile") }
        if isPublic && clientSecretFile != nil { o.invalid(.clientSecretFile, "a public client has no secret") }
        if !isPublic && clientSecretFile == nil && jwksFile == nil {
            o.invalid(.public, "set public: true (PKCE only) or give a clientSecretFile or a jwksFile")
        }
        if redirectUris.isEmpty && o.has(.redirectUris) { o.invalid(.redirectUris, "list at least one redirect URI") }
        for u in redirectUris + postLogoutRedirectUris {
            guard let c = URLComponents(string: u), c.scheme != nil, c.fragment == nil else {
                o.invalid(.redirectUris, "'\(u)' is not an absolute URI without a fragment")
                continue
            }
        }
    }
}

/// `txnTokens`: a signed Transaction Token (`Txn-Token`) on requests sent upstream.
public struct TxnTokenConfig: ConfigObject, Sendable, Equatable {
    public var enabled = false
    /// `aud`: the backend's trust domain.
    public var audience = ""
    public var ttlS = 60
    /// false: only for requests that consumed a transaction.
    public var forAll = false

    public init() {}

    enum Key: String, ConfigKey {
        case enabled, audience, ttlS, forAll
    }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        enabled = o.value(.enabled, default: enabled)
        audience = o.value(.audience, default: audience)
        ttlS = o.int(.ttlS, default: ttlS, atLeast: 1)
        if ttlS > 300 { o.invalid(.ttlS, "a transaction token is short-lived: at most 300 s") }
        forAll = o.value(.forAll, default: forAll)
        if enabled && audience.isEmpty { o.invalid(.audience, "name the backend's trust domain (the tokens' aud)") }
    }
}

/// Reads each confidential client's `clientSecretFile` (relative to the configuration's folder).
enum OAuthClientSecrets {
    static func read(_ config: inout GatewayConfig, folder: String, files: any ConfigFileReader, issues: ConfigIssues) {
        guard var oauth = config.oauth2 else { return }
        for (i, c) in oauth.clients.enumerated() {
            if let file = c.jwksFile {
                let path = ConfigLoader.absolute(file, folder: folder)
                let bytes = (try? files.read(path).get()).map { [UInt8]($0) }
                if let bytes, let keys = JWSKey.parseSet(bytes), !keys.isEmpty {
                    oauth.clients[i].jwksFile = path
                    oauth.clients[i].jwks = bytes
                } else {
                    issues.errors.append(ConfigError(path: "oauth2.clients[\(i)].jwksFile",
                                                     message: "cannot read '\(path)', or it is not a JWK Set with an EC P-256 or RSA key with a kid"))
                }
            }
            guard let file = c.clientSecretFile else { continue }
            let path = ConfigLoader.absolute(file, folder: folder)
            let secret = (try? files.read(path).get()).map { String(decoding: $0, as: UTF8.self) }?
                .trimmingCharacters(in: .whitespacesAndNewlines)
            guard let secret, secret.utf8.count >= 16 else {
                issues.errors.append(ConfigError(path: "oauth2.clients[\(i)].clientSecretFile",
                                                 message: "cannot read '\(path)', or it holds fewer than 16 characters"))
                continue
            }
            oauth.clients[i].clientSecretFile = path
            oauth.clients[i].clientSecret = secret
        }
        if let file = oauth.dynamicRegistration?.initialAccessTokenFile {
            let path = ConfigLoader.absolute(file, folder: folder)
            let token = (try? files.read(path).get()).map { String(decoding: $0, as: UTF8.self) }?
                .trimmingCharacters(in: .whitespacesAndNewlines)
            if let token, token.utf8.count >= 16 {
                oauth.dynamicRegistration?.initialAccessTokenFile = path
                oauth.dynamicRegistration?.initialAccessToken = token
            } else {
                issues.errors.append(ConfigError(path: "oauth2.dynamicRegistration.initialAccessTokenFile",
                                                 message: "cannot read '\(path)', or it holds fewer than 16 characters"))
            }
        }
        config.oauth2 = oauth
    }
}

/// `bearer`: access tokens from other OpenID providers (Keycloak, Auth0, …) accepted as subjects.
public struct BearerConfig: ConfigObject, Sendable, Equatable {
    public var issuers: [ExternalIssuer] = []
    /// How a client with an access token is asked for a transaction's approval outside
    /// `oauth2.resources` (which always use `scope`): `rfc9470` (`401` naming the journey and
    /// `txid`) or `scope` (`403 insufficient_scope` asking for `transaction:<TxId>`, as MCP
    /// clients step up).
    public var transactionChallenge = "rfc9470"

    public init() {}

    enum Key: String, ConfigKey {
        case issuers, transactionChallenge
    }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        issuers = o.value(.issuers, default: issuers)
        transactionChallenge = o.value(.transactionChallenge, default: transactionChallenge)
        if !["rfc9470", "scope"].contains(transactionChallenge) {
            o.invalid(.transactionChallenge, "'\(transactionChallenge)' is not rfc9470 or scope")
        }
        var seen = Set<String>()
        for i in issuers where !seen.insert(i.issuer).inserted { o.invalid(.issuers, "duplicate issuer '\(i.issuer)'") }
    }
}

/// One external issuer: its `iss`, where its JWK Set is (fetched on the worker loops, again when a
/// token names an unknown `kid`), the `aud` its tokens must carry for this gateway, and whose
/// subjects its tokens name (`mapTo`).
public struct ExternalIssuer: ConfigObject, Sendable, Equatable {
    public var issuer: String
    public var jwksUri: HTTPURL
    public var audience: String
    /// PEM CAs for an https JWKS URI (default: the system's).
    public var caFile: String?
    /// Whose subjects the tokens name. `.own` (the default): the issuer's own, `sub@iss`, never a
    /// local user nor another issuer's; `.localUsers`: the local user that `usernameClaim` names
    /// (the issuer is trusted to vouch for this gateway's users).
    public var mapTo = Mapping.own
    public var usernameClaim = "sub"

    public enum Mapping: String, Sendable { case own = "none", localUsers }

    public init(issuer: String, jwksUri: HTTPURL, audience: String, mapTo: Mapping = .own, usernameClaim: String = "sub") {
        self.issuer = issuer
        self.jwksUri = jwksUri
        self.audience = audience
        self.mapTo = mapTo
        self.usernameClaim = usernameClaim
    }

    enum Key: String, ConfigKey {
        case issuer, jwksUri, audience, caFile, mapTo, usernameClaim
    }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        issuer = o.required(.issuer) ?? ""
        audience = o.required(.audience) ?? ""
        caFile = o.optional(.caFile)
        if let m: String = o.optional(.mapTo) {
            if let v = Mapping(rawValue: m) { mapTo = v } else { o.invalid(.mapTo, "'\(m)' is not none or localUsers") }
        }
        if let c: String = o.optional(.usernameClaim) {
            if c.isEmpty { o.invalid(.usernameClaim, "name the claim that holds the local username") } else { usernameClaim = c }
            if mapTo != .localUsers { o.invalid(.usernameClaim, "only with mapTo: localUsers") }
        }
        jwksUri = HTTPURL(parsing: "http://127.0.0.1:1")!
        if let s: String = o.required(.jwksUri) {
            if let u = HTTPURL(parsing: s) { jwksUri = u } else { o.invalid(.jwksUri, "'\(s)' is not an http:// or https:// URL") }
        }
        if audience.isEmpty && o.has(.audience) { o.invalid(.audience, "name the audience this gateway accepts") }
    }
}

extension ExternalIssuer {
    /// The subject a verified token of this issuer names: a subject is (issuer, subject), so by
    /// default it is `sub@iss` (`qualified`), with the token's string claims as attributes named
    /// `iss#claim` (a policy names them so: `"https://idp.example#role=admin"`); it never equals
    /// a local user or another issuer's subject, nor gets their attributes. With `mapTo:
    /// localUsers`, the local user `usernameClaim` names, with that user's attributes; nil when
    /// there is no such user.
    public func subject(claims: [String: JSONValue], localUsers: [String: UserRecord]) -> (uid: String, attributes: [String: String])? {
        switch mapTo {
        case .localUsers:
            guard let name = claims[usernameClaim]?.stringValue, let user = localUsers[name] else { return nil }
            return (name, user.attributes)
        case .own:
            guard let sub = claims["sub"]?.stringValue, !sub.isEmpty else { return nil }
            let uid = Self.qualified(sub: sub, issuer: issuer)
            guard localUsers[uid] == nil else { return nil }  // a local user named like one: neither is the other
            var attributes: [String: String] = [:]
            for (name, value) in claims { if let s = value.stringValue { attributes[issuer + "#" + name] = s } }
            return (uid, attributes)
        }
    }

    /// An external subject's name: `sub@iss`.
    public static func qualified(sub: String, issuer: String) -> String { sub + "@" + issuer }
}
