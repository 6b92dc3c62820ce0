import COpenSSL
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Keyed HMAC states, each set up once and copied for every message.
///
/// OpenSSL 3's one-shot `HMAC()` looks the MAC and the digest up by name (two provider fetches)
/// and schedules the key on every call: about 23,000 instructions for a few dozen bytes, five
/// times per step-up cycle, always with one of the same few server keys. A key's state is set
/// up once (`KeyedContext`) and copied per message. The table keeps the last `capacity` keys
/// seen (the server's own keys, in practice); when it is full it starts over, so keys seen once
/// (a user's TOTP secret) cost what they cost before and nothing grows.
///
/// One table per thread (`current`): a worker's loop, the store's thread. One table for the
/// process put a lock, and contexts that every HMAC retained, on cache lines that every core
/// wrote; a key is now set up once per thread that uses it, which is a few times per key.
final class HMACKeys {
    static let capacity = 32

    private struct Key: Hashable {
        let algorithm: Crypto.HashAlgorithm
        let bytes: [UInt8]
    }

    private var table: [Key: KeyedContext] = [:]

    /// The calling thread's table, made on its first HMAC and released when the thread ends.
    static var current: HMACKeys {
        if let p = pthread_getspecific(threadKey) { return Unmanaged<HMACKeys>.fromOpaque(p).takeUnretainedValue() }
        let keys = HMACKeys()
        pthread_setspecific(threadKey, Unmanaged.passRetained(keys).toOpaque())
        return keys
    }

    private static let threadKey: pthread_key_t = {
        var key = pthread_key_t()
        let rc = pthread_key_create(&key) { p in
            if let p { Unmanaged<HMACKeys>.fromOpaque(p).release() }
        }
        precondition(rc == 0, "HMACKeys: pthread_key_create failed (\(rc))")
        return key
    }()

    /// The MAC of `data` under `key`.
    func mac(_ algorithm: Crypto.HashAlgorithm, key: [UInt8], data: [UInt8]) -> [UInt8] {
        context(algorithm, key: key).mac(data)
    }

    /// `key`'s state, set up now if the table does not have it.
    func context(_ algorithm: Crypto.HashAlgorithm, key: [UInt8]) -> KeyedContext {
        let k = Key(algorithm: algorithm, bytes: key)
        if let c = table[k] { return c }
        let c = KeyedContext(algorithm, key: key)
        if table.count >= Self.capacity { table.removeAll() }
        table[k] = c
        return c
    }
}

/// One key's HMAC state: the hash states after its ipad and opad blocks (`txg_hmac_key`, in
/// the COpenSSL shim), copied for every message. OpenSSL 3's `EVP_MAC` (duplicate a keyed
/// context, update, final, free) spent about 9,000 instructions per message beyond the hashing,
/// more than hashing a 400-byte authId; this copies two small structs. Never changed after init,
/// so several threads may use it at once.
final class KeyedContext: @unchecked Sendable {
    // @unchecked Sendable: `key` is written once, in init, and only read after.
    private let key: UnsafeMutablePointer<txg_hmac_key>
    private let length: Int

    init(_ algorithm: Crypto.HashAlgorithm, key bytes: [UInt8]) {
        let state = UnsafeMutablePointer<txg_hmac_key>.allocate(capacity: 1)
        // Fails only for an algorithm code the shim does not know; `hmacCode` gives none such.
        let ok = bytes.withUnsafeBufferPointer { txg_hmac_key_init(state, algorithm.hmacCode, $0.baseAddress, $0.count) }
        precondition(ok == 1, "txg_hmac_key_init refused \(algorithm)")
        key = state
        length = algorithm.digestLength
    }

    deinit {
        OPENSSL_cleanse(key, MemoryLayout<txg_hmac_key>.size)
        key.deallocate()
    }

    func mac(_ data: [UInt8]) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: length) { out, count in
            data.withUnsafeBytes { mac($0, into: UnsafeMutableRawBufferPointer(out)) }
            count = length
        }
    }

    /// The MAC written to the start of `out` (room for `length` bytes checked by the caller).
    func mac(_ data: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) {
        txg_hmac(key, data.baseAddress?.assumingMemoryBound(to: UInt8.self), data.count,
                 out.baseAddress?.assumingMemoryBound(to: UInt8.self))
    }
}

extension Crypto.HashAlgorithm {
    /// The algorithm's number for `txg_hmac_key_init`.
    var hmacCode: Int32 {
        switch self {
        case .sha1: return 1
        case .sha256: return 256
        case .sha512: return 512
        }
    }
}
