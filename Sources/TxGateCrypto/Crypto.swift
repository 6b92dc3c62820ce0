import COpenSSL

/// Cryptographic primitives from OpenSSL 3 (libcrypto). Besides the event layer, this is the only
/// Swift code that calls OpenSSL; everything else goes through these functions.
public enum Crypto {
    /// Hash functions usable with `hmac(_:key:data:)`.
    public enum HashAlgorithm: Sendable, Hashable {
        case sha1, sha256, sha512

        /// Output length in bytes.
        public var digestLength: Int {
            switch self {
            case .sha1: return 20
            case .sha256: return 32
            case .sha512: return 64
            }
        }
    }

    /// `count` bytes from OpenSSL's CSPRNG. Terminates the process if the CSPRNG fails: continuing with
    /// predictable "random" bytes (salts, tokens, secrets) would be worse than stopping.
    public static func randomBytes(_ count: Int) -> [UInt8] {
        precondition(count >= 0 && count <= Int(Int32.max), "randomBytes: invalid count \(count)")
        if count == 0 { return [] }
        var out = [UInt8](repeating: 0, count: count)
        let rc = out.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32(count)) }
        guard rc == 1 else { fatalError("RAND_bytes failed: the CSPRNG is not usable") }
        return out
    }

    /// A random (version 4) UUID in lower case, from OpenSSL's CSPRNG: TxIds and the like.
    /// Foundation's `UUID()` opens, reads and closes /dev/urandom for each one on Linux.
    public static func uuidV4() -> String {
        var b = randomBytes(16)
        b[6] = b[6] & 0x0F | 0x40
        b[8] = b[8] & 0x3F | 0x80
        let digits = Array("0123456789abcdef".utf8)
        return String(unsafeUninitializedCapacity: 36) { out in
            var j = 0
            for i in 0..<16 {
                if i == 4 || i == 6 || i == 8 || i == 10 {
                    out[j] = UInt8(ascii: "-")
                    j += 1
                }
                out[j] = digits[Int(b[i] >> 4)]
                out[j + 1] = digits[Int(b[i] & 0xF)]
                j += 2
            }
            return 36
        }
    }

    /// SHA-1 digest (20 bytes): for names that a protocol defines by SHA-1 (Redis's script
    /// cache), never for security.
    public static func sha1(_ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 20)
        let rc = withNonNullBytes(data) { d, n in
            out.withUnsafeMutableBufferPointer { o in
                EVP_Digest(d, n, o.baseAddress, nil, EVP_sha1(), nil)
            }
        }
        guard rc == 1 else { fatalError("EVP_Digest(SHA-1) failed") }
        return out
    }

    /// SHA-256 digest (32 bytes), on a stack context (`txg_sha256`): no allocation but the
    /// result's.
    public static func sha256(_ data: [UInt8]) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: 32) { out, count in
            data.withUnsafeBufferPointer { txg_sha256($0.baseAddress, $0.count, out.baseAddress) }
            count = 32
        }
    }

    /// `prefix` and the SHA-256 of `data` in lower-case hexadecimal, written as one string with
    /// no array for the digest: store keys and records' seals and binding digests are such text.
    public static func sha256Hex(_ data: UnsafeRawBufferPointer, prefix: StaticString = "") -> String {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 32) { digest in
            txg_sha256(data.baseAddress?.assumingMemoryBound(to: UInt8.self), data.count, digest.baseAddress)
            let p = UnsafeBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount)
            return String(unsafeUninitializedCapacity: p.count + 64) { out in
                _ = out.initialize(from: p)
                writeHex(UnsafeBufferPointer(digest), into: UnsafeMutableBufferPointer(rebasing: out[p.count...]))
                return p.count + 64
            }
        }
    }

    /// HMAC with the given hash function.
    public static func hmac(_ algorithm: HashAlgorithm, key: [UInt8], data: [UInt8]) -> [UInt8] {
        precondition(key.count <= Int(Int32.max), "hmac: key too long")
        return HMACKeys.current.mac(algorithm, key: key, data: data)
    }

    /// HMAC of bytes in place, written to the start of `out` (at least the algorithm's
    /// `digestLength`): no array for the message or the MAC (TOTP computes three per code).
    public static func hmac(_ algorithm: HashAlgorithm, key: [UInt8], data: UnsafeRawBufferPointer,
                            into out: UnsafeMutableRawBufferPointer) {
        precondition(key.count <= Int(Int32.max), "hmac: key too long")
        precondition(out.count >= algorithm.digestLength, "hmac: the output has no room for the MAC")
        HMACKeys.current.context(algorithm, key: key).mac(data, into: out)
    }

    public static func hmacSHA256(key: [UInt8], data: [UInt8]) -> [UInt8] {
        hmac(.sha256, key: key, data: data)
    }

    public static func hmacSHA1(key: [UInt8], data: [UInt8]) -> [UInt8] {
        hmac(.sha1, key: key, data: data)
    }

    public static func hmacSHA512(key: [UInt8], data: [UInt8]) -> [UInt8] {
        hmac(.sha512, key: key, data: data)
    }

    /// Compares two byte strings in time that depends only on their length (CRYPTO_memcmp).
    /// Returns false when the lengths differ (the length itself is not secret).
    public static func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return a.withUnsafeBytes { pa in
            b.withUnsafeBytes { pb in CRYPTO_memcmp(pa.baseAddress, pb.baseAddress, a.count) == 0 }
        }
    }

    /// `constantTimeEquals` on bytes in place.
    public static func constantTimeEquals(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return CRYPTO_memcmp(a.baseAddress, b.baseAddress, a.count) == 0
    }

    /// scrypt (RFC 7914) via EVP_PBE_scrypt. Returns nil when the parameters are invalid (n not a power of
    /// two > 1, r or p zero, length < 1, sizes overflowing) or OpenSSL refuses them. `maxmem` is computed
    /// from the parameters, so any valid cost is accepted: callers that take parameters from untrusted
    /// input must bound them first (as `PasswordHash.verify` does).
    public static func scrypt(password: [UInt8], salt: [UInt8], n: UInt64, r: UInt64, p: UInt64,
                              length: Int) -> [UInt8]? {
        guard n > 1, n & (n - 1) == 0, r > 0, p > 0, length > 0 else { return nil }
        // OpenSSL needs 128·r·(n + 2) bytes for V and the scratch area plus 128·r·p for B.
        let (rn, o1) = (n + 2).multipliedReportingOverflow(by: r)
        let (v, o2) = rn.multipliedReportingOverflow(by: 128)
        let (rp, o3) = r.multipliedReportingOverflow(by: p)
        let (b, o4) = rp.multipliedReportingOverflow(by: 128)
        let (need, o5) = v.addingReportingOverflow(b)
        let (maxmem, o6) = need.addingReportingOverflow(1 << 20)
        guard !(o1 || o2 || o3 || o4 || o5 || o6) else { return nil }

        var out = [UInt8](repeating: 0, count: length)
        let rc = withNonNullBytes(password) { pw, pwn in
            withNonNullBytes(salt) { s, sn in
                out.withUnsafeMutableBufferPointer { o in
                    EVP_PBE_scrypt(pw.assumingMemoryBound(to: CChar.self), pwn,
                                   s.assumingMemoryBound(to: UInt8.self), sn,
                                   n, r, p, maxmem, o.baseAddress, length)
                }
            }
        }
        guard rc == 1 else {
            ERR_clear_error()
            return nil
        }
        return out
    }

    /// Lower-case hexadecimal.
    public static func hex(_ bytes: [UInt8]) -> String {
        bytes.withUnsafeBufferPointer { hex($0) }
    }

    /// Lower-case hexadecimal of bytes in place.
    public static func hex(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 2) { out in
            writeHex(bytes, into: out)
            return bytes.count * 2
        }
    }

    /// Writes two lower-case hex digits per byte of `bytes` at the start of `out`.
    private static func writeHex(_ bytes: UnsafeBufferPointer<UInt8>, into out: UnsafeMutableBufferPointer<UInt8>) {
        @inline(__always) func digit(_ v: UInt8) -> UInt8 { v < 10 ? 0x30 + v : 0x57 + v }
        for (i, b) in bytes.enumerated() {
            out[2 * i] = digit(b >> 4)
            out[2 * i + 1] = digit(b & 0xF)
        }
    }

    /// Parses hexadecimal (either case, even length); nil otherwise.
    public static func fromHex(_ s: String) -> [UInt8]? {
        let chars = Array(s.utf8)
        guard chars.count % 2 == 0 else { return nil }
        var out = BitPacker(capacity: chars.count / 2)
        for c in chars {
            let v = hexTable[Int(c)]
            guard v != 0xFF else { return nil }
            out.append(v, width: 4)
        }
        return out.bytes
    }

    /// Each byte's value as a hex digit (either case), 0xFF for other bytes.
    private static let hexTable: [UInt8] = {
        var t = Base64Codec.table(Array("0123456789abcdef".utf8))
        for (i, c) in "ABCDEF".utf8.enumerated() { t[Int(c)] = UInt8(10 + i) }
        return t
    }()

    /// Calls `body` with a pointer that is never NULL (a dummy byte for an empty array) and the length.
    static func withNonNullBytes<R>(_ bytes: [UInt8],
                                            _ body: (UnsafeRawPointer, Int) -> R) -> R {
        if bytes.isEmpty {
            var zero: UInt8 = 0
            return withUnsafeBytes(of: &zero) { body($0.baseAddress!, 0) }
        }
        return bytes.withUnsafeBytes { body($0.baseAddress!, $0.count) }
    }
}
