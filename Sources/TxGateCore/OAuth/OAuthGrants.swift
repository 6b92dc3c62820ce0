import TxGateCrypto

/// An RFC 6749 error (§4.1.2.1, §5.2): `{"error": ..., "error_description": ...}`.
public struct OAuthError: Error, Equatable, Sendable {
    public var code: String
    public var description: String
    public var status: Int

    public init(_ code: String, _ description: String, status: Int = 400) {
        self.code = code
        self.description = description
        self.status = status
    }

    public var json: String {
        #"{"error":"\#(JSONText.escape(code))","error_description":"\#(JSONText.escape(description))"}"#
    }

    public static func invalidRequest(_ d: String) -> OAuthError { OAuthError("invalid_request", d) }
    public static func invalidGrant(_ d: String) -> OAuthError { OAuthError("invalid_grant", d) }
    public static func invalidClient(_ d: String) -> OAuthError { OAuthError("invalid_client", d, status: 401) }
}

/// Proof Key for Code Exchange (RFC 7636), S256 only.
public enum PKCE {
    /// 43 to 128 characters of `[A-Za-z0-9-._~]` (RFC 7636 §4.1); a challenge has the same form.
    public static func isWellFormed(_ s: String) -> Bool {
        (43...128).contains(s.utf8.count) && s.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2D || c == 0x2E || c == 0x5F || c == 0x7E
        }
    }

    /// BASE64URL(SHA256(ASCII(verifier))).
    public static func s256(_ verifier: String) -> String { Base64URL.encode(Crypto.sha256(Array(verifier.utf8))) }

    public static func verify(verifier: String, challenge: String) -> Bool {
        isWellFormed(verifier) && Crypto.constantTimeEquals(Array(s256(verifier).utf8), Array(challenge.utf8))
    }
}

/// What an authorization code stands for, as the store keeps it for 60 s under the code's hash.
public struct AuthorizationGrant: Equatable, Sendable {
    public var clientId: String
    public var redirectUri: String
    public var codeChallenge: String
    public var uid: String
    public var realm: String
    public var scope: [String]
    public var nonce: String?
    /// The journey that authenticated the user (the tokens' `acr`).
    public var acr: String
    public var authTime: Int
    /// The TxId the user approved on the way (the access token's `txn`).
    public var txn: String?
    /// The store key of the SSO session it was issued in (a hash, not the session token): ending
    /// that session revokes the refresh family.
    public var session: String?
    /// RFC 8707: the resource the tokens are for (their `aud`); nil: the gateway's audience.
    public var resource: String?
    /// RFC 9396: the `authorization_details` approved (the token response and the access token say them).
    public var authorizationDetails: JSONValue?

    public static let ttlS = 60

    public init(clientId: String, redirectUri: String, codeChallenge: String, uid: String, realm: String, scope: [String],
                nonce: String?, acr: String, authTime: Int, txn: String?) {
        (self.clientId, self.redirectUri, self.codeChallenge, self.uid, self.realm) = (clientId, redirectUri, codeChallenge, uid, realm)
        (self.scope, self.nonce, self.acr, self.authTime, self.txn) = (scope, nonce, acr, authTime, txn)
    }

    public static func key(_ code: String) -> String { "oauth2:code:" + Crypto.hex(Crypto.sha256(Array(code.utf8))) }

    public var encoded: [UInt8] {
        var o: [String: JSONValue] = [
            "clientId": .string(clientId), "redirectUri": .string(redirectUri), "codeChallenge": .string(codeChallenge),
            "uid": .string(uid), "realm": .string(realm), "scope": .array(scope.map { .string($0) }), "acr": .string(acr),
            "authTime": .number(authTime),
        ]
        if let nonce { o["nonce"] = .string(nonce) }
        if let txn { o["txn"] = .string(txn) }
        if let session { o["session"] = .string(session) }
        if let resource { o["resource"] = .string(resource) }
        if let authorizationDetails { o["authorizationDetails"] = authorizationDetails }
        return JSONValue.object(o).canonicalBytes
    }

    public static func decode(_ bytes: [UInt8]) -> AuthorizationGrant? {
        guard case .object(let o)? = JSONValue.parse(bytes), let clientId = o["clientId"]?.stringValue,
              let redirectUri = o["redirectUri"]?.stringValue, let challenge = o["codeChallenge"]?.stringValue,
              let uid = o["uid"]?.stringValue, let realm = o["realm"]?.stringValue, let scope = o["scope"]?.arrayValue,
              let acr = o["acr"]?.stringValue, let authTime = o["authTime"]?.intValue else { return nil }
        var g = AuthorizationGrant(clientId: clientId, redirectUri: redirectUri, codeChallenge: challenge, uid: uid, realm: realm,
                                   scope: scope.compactMap(\.stringValue), nonce: o["nonce"]?.stringValue, acr: acr,
                                   authTime: authTime, txn: o["txn"]?.stringValue)
        g.session = o["session"]?.stringValue
        g.resource = o["resource"]?.stringValue
        g.authorizationDetails = o["authorizationDetails"]
        return g
    }

