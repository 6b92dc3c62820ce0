import TxGateCrypto

/// Why an ES256 token is refused.
public enum JWSError: Error, Equatable, Sendable {
    /// Not three unpadded base64url parts, a header that is not `alg: ES256` with a `kid` (no
    /// `crit`), another `typ` than expected, or claims that are not a JSON object.
    case malformed(String)
    /// No published key has this `kid`.
    case unknownKey(String)
    case badSignature
    /// `exp` missing or not after now.
    case expired
    /// The claims do not fit: issuer, audience, not yet valid.
    case invalidClaims(String)

    public var description: String {
        switch self {
        case .malformed(let why): return "malformed token: \(why)"
        case .unknownKey(let kid): return "no published key has kid '\(kid)'"
        case .badSignature: return "the signature does not verify"
        case .expired: return "the token has expired"
        case .invalidClaims(let why): return why
        }
    }
}

/// A P-256 key as a JWK (RFC 7517), named by its RFC 7638 thumbprint.
public struct PublishedKey: Sendable {
    public let kid: String
    public let key: ECPublicKey

    public init(_ key: ECPublicKey) {
        self.key = key
        kid = Self.thumbprint(key)
    }

    public init(kid: String, key: ECPublicKey) {
        self.kid = kid
        self.key = key
    }

    /// RFC 7638: SHA-256 of the required members in lexicographic order, base64url.
    public static func thumbprint(_ key: ECPublicKey) -> String {
        let json = #"{"crv":"P-256","kty":"EC","x":"\#(Base64URL.encode(key.x))","y":"\#(Base64URL.encode(key.y))"}"#
        return Base64URL.encode(Crypto.sha256(Array(json.utf8)))
    }

    public var jwk: JSONValue {
        .object(["kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": .string(kid),
                 "x": .string(Base64URL.encode(key.x)), "y": .string(Base64URL.encode(key.y))])
    }

    /// `{"keys":[...]}`
    public static func jwkSet(_ keys: [PublishedKey]) -> String {
        JSONValue.object(["keys": .array(keys.map(\.jwk))]).canonical
    }

    /// The P-256 signing keys of a JWK Set (others are skipped); nil if it is not a JWK Set.
    public static func parseSet(_ bytes: [UInt8]) -> [PublishedKey]? {
        guard case .array(let keys)? = JSONValue.parse(bytes)?["keys"] else { return nil }
        return keys.compactMap { k in
            guard k["kty"]?.stringValue == "EC", k["crv"]?.stringValue == "P-256",
                  k["use"].map({ $0.stringValue == "sig" }) ?? true,
                  let x = k["x"]?.stringValue.flatMap(Base64URL.decode), let y = k["y"]?.stringValue.flatMap(Base64URL.decode),
                  let key = ECPublicKey(x: x, y: y) else { return nil }
            return PublishedKey(kid: k["kid"]?.stringValue ?? thumbprint(key), key: key)
        }
    }
}

/// ES256 JSON Web Tokens in compact serialisation (RFC 7515, RFC 7519): the gateway's access,
/// ID and transaction tokens.
public enum JWS {
    /// Signs `claims` (encoded canonically) with a header naming `typ` and the key's `kid`.
    public static func sign(_ claims: [String: JSONValue], typ: String, kid: String, key: ECSigningKey) -> String {
        let header = JSONValue.object(["alg": "ES256", "kid": .string(kid), "typ": .string(typ)]).canonical
        let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(JSONValue.object(claims).canonicalBytes)
        return input + "." + Base64URL.encode(key.sign(Array(input.utf8)))
    }

    /// A token that verified: its header and claims.
    public struct Verified: Sendable {
        public var header: [String: JSONValue]
        public var claims: [String: JSONValue]
        public func string(_ name: String) -> String? { claims[name]?.stringValue }
        public func int(_ name: String) -> Int? { claims[name]?.intValue }
    }

    /// Checks the structure, that `alg` is ES256 (nothing else, never `none`), the `typ` when
    /// `typ` is given (case-insensitively, with or without `application/`), the signature with the
    /// key `keys` names by `kid`, and that `exp` is after `now`. The signature is checked before
    /// the claims are read.
    public static func verify(_ token: String, typ: String?, now: Int, keys: (String) -> ECPublicKey?) throws(JWSError) -> Verified {
        try verify(token, typ: typ, now: now, key: { kid in keys(kid).map(JWSKey.es256) })
    }

