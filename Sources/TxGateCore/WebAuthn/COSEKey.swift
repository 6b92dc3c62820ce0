import TxGateCrypto

/// The COSE signature algorithms a WebAuthn credential may use here (RFC 9053, IANA "COSE
/// Algorithms"): the three every browser offers by default.
public enum COSEAlgorithm: Int, Sendable, CaseIterable, CustomStringConvertible {
    /// ECDSA on P-256 with SHA-256; signatures are DER `Ecdsa-Sig-Value` in WebAuthn.
    case es256 = -7
    /// EdDSA; here only on Ed25519 (64-byte signatures).
    case eddsa = -8
    /// RSASSA-PKCS1-v1_5 with SHA-256 (RFC 8812), keys of 2048 bits or more.
    case rs256 = -257

    public var description: String {
        switch self {
        case .es256: return "ES256 (-7)"
        case .eddsa: return "EdDSA (-8)"
        case .rs256: return "RS256 (-257)"
        }
    }
}

/// Why a COSE_Key (RFC 9052 §7) is not one this verifier can use.
public enum COSEKeyError: Error, Equatable, Sendable, CustomStringConvertible {
    case notAMap(found: String)
    /// A required parameter (label and name, `1 (kty)`) is missing.
    case missing(label: Int, name: String)
    /// A parameter has the wrong CBOR type (or the wrong length, for coordinates).
    case invalidParameter(label: Int, name: String, reason: String)
    case unsupportedKeyType(Int)
    case unsupportedAlgorithm(Int)
    case unsupportedCurve(Int)
    /// `alg` names an algorithm this key type and curve cannot do.
    case algorithmDoesNotMatchKey(algorithm: COSEAlgorithm, keyType: Int)
    /// A private parameter (`d`, ...) is present: a public key was expected.
    case privateKeyIncluded(label: Int)
    /// OpenSSL does not take the key (a point off the curve, an RSA modulus under 2048 bits).
    case rejectedByOpenSSL(String)

    public var description: String {
        switch self {
        case .notAMap(let found): return "COSE key: \(found), not a map"
        case .missing(let label, let name): return "COSE key: parameter \(label) (\(name)) missing"
        case .invalidParameter(let label, let name, let reason): return "COSE key: parameter \(label) (\(name)) \(reason)"
        case .unsupportedKeyType(let kty): return "COSE key: key type \(kty) not supported (2 EC2, 3 RSA, 1 OKP are)"
        case .unsupportedAlgorithm(let alg): return "COSE key: algorithm \(alg) not supported (-7 ES256, -8 EdDSA, -257 RS256 are)"
        case .unsupportedCurve(let crv): return "COSE key: curve \(crv) not supported (1 P-256 for EC2, 6 Ed25519 for OKP are)"
        case .algorithmDoesNotMatchKey(let alg, let kty): return "COSE key: algorithm \(alg) does not go with key type \(kty)"
        case .privateKeyIncluded(let label): return "COSE key: private parameter \(label) present"
        case .rejectedByOpenSSL(let what): return "COSE key: \(what)"
        }
    }
}

/// A credential public key from COSE_Key (RFC 9052 §7, RFC 9053 §2 and §7): EC2 on P-256 with
/// ES256, OKP Ed25519 with EdDSA, or RSA with RS256. `alg` is required (WebAuthn §6.5.1), must go
/// with the key type and curve, and private parameters are refused. Other parameters (kid,
/// key_ops, ...) are ignored. The encoded bytes are kept as the authenticator wrote them: they
/// are what a credential record stores.
public struct COSEKey: Sendable {
    public let algorithm: COSEAlgorithm
    /// The key's CBOR as received.
    public let encoded: [UInt8]
    private let verifier: Verifier

    private enum Verifier: Sendable {
        case ec(ECPublicKey)
        case rsa(RSAPublicKey)
        case ed25519(Ed25519PublicKey)
    }

    // COSE labels (RFC 9052 §7.1, RFC 9053 §7.1-7.2, RFC 8230 §4).
    static let kty = 1, alg = 3
    static let crv = -1, x = -2, y = -3, d = -4
    static let rsaN = -1, rsaE = -2, rsaD = -3

