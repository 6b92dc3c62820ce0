import COpenSSL

/// An Ed25519 public key (RFC 8032), for EdDSA signatures: WebAuthn's COSE algorithm -8 (OKP key,
/// curve Ed25519, RFC 9053 §2.2). Verification only; OpenSSL's EVP does the arithmetic.
// @unchecked Sendable: the EVP_PKEY is never changed after init.
public final class Ed25519PublicKey: @unchecked Sendable {
    let pkey: OpaquePointer
    /// The 32-byte encoded point, as given.
    public let raw: [UInt8]

    /// nil unless `raw` is 32 bytes that OpenSSL takes as an Ed25519 public key.
    public init?(raw: [UInt8]) {
        guard raw.count == 32 else { return nil }
        let key = raw.withUnsafeBufferPointer { EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, $0.baseAddress, $0.count) }
        guard let key else { ERR_clear_error(); return nil }
        pkey = key
        self.raw = raw
    }

    deinit { EVP_PKEY_free(pkey) }

    /// Checks a 64-byte Ed25519 signature over `data` (pure EdDSA: the message itself, no prehash).
    public func verify(signature: [UInt8], data: [UInt8]) -> Bool {
        guard signature.count == 64, let md = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(md) }
        guard EVP_DigestVerifyInit(md, nil, nil, nil, pkey) == 1 else { ERR_clear_error(); return false }
        let rc = Crypto.withNonNullBytes(data) { d, n in
            signature.withUnsafeBufferPointer { s in
                EVP_DigestVerify(md, s.baseAddress, s.count, d.assumingMemoryBound(to: UInt8.self), n)
            }
        }
        if rc != 1 { ERR_clear_error() }
        return rc == 1
    }
}
