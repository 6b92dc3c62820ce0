import COpenSSL

/// Cryptographic hashes from OpenSSL.
public enum Digest {
    public static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        bytes.withUnsafeBytes { b in
            out.withUnsafeMutableBytes { o in
                _ = EVP_Digest(b.baseAddress, b.count, o.baseAddress?.assumingMemoryBound(to: UInt8.self), nil, EVP_sha256(), nil)
            }
        }
        return out
    }

    public static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var s = [UInt8]()
        s.reserveCapacity(bytes.count * 2)
        for b in bytes {
            s.append(digits[Int(b >> 4)])
            s.append(digits[Int(b & 0xF)])
        }
        return String(decoding: s, as: UTF8.self)
    }
}