    /// Why the token request may not redeem this (already taken, so single-use) code, or nil.
    public func redeemRefusal(clientId: String, redirectUri: String?, verifier: String?, resource: String? = nil) -> OAuthError? {
        guard clientId == self.clientId else { return .invalidGrant("the code was issued to another client") }
        if let resource, resource != self.resource {
            return OAuthError("invalid_target", "resource is not the one the authorization request named")
        }
        guard redirectUri == self.redirectUri else { return .invalidGrant("redirect_uri differs from the authorization request's") }
        guard let verifier else { return .invalidRequest("code_verifier is required (PKCE)") }
        guard PKCE.verify(verifier: verifier, challenge: codeChallenge) else {
            return .invalidGrant("code_verifier does not match the code_challenge")
        }
        return nil
    }
}

/// A refresh token's record. Rotation marks it `used` and issues a successor in the same
/// family; presenting a used one again is reuse (RFC 9700 §4.14.2): the whole family is revoked.
public struct RefreshRecord: Equatable, Sendable {
    public var family: String
    public var clientId: String
    public var uid: String
    public var realm: String
    public var scope: [String]
    public var acr: String
    public var authTime: Int
    public var used: Bool
    /// Unix seconds.
    public var expires: Int
    /// The grant's RFC 8707 resource, which the successors' access tokens keep.
    public var resource: String?
    /// The grant's RFC 9396 `authorization_details`, which the successors' access tokens keep
    /// (not its `txn`: the approval opened its one request).
    public var authorizationDetails: JSONValue?

    public init(family: String, clientId: String, uid: String, realm: String, scope: [String], acr: String, authTime: Int,
                used: Bool = false, expires: Int, resource: String? = nil) {
        (self.family, self.clientId, self.uid, self.realm, self.scope) = (family, clientId, uid, realm, scope)
        (self.acr, self.authTime, self.used, self.expires, self.resource) = (acr, authTime, used, expires, resource)
    }

    public static func key(_ token: String) -> String { "oauth2:rt:" + Crypto.hex(Crypto.sha256(Array(token.utf8))) }
    /// Present while the family may still be refreshed.
    public static func familyKey(_ family: String) -> String { "oauth2:family:" + family }

    public var encoded: [UInt8] {
        var o: [String: JSONValue] = [
            "family": .string(family), "clientId": .string(clientId), "uid": .string(uid), "realm": .string(realm),
            "scope": .array(scope.map { .string($0) }), "acr": .string(acr), "authTime": .number(authTime),
            "used": .bool(used), "expires": .number(expires),
        ]
        if let resource { o["resource"] = .string(resource) }
        if let authorizationDetails { o["authorizationDetails"] = authorizationDetails }
        return JSONValue.object(o).canonicalBytes
    }

    public static func decode(_ bytes: [UInt8]) -> RefreshRecord? {
        guard case .object(let o)? = JSONValue.parse(bytes), let family = o["family"]?.stringValue,
              let clientId = o["clientId"]?.stringValue, let uid = o["uid"]?.stringValue, let realm = o["realm"]?.stringValue,
              let scope = o["scope"]?.arrayValue, let acr = o["acr"]?.stringValue, let authTime = o["authTime"]?.intValue,
              case .bool(let used)? = o["used"], let expires = o["expires"]?.intValue else { return nil }
        var r = RefreshRecord(family: family, clientId: clientId, uid: uid, realm: realm, scope: scope.compactMap(\.stringValue),
                              acr: acr, authTime: authTime, used: used, expires: expires, resource: o["resource"]?.stringValue)
        r.authorizationDetails = o["authorizationDetails"]
        return r
    }

    /// What a refresh request with this record does.
    public enum Plan: Equatable, Sendable {
        /// Mark this one used (a compare-and-swap over what was read) and issue a successor.
        case rotate
        /// A used token came back: revoke the family.
        case revokeFamily(String, OAuthError)
        case refuse(OAuthError)
    }

    public static func plan(_ record: RefreshRecord?, clientId: String, now: Int) -> Plan {
        guard let record, record.expires > now else { return .refuse(.invalidGrant("unknown, expired or revoked refresh token")) }
        guard record.clientId == clientId else { return .refuse(.invalidGrant("the refresh token was issued to another client")) }
        if record.used {
            return .revokeFamily(record.family, .invalidGrant("the refresh token was already used; its family is revoked"))
        }
        return .rotate
    }

    /// The successor after a rotation: same family and grant, new expiry.
    public func successor(now: Int, ttlS: Int) -> RefreshRecord {
        var next = self
        next.used = false
        next.expires = now + ttlS
        return next
    }
}
