import COpenSSL
import Synchronization

/// Keyed HMAC contexts, each set up once and copied for every message.
///
/// OpenSSL 3's one-shot `HMAC()` looks the MAC and the digest up by name (two provider fetches)
/// and schedules the key on every call: about 23,000 instructions for a few dozen bytes, five
/// times per step-up cycle, always with one of the same few server keys. A context keyed once
/// and duplicated (`EVP_MAC_CTX_dup`) skips both. The table keeps the last `capacity` keys seen
/// (the server's own keys, in practice); when it is full it starts over, so keys seen once (a
/// user's TOTP secret) cost what they cost before and nothing grows.
final class HMACKeys: Sendable {
    static let shared = HMACKeys()
    static let capacity = 32

    private struct Key: Hashable {
        let algorithm: Crypto.HashAlgorithm
        let bytes: [UInt8]
    }

    private let table = Mutex<[Key: KeyedContext]>([:])

    /// The MAC of `data` under `key`; nil if OpenSSL refuses (the caller falls back on `HMAC()`).
    func mac(_ algorithm: Crypto.HashAlgorithm, key: [UInt8], data: [UInt8]) -> [UInt8]? {
        let k = Key(algorithm: algorithm, bytes: key)
        let context = table.withLock { t -> KeyedContext? in
            if let c = t[k] { return c }
            guard let c = KeyedContext(algorithm, key: key) else { return nil }
            if t.count >= Self.capacity { t.removeAll() }
            t[k] = c
            return c
        }
        return context?.mac(data)
    }
}

/// One `EVP_MAC_CTX` keyed for HMAC with one digest; never updated itself, only duplicated.
private final class KeyedContext: @unchecked Sendable {
    // @unchecked Sendable: `ctx` is only read (duplicated) after init, which OpenSSL allows from
    // several threads at once.
    private let ctx: OpaquePointer
    private let length: Int

    init?(_ algorithm: Crypto.HashAlgorithm, key: [UInt8]) {
        guard let mac = EVP_MAC_fetch(nil, "HMAC", nil) else { return nil }
        defer { EVP_MAC_free(mac) }
        guard let ctx = EVP_MAC_CTX_new(mac) else { return nil }
        let ok = algorithm.name.withCString { name -> Bool in
            var params = [OSSL_PARAM_construct_utf8_string("digest", UnsafeMutablePointer(mutating: name), 0),
                          OSSL_PARAM_construct_end()]
            return Crypto.withNonNullBytes(key) { k, n in EVP_MAC_init(ctx, k.assumingMemoryBound(to: UInt8.self), n, &params) } == 1
        }
        guard ok else { EVP_MAC_CTX_free(ctx); return nil }
        self.ctx = ctx
        length = algorithm.digestLength
    }

    deinit { EVP_MAC_CTX_free(ctx) }

    func mac(_ data: [UInt8]) -> [UInt8]? {
        guard let c = EVP_MAC_CTX_dup(ctx) else { return nil }
        defer { EVP_MAC_CTX_free(c) }
        var out = [UInt8](repeating: 0, count: length)
        var written = 0
        let ok = Crypto.withNonNullBytes(data) { d, n in EVP_MAC_update(c, d.assumingMemoryBound(to: UInt8.self), n) } == 1
            && out.withUnsafeMutableBufferPointer { EVP_MAC_final(c, $0.baseAddress, &written, length) } == 1
        return ok && written == length ? out : nil
    }
}

extension Crypto.HashAlgorithm {
    /// The digest's name for OpenSSL's providers.
    var name: String {
        switch self {
        case .sha1: return "SHA1"
        case .sha256: return "SHA256"
        case .sha512: return "SHA512"
        }
    }
}
