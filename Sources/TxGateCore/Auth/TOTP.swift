import TxGateCrypto

/// Time-based one-time passwords (RFC 6238) over HOTP (RFC 4226): HMAC-SHA1 by default, 30-second steps
/// counted from the Unix epoch, 6 digits.
public struct TOTP: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    public enum Algorithm: String, Sendable, Hashable {
        case sha1 = "SHA1", sha256 = "SHA256", sha512 = "SHA512"
    }

    public let secret: [UInt8]
    public let digits: Int
    public let period: Int
    public let algorithm: Algorithm

    /// `digits` must be in 1...10 and `period` (seconds) positive.
    public init(secret: [UInt8], digits: Int = 6, period: Int = 30, algorithm: Algorithm = .sha1) {
        precondition((1...10).contains(digits), "TOTP: digits must be in 1...10")
        precondition(period > 0, "TOTP: period must be positive")
        self.secret = secret
        self.digits = digits
        self.period = period
        self.algorithm = algorithm
    }

    /// Never shows the secret.
    public var description: String { "TOTP(digits: \(digits), period: \(period), algorithm: \(algorithm.rawValue))" }
    public var debugDescription: String { description }

    /// The time-step counter for a Unix time (seconds); times before the epoch map to step 0.
    public func counter(at unixTime: Int) -> UInt64 {
        unixTime <= 0 ? 0 : UInt64(unixTime / period)
    }

    /// The HOTP value for `counter`, zero-padded to `digits`.
    public func code(counter: UInt64) -> String {
        let value = String(number(counter: counter))
        return String(repeating: "0", count: digits - value.count) + value
    }

    /// The HOTP value for `counter` as a number (below 10^`digits`): the code is its decimal
    /// text, zero-padded. Computed with no allocation (every check computes three).
    func number(counter: UInt64) -> UInt64 {
        let hash: Crypto.HashAlgorithm = switch algorithm {
        case .sha1: .sha1
        case .sha256: .sha256
        case .sha512: .sha512
        }
        return withUnsafeTemporaryAllocation(byteCount: 64, alignment: 8) { mac in
            withUnsafeBytes(of: counter.bigEndian) { Crypto.hmac(hash, key: secret, data: $0, into: mac) }
            // Dynamic truncation (RFC 4226 §5.3).
            let offset = Int(mac[hash.digestLength - 1] & 0x0F)
            let binary = UInt64(mac[offset] & 0x7F) << 24 | UInt64(mac[offset + 1]) << 16
                | UInt64(mac[offset + 2]) << 8 | UInt64(mac[offset + 3])
            var modulus: UInt64 = 1
            for _ in 0..<digits { modulus *= 10 }
            return binary % modulus
        }
    }

    /// The code valid at `unixTime`.
    public func code(at unixTime: Int) -> String {
        code(counter: counter(at: unixTime))
    }

    /// The time-step counter whose code equals `code`, among the steps within ±`window` of `unixTime`'s;
    /// nil if none does, or if `code` is not exactly `digits` ASCII digits. Callers should record the
    /// returned counter per user and refuse a counter already used (RFC 6238 §5.2). If two steps happen to
    /// share the code, the earliest is returned. Every candidate is computed and compared in constant time.
    /// `window` is clamped to 0...10.
    public func matchingCounter(_ code: String, at unixTime: Int, window: Int = 1) -> UInt64? {
        // The code as a number: `digits` ASCII digits, leading zeros included, else no match.
        var given: UInt64 = 0
        var count = 0
        for b in code.utf8 {
            guard b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9"), count < digits else { return nil }
            given = given * 10 + UInt64(b - UInt8(ascii: "0"))
            count += 1
        }
        guard count == digits else { return nil }
        let current = counter(at: unixTime)
        let w = UInt64(max(0, min(window, 10)))
        let low = current >= w ? current - w : 0
        let high = current <= UInt64.max - w ? current + w : UInt64.max
        var match: UInt64?
        var c = low
        while true {
            // Every candidate computed and compared whatever the others gave (no early exit).
            if number(counter: c) == given, match == nil { match = c }
            if c == high { break }
            c += 1
        }
        return match
    }
}
