import COpenSSL

/// An ECDSA P-256 key pair (JOSE's ES256, RFC 7518 §3.4) held by OpenSSL. Generated, read and
/// written as PEM (PKCS #8), and signing with SHA-256 into JOSE's fixed-size `r || s` form.
/// No curve arithmetic here: OpenSSL's EVP does all of it.
// @unchecked Sendable: the EVP_PKEY is never changed after init; OpenSSL 3 allows concurrent
// signing with one key (each signature gets its own EVP_MD_CTX).
public final class ECSigningKey: @unchecked Sendable {
    let pkey: OpaquePointer

    private init(_ pkey: OpaquePointer) { self.pkey = pkey }
    deinit { EVP_PKEY_free(pkey) }

    /// A new random P-256 key; nil only if OpenSSL cannot make one.
    public static func generate() -> ECSigningKey? {
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { return nil }
        defer { EVP_PKEY_CTX_free(ctx) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(ctx) == 1, EVP_PKEY_CTX_set_group_name(ctx, "P-256") == 1,
              EVP_PKEY_generate(ctx, &key) == 1, let key else { ERR_clear_error(); return nil }
        return ECSigningKey(key)
    }

    /// Reads a PEM private key; nil unless it is a P-256 EC key.
    public convenience init?(pem: [UInt8]) {
        guard let key = pem.withUnsafeBytes({ b -> OpaquePointer? in
            guard let bio = BIO_new_mem_buf(b.baseAddress, Int32(b.count)) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
        }) else { ERR_clear_error(); return nil }
        guard ECPublicKey.isP256(key) else { EVP_PKEY_free(key); return nil }
        self.init(key)
    }

    /// The private key as PKCS #8 PEM.
    public var pem: [UInt8] {
        guard let bio = BIO_new(BIO_s_mem()) else { fatalError("BIO_new failed") }
        defer { BIO_free(bio) }
        guard PEM_write_bio_PrivateKey(bio, pkey, nil, nil, 0, nil, nil) == 1 else { fatalError("PEM_write_bio_PrivateKey failed") }
        var data: UnsafeMutablePointer<CChar>?
        let n = BIO_ctrl(bio, BIO_CTRL_INFO, 0, &data)
        guard n > 0, let data else { return [] }
        return data.withMemoryRebound(to: UInt8.self, capacity: n) { Array(UnsafeBufferPointer(start: $0, count: n)) }
    }

    /// The public half.
    public var publicKey: ECPublicKey {
        guard let point = ECPublicKey.point(of: pkey), let key = ECPublicKey(x: Array(point[1..<33]), y: Array(point[33...])) else {
            fatalError("cannot export an EC public key")
        }
        return key
    }

    /// ES256: ECDSA over SHA-256 of `data`, as the 64-byte `r || s` JWS uses (RFC 7518 §3.4).
    public func sign(_ data: [UInt8]) -> [UInt8] {
        guard let md = EVP_MD_CTX_new() else { fatalError("EVP_MD_CTX_new failed") }
        defer { EVP_MD_CTX_free(md) }
        guard EVP_DigestSignInit(md, nil, EVP_sha256(), nil, pkey) == 1 else { fatalError("EVP_DigestSignInit failed") }
        var length = 0
        var der = [UInt8]()
        let ok = data.withUnsafeBufferPointer { d -> Bool in
            guard EVP_DigestSign(md, nil, &length, d.baseAddress, d.count) == 1 else { return false }
            der = [UInt8](repeating: 0, count: length)
            return der.withUnsafeMutableBufferPointer { EVP_DigestSign(md, $0.baseAddress, &length, d.baseAddress, d.count) } == 1
        }
        guard ok, let raw = Self.rawSignature(Array(der.prefix(length))) else { fatalError("ES256 signing failed") }
        return raw
    }

    /// DER `ECDSA-Sig-Value` → `r || s`, each left-padded to 32 bytes.
    static func rawSignature(_ der: [UInt8]) -> [UInt8]? {
        let sig = der.withUnsafeBufferPointer { b -> OpaquePointer? in
            var p = b.baseAddress
            return d2i_ECDSA_SIG(nil, &p, b.count)
        }
        guard let sig else { return nil }
        defer { ECDSA_SIG_free(sig) }
        var out = [UInt8](repeating: 0, count: 64)
        let ok = out.withUnsafeMutableBufferPointer { o in
            BN_bn2binpad(ECDSA_SIG_get0_r(sig), o.baseAddress, 32) == 32
                && BN_bn2binpad(ECDSA_SIG_get0_s(sig), o.baseAddress! + 32, 32) == 32
        }
        return ok ? out : nil
    }
}

/// A P-256 public key, from its JWK coordinates (`x`, `y`: 32 bytes each) or a private key.
public final class ECPublicKey: @unchecked Sendable {
    let pkey: OpaquePointer
    public let x: [UInt8]
    public let y: [UInt8]