    /// The same for keys of several kinds: the header's `alg` must be the key's (ES256 for an EC
    /// key, RS256 for an RSA key), so that no token can choose how it is checked.
    public static func verify(_ token: String, typ: String?, now: Int, key: (String) -> JWSKey?) throws(JWSError) -> Verified {
        let parts = token.split(byte: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3, !token.utf8.contains(UInt8(ascii: "=")), !parts.contains(where: \.isEmpty),
              let headerBytes = Base64URL.decode(String(parts[0])),
              case .object(let header)? = JSONValue.parse(headerBytes),
              let signature = Base64URL.decode(String(parts[2]))
        else { throw .malformed("not a JWS in compact form") }
        guard let alg = header["alg"]?.stringValue, alg == "ES256" || alg == "RS256", header["crit"] == nil else {
            throw .malformed("alg must be ES256")
        }
        if let typ {
            let given = header["typ"]?.stringValue?.lowercased() ?? ""
            guard given == typ || given == "application/" + typ else { throw .malformed("typ must be \(typ)") }
        }
        guard let kid = header["kid"]?.stringValue else { throw .malformed("no kid") }
        guard let k = key(kid) else { throw .unknownKey(kid) }
        guard k.algorithm == alg else { throw .malformed("alg \(alg) does not match the key") }
        let input = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard k.verify(signature: signature, data: input) else { throw .badSignature }
        guard let claimBytes = Base64URL.decode(String(parts[1])), case .object(let claims)? = JSONValue.parse(claimBytes) else {
            throw .malformed("the claims are not a JSON object")
        }
        guard let exp = claims["exp"]?.numberValue?.doubleValue, exp > Double(now) else { throw .expired }
        if let nbf = claims["nbf"]?.numberValue?.doubleValue, nbf > Double(now) { throw .invalidClaims("not valid yet (nbf)") }
        return Verified(header: header, claims: claims)
    }

    /// The claims without checking anything (to read `kid`/`iss` and pick the keys to verify with).
    public static func unverifiedParts(_ token: String) -> (header: [String: JSONValue], claims: [String: JSONValue])? {
        let parts = token.split(byte: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3, let h = Base64URL.decode(String(parts[0])), case .object(let header)? = JSONValue.parse(h),
              let c = Base64URL.decode(String(parts[1])), case .object(let claims)? = JSONValue.parse(c) else { return nil }
        return (header, claims)
    }
}

/// A key a JWS can be checked with, and the one algorithm it checks.
public enum JWSKey: Sendable {
    case es256(ECPublicKey)
    case rs256(RSAPublicKey)

    public var algorithm: String {
        switch self {
        case .es256: return "ES256"
        case .rs256: return "RS256"
        }
    }

    public func verify(signature: [UInt8], data: [UInt8]) -> Bool {
        switch self {
        case .es256(let k): return k.verify(signature: signature, data: data)
        case .rs256(let k): return k.verify(signature: signature, data: data)
        }
    }

    /// A P-256 coordinate as its 32 bytes. RFC 7518 §6.2.1.2 asks for the full length, but
    /// some writers drop leading zero bytes (authlib 1.x does, for one key in 128): the value
    /// is the same, so it is padded back rather than the client's key refused.
    static func coordinate(_ bytes: [UInt8]) -> [UInt8]? {
        guard (1...32).contains(bytes.count) else { return nil }
        return [UInt8](repeating: 0, count: 32 - bytes.count) + bytes
    }

    /// The signing keys of a JWK Set (EC P-256 and RSA, by `kid`); nil if it is not a JWK Set.
    public static func parseSet(_ bytes: [UInt8]) -> [String: JWSKey]? {
        guard case .array(let keys)? = JSONValue.parse(bytes)?["keys"] else { return nil }
        var out: [String: JWSKey] = [:]
        for k in keys where k["use"].map({ $0.stringValue == "sig" }) ?? true {
            guard let kid = k["kid"]?.stringValue else { continue }
            func part(_ name: String) -> [UInt8]? { k[name]?.stringValue.flatMap(Base64URL.decode) }
            switch k["kty"]?.stringValue {
            case "EC" where k["crv"]?.stringValue == "P-256":
                if let x = part("x").flatMap(Self.coordinate), let y = part("y").flatMap(Self.coordinate),
                   let key = ECPublicKey(x: x, y: y) { out[kid] = .es256(key) }
            case "RSA":
                if let n = part("n"), let e = part("e"), let key = RSAPublicKey(n: n, e: e) { out[kid] = .rs256(key) }
            default:
                continue
            }
        }
        return out
    }
}
