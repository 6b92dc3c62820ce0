import Foundation
import TxGateCrypto

public enum JWTError: Error, Equatable, Sendable {
    /// Not three unpadded base64url parts, a header that is not a JSON object with `"alg":"HS256"` (this includes
    /// `"none"` and every other algorithm) or has a `crit` member, or claims that are not a JSON object
    /// with a numeric `exp`.
    case malformed
    /// The HMAC-SHA256 signature does not match.
    case badSignature
    /// `exp` is not after `now`.
    case expired
}

/// HS256 JSON Web Tokens (RFC 7519) in JWS compact serialisation (RFC 7515).
/// HS256 keys should be at least 32 random bytes (RFC 7518 §3.2).
public enum JWT {
    /// `{"typ":"JWT","alg":"HS256"}`
    public static let header: [UInt8] = Array(#"{"typ":"JWT","alg":"HS256"}"#.utf8)
    private static let encodedHeader = Base64URL.encode(header)

    /// Signs `claimsJSON` (the bytes are used as given: they should be a JSON object with a numeric `exp`).
    public static func sign(claimsJSON: [UInt8], key: [UInt8]) -> String {
        let signingInput = encodedHeader + "." + Base64URL.encode(claimsJSON)
        let signature = Crypto.hmacSHA256(key: key, data: Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// Checks the structure, that the header's `alg` is HS256, the signature (in constant time), and that
    /// the claims' `exp` (seconds since the epoch) is greater than `now`; returns the claims JSON bytes.
    /// The signature is checked before the claims are parsed.
    public static func verify(_ token: String, key: [UInt8], now: Int) throws(JWTError) -> [UInt8] {
        let parts = token.split(byte: UInt8(ascii: "."), omittingEmptySubsequences: false)
        // JWS uses base64url without padding (RFC 7515 §2); refusing '=' keeps one spelling per token.
        guard parts.count == 3, !token.utf8.contains(UInt8(ascii: "=")), !parts[0].isEmpty, !parts[1].isEmpty, !parts[2].isEmpty,
              let headerBytes = Base64URL.decode(String(parts[0])),
              case .object(let header)? = JSONValue.parse(headerBytes),
              header["alg"] == .string("HS256"), header["crit"] == nil,
              let signature = Base64URL.decode(String(parts[2]))
        else { throw .malformed }

        let signingInput = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        let expected = Crypto.hmacSHA256(key: key, data: signingInput)
        guard Crypto.constantTimeEquals(signature, expected) else { throw .badSignature }

        guard let claims = Base64URL.decode(String(parts[1])),
              case .object(let members)? = JSONValue.parse(claims),
              case .number(let exp)? = members["exp"]
        else { throw .malformed }
        guard exp.doubleValue > Double(now) else { throw .expired }
        return claims
    }

    /// Encodes `claims` with JSONEncoder (sorted keys) and signs them. Throws only if the encoding fails
    /// (e.g. a non-finite floating-point value).
    public static func sign<T: Encodable>(_ claims: T, key: [UInt8]) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return sign(claimsJSON: Array(try encoder.encode(claims)), key: key)
    }

    /// `verify(_:key:now:)`, then decodes the claims as `T`; a decoding failure is `.malformed`.
    public static func verify<T: Decodable>(_ token: String, key: [UInt8], now: Int,
                                            as type: T.Type) throws(JWTError) -> T {
        let claims = try verify(token, key: key, now: now)
        guard let value = try? JSONDecoder().decode(T.self, from: Data(claims)) else { throw .malformed }
        return value
    }
}