    /// Parses a COSE key encoded on its own (a stored credential record's key).
    public init(encoded: [UInt8]) throws(WebAuthn.Refusal) {
        let item: CBOR
        do { item = try CBORDecoder.decode(encoded) } catch { throw .malformedCBOR("credential public key", error) }
        do { try self.init(item, encoded: encoded) } catch { throw .unsupportedCredentialKey(error) }
    }

    /// A key from its decoded item and the bytes it was decoded from.
    public init(_ item: CBOR, encoded: [UInt8]) throws(COSEKeyError) {
        guard let map = item.mapValue else { throw .notAMap(found: item.kindName) }
        let kty = try Self.int(map, Self.kty, "kty")
        let algNumber = try Self.int(map, Self.alg, "alg")
        guard let algorithm = COSEAlgorithm(rawValue: algNumber) else { throw .unsupportedAlgorithm(algNumber) }
        switch kty {
        case 2: // EC2
            if map[int: Self.d] != nil { throw .privateKeyIncluded(label: Self.d) }
            let crv = try Self.int(map, Self.crv, "crv")
            guard crv == 1 else { throw .unsupportedCurve(crv) }
            guard algorithm == .es256 else { throw .algorithmDoesNotMatchKey(algorithm: algorithm, keyType: kty) }
            let x = try Self.bytes(map, Self.x, "x", length: 32)
            let y = try Self.bytes(map, Self.y, "y", length: 32)
            guard let key = ECPublicKey(x: x, y: y) else { throw .rejectedByOpenSSL("not a point on P-256") }
            verifier = .ec(key)
        case 1: // OKP
            if map[int: Self.d] != nil { throw .privateKeyIncluded(label: Self.d) }
            let crv = try Self.int(map, Self.crv, "crv")
            guard crv == 6 else { throw .unsupportedCurve(crv) }
            guard algorithm == .eddsa else { throw .algorithmDoesNotMatchKey(algorithm: algorithm, keyType: kty) }
            let x = try Self.bytes(map, Self.x, "x", length: 32)
            guard let key = Ed25519PublicKey(raw: x) else { throw .rejectedByOpenSSL("not an Ed25519 public key") }
            verifier = .ed25519(key)
        case 3: // RSA
            if map[int: Self.rsaD] != nil { throw .privateKeyIncluded(label: Self.rsaD) }
            guard algorithm == .rs256 else { throw .algorithmDoesNotMatchKey(algorithm: algorithm, keyType: kty) }
            let n = try Self.bytes(map, Self.rsaN, "n", length: nil)
            let e = try Self.bytes(map, Self.rsaE, "e", length: nil)
            guard let key = RSAPublicKey(n: n, e: e) else {
                throw .rejectedByOpenSSL("not an RSA public key of 2048 to 8192 bits with an exponent of at most 8 bytes")
            }
            verifier = .rsa(key)
        default:
            throw .unsupportedKeyType(kty)
        }
        self.algorithm = algorithm
        self.encoded = encoded
    }

    /// Checks a signature in WebAuthn's form for the algorithm (DER for ES256, 64 bytes for
    /// EdDSA, the modulus' length for RS256) over `data`.
    public func verify(signature: [UInt8], data: [UInt8]) -> Bool {
        switch verifier {
        case .ec(let key): return key.verify(derSignature: signature, data: data)
        case .rsa(let key): return key.verify(signature: signature, data: data)
        case .ed25519(let key): return key.verify(signature: signature, data: data)
        }
    }

    private static func int(_ map: CBORMap, _ label: Int, _ name: String) throws(COSEKeyError) -> Int {
        guard let value = map[int: label] else { throw .missing(label: label, name: name) }
        guard let n = value.intValue else {
            throw .invalidParameter(label: label, name: name, reason: "is \(value.kindName), not a small integer")
        }
        return n
    }

    private static func bytes(_ map: CBORMap, _ label: Int, _ name: String, length: Int?) throws(COSEKeyError) -> [UInt8] {
        guard let value = map[int: label] else { throw .missing(label: label, name: name) }
        guard let b = value.bytesValue else {
            throw .invalidParameter(label: label, name: name, reason: "is \(value.kindName), not a byte string")
        }
        if let length, b.count != length {
            throw .invalidParameter(label: label, name: name, reason: "has \(b.count) bytes, not \(length)")
        }
        if b.isEmpty { throw .invalidParameter(label: label, name: name, reason: "is empty") }
        return b
    }
}
