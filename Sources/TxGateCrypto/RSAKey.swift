import COpenSSL

/// An RSA public key from its JWK parts (`n`, `e`, big-endian), for RS256 (RSASSA-PKCS1-v1_5
/// with SHA-256, RFC 7518 §3.3): the algorithm most external OpenID providers sign with.
/// OpenSSL's EVP does the arithmetic; this only writes the PKCS #1 DER that names the key.
public final class RSAPublicKey: @unchecked Sendable {
    // @unchecked Sendable: the EVP_PKEY is never changed after init (verification only).
    let pkey: OpaquePointer

    /// nil unless the modulus has at least 2048 bits and OpenSSL accepts the key.
    public init?(n: [UInt8], e: [UInt8]) {
        let modulus = Array(n.drop { $0 == 0 })
        guard modulus.count >= 256, modulus.count <= 1024, !e.isEmpty, e.count <= 8 else { return nil }
        let der = Self.sequence(Self.integer(modulus) + Self.integer(e))
        let key = der.withUnsafeBufferPointer { b -> OpaquePointer? in
            var p = b.baseAddress
            return d2i_PublicKey(EVP_PKEY_RSA, nil, &p, b.count)
        }
        guard let key else { ERR_clear_error(); return nil }
        pkey = key
    }

    deinit { EVP_PKEY_free(pkey) }

    /// Checks an RS256 signature over `data`.
    public func verify(signature: [UInt8], data: [UInt8]) -> Bool {
        guard !signature.isEmpty, let md = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(md) }
        guard EVP_DigestVerifyInit(md, nil, EVP_sha256(), nil, pkey) == 1 else { ERR_clear_error(); return false }
        let rc = signature.withUnsafeBufferPointer { s in
            data.withUnsafeBufferPointer { d in EVP_DigestVerify(md, s.baseAddress, s.count, d.baseAddress, d.count) }
        }
        if rc != 1 { ERR_clear_error() }
        return rc == 1
    }

    /// DER INTEGER of a non-negative big-endian number.
    private static func integer(_ bytes: [UInt8]) -> [UInt8] {
        var v = Array(bytes.drop { $0 == 0 })
        if v.isEmpty { v = [0] }
        if v[0] & 0x80 != 0 { v.insert(0, at: 0) }
        return [0x02] + length(v.count) + v
    }

    private static func sequence(_ content: [UInt8]) -> [UInt8] { [0x30] + length(content.count) + content }

    private static func length(_ n: Int) -> [UInt8] {
        if n < 0x80 { return [UInt8(n)] }
        if n <= 0xFF { return [0x81, UInt8(n)] }
        return [0x82, UInt8(n >> 8), UInt8(n & 0xFF)]
    }
}
