import TxGateCrypto

/// scrypt cost parameters: N = 2^ln, block size r, parallelism p. Memory is about 128·r·N bytes.
public struct ScryptCost: Sendable, Hashable, CustomStringConvertible {
    public var ln: Int
    public var r: Int
    public var p: Int

    public init(ln: Int, r: Int, p: Int) {
        self.ln = ln
        self.r = r
        self.p = p
    }

    /// N = 32768, r = 8, p = 1: 32 MiB and roughly 50–100 ms per hash.
    public static let `default` = ScryptCost(ln: 15, r: 8, p: 1)

    /// Whether `verify` accepts a stored hash with this cost: 1 ≤ ln ≤ 20, 1 ≤ r ≤ 32, 1 ≤ p ≤ 16, at most
    /// 256 MiB of memory and at most 16 times the work of `.default`. The bound keeps a corrupted or
    /// hostile stored hash from making a single login exhaust the memory or CPU of the gateway.
    public var isAcceptable: Bool {
        guard (1...20).contains(ln), (1...32).contains(r), (1...16).contains(p) else { return false }
        let n = 1 << ln
        return 128 * r * n <= 256 << 20 && n * r * p <= 1 << 22
    }

    public var description: String { "ln=\(ln),r=\(r),p=\(p)" }
}

/// Password hashing with scrypt, in a PHC-like string:
/// `$scrypt$ln=15,r=8,p=1$<salt>$<hash>` where salt (16 random bytes) and hash (32 bytes) are standard
/// base64 without padding. Passwords are hashed as their UTF-8 bytes, without Unicode normalisation.
public enum PasswordHash {
    static let saltLength = 16
    static let keyLength = 32

    /// Hashes `password` with a fresh random salt. `cost` must satisfy `ScryptCost.isAcceptable`, so that
    /// every hash produced here is one that `verify` accepts.
    public static func hash(_ password: String, cost: ScryptCost = .default) -> String {
        precondition(cost.isAcceptable, "PasswordHash: unsupported scrypt cost \(cost)")
        let salt = Crypto.randomBytes(saltLength)
        guard let key = derive(password, salt: salt, cost: cost, length: keyLength) else {
            fatalError("PasswordHash: scrypt failed for cost \(cost)")
        }
        return "$scrypt$\(cost)$\(Base64.encode(salt, padding: false))$\(Base64.encode(key, padding: false))"
    }

    /// Whether `password` matches `encoded`. The derived key is compared in constant time. Returns false,
    /// quickly, for any malformed encoding or one whose cost is outside `ScryptCost.isAcceptable`.
    public static func verify(_ password: String, encoded: String) -> Bool {
        guard let parsed = parse(encoded),
              let key = derive(password, salt: parsed.salt, cost: parsed.cost, length: parsed.hash.count)
        else { return false }
        return Crypto.constantTimeEquals(key, parsed.hash)
    }

    /// Whether `encoded` is a well-formed hash that `verify` would check.
    public static func isValidEncoding(_ encoded: String) -> Bool {
        parse(encoded) != nil
    }

    /// The cost recorded in `encoded`, or nil if it is not a valid encoding.
    public static func cost(of encoded: String) -> ScryptCost? {
        parse(encoded)?.cost
    }

    /// Whether `encoded` should be replaced by a fresh hash at `cost` (after a successful login).
    public static func needsRehash(_ encoded: String, cost: ScryptCost = .default) -> Bool {
        guard let parsed = parse(encoded) else { return true }
        return parsed.cost != cost || parsed.salt.count != saltLength || parsed.hash.count != keyLength
    }

    /// A valid hash (default cost) of a random password nobody knows. Verify against it when the user
    /// does not exist, so that the answer takes as long as for a real user. Computed once, on first use.
    public static let dummy: String = hash(Crypto.hex(Crypto.randomBytes(16)))

    // MARK: - Internals

    struct Parsed {
        var cost: ScryptCost
        var salt: [UInt8]
        var hash: [UInt8]
    }

    static func parse(_ encoded: String) -> Parsed? {
        let parts = encoded.split(separator: "$", omittingEmptySubsequences: false)
        guard parts.count == 5, parts[0].isEmpty, parts[1] == "scrypt" else { return nil }
        let params = parts[2].split(separator: ",", omittingEmptySubsequences: false)
        guard params.count == 3,
              let ln = parameter(params[0], "ln"),
              let r = parameter(params[1], "r"),
              let p = parameter(params[2], "p")
        else { return nil }
        let cost = ScryptCost(ln: ln, r: r, p: p)
        guard cost.isAcceptable else { return nil }
        // No '=' padding in PHC strings; Base64.decode would accept it, so refuse it here.
        guard !parts[3].contains("="), !parts[4].contains("="),
              let salt = Base64.decode(String(parts[3])), (8...64).contains(salt.count),
              let hash = Base64.decode(String(parts[4])), (16...64).contains(hash.count)
        else { return nil }
        return Parsed(cost: cost, salt: salt, hash: hash)
    }

    /// `name=digits`, decimal without sign or leading zeros, at most 3 digits.
    private static func parameter(_ s: Substring, _ name: String) -> Int? {
        let prefix = name + "="
        guard s.hasPrefix(prefix) else { return nil }
        let digits = s.dropFirst(prefix.count).utf8
        guard (1...3).contains(digits.count),
              digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
              digits.first != UInt8(ascii: "0")
        else { return nil }
        return digits.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
    }

    private static func derive(_ password: String, salt: [UInt8], cost: ScryptCost, length: Int) -> [UInt8]? {
        Crypto.scrypt(password: Array(password.utf8), salt: salt, n: UInt64(1) << UInt64(cost.ln),
                      r: UInt64(cost.r), p: UInt64(cost.p), length: length)
    }
}