    /// The DER SubjectPublicKeyInfo of a P-256 key, up to the uncompressed point (RFC 5480).
    private static let spkiPrefix: [UInt8] = [
        0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08,
        0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
    ]

    /// nil unless `x` and `y` are 32 bytes and name a point on P-256 (OpenSSL checks it).
    public init?(x: [UInt8], y: [UInt8]) {
        guard x.count == 32, y.count == 32 else { return nil }
        let der = Self.spkiPrefix + [0x04] + x + y
        let key = der.withUnsafeBufferPointer { b -> OpaquePointer? in
            var p = b.baseAddress
            return d2i_PUBKEY(nil, &p, b.count)
        }
        guard let key else { ERR_clear_error(); return nil }
        guard Self.isP256(key) else { EVP_PKEY_free(key); return nil }
        pkey = key
        self.x = x
        self.y = y
    }

    deinit { EVP_PKEY_free(pkey) }

    /// Checks an ES256 signature (`r || s`, 64 bytes) over `data`.
    public func verify(signature: [UInt8], data: [UInt8]) -> Bool {
        guard signature.count == 64, let der = Self.derSignature(signature) else { return false }
        guard let md = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(md) }
        guard EVP_DigestVerifyInit(md, nil, EVP_sha256(), nil, pkey) == 1 else { ERR_clear_error(); return false }
        let rc = der.withUnsafeBufferPointer { s in
            data.withUnsafeBufferPointer { d in EVP_DigestVerify(md, s.baseAddress, s.count, d.baseAddress, d.count) }
        }
        if rc != 1 { ERR_clear_error() }
        return rc == 1
    }

    /// Checks an ECDSA P-256 / SHA-256 signature given as DER `Ecdsa-Sig-Value` (SEQUENCE of the
    /// two INTEGERs r and s), the form WebAuthn's ES256 uses (COSE algorithm -7). OpenSSL refuses a
    /// signature that is not strict DER (a long-form length, a padded integer, trailing bytes): it
    /// re-encodes what it read and compares.
    public func verify(derSignature: [UInt8], data: [UInt8]) -> Bool {
        // 8 bytes of structure and two integers of at most 33 bytes each.
        guard derSignature.count >= 8, derSignature.count <= 72, let md = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(md) }
        guard EVP_DigestVerifyInit(md, nil, EVP_sha256(), nil, pkey) == 1 else { ERR_clear_error(); return false }
        let rc = derSignature.withUnsafeBufferPointer { s in
            Crypto.withNonNullBytes(data) { d, n in
                EVP_DigestVerify(md, s.baseAddress, s.count, d.assumingMemoryBound(to: UInt8.self), n)
            }
        }
        if rc != 1 { ERR_clear_error() }
        return rc == 1
    }

    /// `r || s` → DER `ECDSA-Sig-Value`.
    private static func derSignature(_ raw: [UInt8]) -> [UInt8]? {
        guard let sig = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(sig) }
        let r = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, 32, nil) }
        let s = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress! + 32, 32, nil) }
        guard let r, let s, ECDSA_SIG_set0(sig, r, s) == 1 else { BN_free(r); BN_free(s); return nil }
        let n = i2d_ECDSA_SIG(sig, nil)
        guard n > 0 else { return nil }
        var out = [UInt8](repeating: 0, count: Int(n))
        let written = out.withUnsafeMutableBufferPointer { b -> Int32 in
            var p = b.baseAddress
            return i2d_ECDSA_SIG(sig, &p)
        }
        return written == n ? out : nil
    }

    /// The uncompressed point (0x04 || x || y) of a P-256 key.
    static func point(of pkey: OpaquePointer) -> [UInt8]? {
        let n = i2d_PUBKEY(pkey, nil)
        guard n == 91 else { return nil }
        var der = [UInt8](repeating: 0, count: Int(n))
        let written = der.withUnsafeMutableBufferPointer { b -> Int32 in
            var p = b.baseAddress
            return i2d_PUBKEY(pkey, &p)
        }
        guard written == n, Array(der.prefix(spkiPrefix.count)) == spkiPrefix else { return nil }
        return Array(der[spkiPrefix.count...])
    }

    static func isP256(_ pkey: OpaquePointer) -> Bool {
        guard EVP_PKEY_get_base_id(pkey) == EVP_PKEY_EC else { return false }
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_group_name(pkey, &name, name.count, &length) == 1 else { ERR_clear_error(); return false }
        let group = String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return group == "prime256v1" || group == "P-256"
    }
}
