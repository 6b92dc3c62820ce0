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
    private static let encodedHeaderBytes = Array(encodedHeader.utf8)

    /// Signs `claimsJSON` (the bytes are used as given: they should be a JSON object with a numeric `exp`).
    /// The token is written once, in place: the signing input, then the MAC of it (an authId is
    /// signed at every journey step; joining its parts as strings copied it four times).
    public static func sign(claimsJSON: [UInt8], key: [UInt8]) -> String {
        let input = encodedHeaderBytes.count + 1 + Base64URL.encodedCount(claimsJSON.count)
        let total = input + 1 + signatureCount
        return String(unsafeUninitializedCapacity: total) { out in
            _ = out.initialize(from: encodedHeaderBytes)
            out[encodedHeaderBytes.count] = UInt8(ascii: ".")
            _ = claimsJSON.withUnsafeBufferPointer {
                Base64URL.encode($0, into: UnsafeMutableBufferPointer(rebasing: out[(encodedHeaderBytes.count + 1)...]))
            }
            out[input] = UInt8(ascii: ".")
            writeSignature(of: UnsafeBufferPointer(rebasing: out[..<input]), key: key,
                           into: UnsafeMutableBufferPointer(rebasing: out[(input + 1)...]))
            return total
        }
    }

    /// The length of the signature part: an HMAC-SHA256 in unpadded base64url.
    private static let signatureCount = Base64URL.encodedCount(32)

    /// Writes the signature part of `input` (its HMAC-SHA256 in base64url, `signatureCount`
    /// bytes) to the start of `out`; the MAC itself only ever lies on the stack.
    private static func writeSignature(of input: UnsafeBufferPointer<UInt8>, key: [UInt8], into out: UnsafeMutableBufferPointer<UInt8>) {
        withUnsafeTemporaryAllocation(byteCount: 32, alignment: 8) { mac in
            Crypto.hmac(.sha256, key: key, data: UnsafeRawBufferPointer(input), into: mac)
            _ = Base64URL.encode(UnsafeBufferPointer(mac.bindMemory(to: UInt8.self)), into: out)
        }
    }

    /// Checks the structure, that the header's `alg` is HS256, the signature (in constant time), and that
    /// the claims' `exp` (seconds since the epoch) is greater than `now`; returns the claims JSON bytes.
    /// The signature is checked before the claims are parsed.
    public static func verify(_ token: String, key: [UInt8], now: Int) throws(JWTError) -> [UInt8] {
        try verifiedClaims(token, key: key, now: now).json
    }

    /// `verify(_:key:now:)`, returning the claims parsed as well as their bytes (a journey step's
    /// authId is verified at every step: parsing its claims once is enough).
    public static func verifiedClaims(_ token: String, key: [UInt8], now: Int) throws(JWTError) -> (json: [UInt8], members: [String: JSONValue]) {
        // On the token's bytes in place: an authId is kilobytes long and verified at every step.
        var token = token
        let checked = token.withUTF8 { b -> Result<[UInt8], JWTError> in
            // Three non-empty parts; JWS uses base64url without padding (RFC 7515 §2): refusing
            // '=' keeps one spelling per token.
            var first = -1, second = -1
            for i in 0..<b.count {
                if b[i] == UInt8(ascii: ".") {
                    if first < 0 { first = i } else if second < 0 { second = i } else { return .failure(.malformed) }
                } else if b[i] == UInt8(ascii: "=") {
                    return .failure(.malformed)
                }
            }
            guard first > 0, second > first + 1, second < b.count - 1 else { return .failure(.malformed) }
            let header = UnsafeBufferPointer(rebasing: b[..<first])
            guard header.elementsEqual(encodedHeaderBytes) || acceptableHeader(header) else { return .failure(.malformed) }
            let signature = UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: b[(second + 1)...]))
            // The expected MAC, encoded, against the signature as sent: the encoding is canonical
            // (no padding, no stray bits), so equal text is an equal MAC. Neither is copied.
            let signed = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: signatureCount) { expected in
                writeSignature(of: UnsafeBufferPointer(rebasing: b[..<second]), key: key, into: expected)
                return Crypto.constantTimeEquals(signature, UnsafeRawBufferPointer(expected))
            }
            guard signed else {
                // A signature that is not even base64url is malformed; any other, a bad one.
                return .failure(Base64URL.decode(signature.bindMemory(to: UInt8.self)) == nil ? .malformed : .badSignature)
            }
            guard let claims = Base64URL.decode(UnsafeBufferPointer(rebasing: b[(first + 1)..<second])) else { return .failure(.malformed) }
            return .success(claims)
        }
        let claims = try checked.get()
        guard case .object(let members)? = JSONValue.parse(claims),
              case .number(let exp)? = members["exp"]
        else { throw .malformed }
        guard exp.doubleValue > Double(now) else { throw .expired }
        return (claims, members)
    }

    /// A header other than the one `sign` writes: a JSON object with `"alg":"HS256"` and no `crit`.
    private static func acceptableHeader(_ encoded: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let headerBytes = Base64URL.decode(encoded),
              case .object(let header)? = JSONValue.parse(headerBytes) else { return false }
        return header["alg"] == .string("HS256") && header["crit"] == nil
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
