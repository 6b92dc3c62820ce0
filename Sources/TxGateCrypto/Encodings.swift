/// Base64 and Base32 (RFC 4648) without Foundation. Decoders are strict: they reject characters outside the
/// alphabet, impossible lengths, misplaced padding and non-zero trailing bits, so every accepted string is
/// the canonical encoding of exactly one byte string.

/// Standard base64 (RFC 4648 §4, alphabet `A–Z a–z 0–9 + /`).
public enum Base64 {
    /// Encodes; with `padding: false` the trailing `=` are omitted (as in PHC strings).
    public static func encode(_ b: [UInt8], padding: Bool = true) -> String {
        Base64Codec.encode(b, alphabet: Base64Codec.standard, padding: padding)
    }

    /// Decodes with or without `=` padding; nil on any invalid input.
    public static func decode(_ s: String) -> [UInt8]? {
        Base64Codec.decode(s, table: Base64Codec.standardTable)
    }
}

/// URL-safe base64 (RFC 4648 §5, alphabet `A–Z a–z 0–9 - _`), as used by JWS.
public enum Base64URL {
    /// Encodes without padding.
    public static func encode(_ b: [UInt8]) -> String {
        Base64Codec.encode(b, alphabet: Base64Codec.url, padding: false)
    }

    /// Decodes with or without `=` padding; nil on any invalid input.
    public static func decode(_ s: String) -> [UInt8]? {
        Base64Codec.decode(s, table: Base64Codec.urlTable)
    }

    /// `decode(_:)` on the UTF-8 bytes of a string.
    public static func decode(_ utf8: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        Base64Codec.decode(utf8, table: Base64Codec.urlTable)
    }

    /// The length of `n` bytes encoded.
    public static func encodedCount(_ n: Int) -> Int { Base64Codec.encodedCount(n, padding: false) }

    /// Writes `b` encoded to the start of `out` (room for `encodedCount(b.count)` bytes);
    /// returns the count.
    public static func encode(_ b: UnsafeBufferPointer<UInt8>, into out: UnsafeMutableBufferPointer<UInt8>) -> Int {
        Base64Codec.encode(b, alphabet: Base64Codec.url, padding: false, into: out)
    }
}

enum Base64Codec {
    static let standard = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    static let url = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    static let standardTable = table(standard)
    static let urlTable = table(url)

    static func table(_ alphabet: [UInt8]) -> [UInt8] {
        var t = [UInt8](repeating: 0xFF, count: 256)
        for (i, c) in alphabet.enumerated() { t[Int(c)] = UInt8(i) }
        return t
    }

    static func encode(_ b: [UInt8], alphabet: [UInt8], padding: Bool) -> String {
        let count = encodedCount(b.count, padding: padding)
        return b.withUnsafeBufferPointer { b in
            String(unsafeUninitializedCapacity: count) { encode(b, alphabet: alphabet, padding: padding, into: $0) }
        }
    }

    /// The length of `n` bytes encoded.
    static func encodedCount(_ n: Int, padding: Bool) -> Int {
        let tail = n % 3
        return n / 3 * 4 + (tail == 0 ? 0 : padding ? 4 : tail + 1)
    }

    /// Writes `b` encoded to the start of `o` (room for `encodedCount` bytes); returns the count.
    static func encode(_ b: UnsafeBufferPointer<UInt8>, alphabet: [UInt8], padding: Bool,
                       into o: UnsafeMutableBufferPointer<UInt8>) -> Int {
        let tail = b.count % 3
        let count = encodedCount(b.count, padding: padding)
        precondition(o.count >= count, "base64: no room for the encoding")
        alphabet.withUnsafeBufferPointer { a in
            var i = 0, j = 0
            while i + 3 <= b.count {
                let v = UInt32(b[i]) << 16 | UInt32(b[i + 1]) << 8 | UInt32(b[i + 2])
                o[j] = a[Int(v >> 18 & 63)]
                o[j + 1] = a[Int(v >> 12 & 63)]
                o[j + 2] = a[Int(v >> 6 & 63)]
                o[j + 3] = a[Int(v & 63)]
                i += 3
                j += 4
            }
            if tail > 0 {
                let v = UInt32(b[i]) << 16 | (tail == 2 ? UInt32(b[i + 1]) << 8 : 0)
                o[j] = a[Int(v >> 18 & 63)]
                o[j + 1] = a[Int(v >> 12 & 63)]
                if tail == 2 { o[j + 2] = a[Int(v >> 6 & 63)] }
                if padding {
                    if tail == 1 { o[j + 2] = UInt8(ascii: "=") }
                    o[j + 3] = UInt8(ascii: "=")
                }
            }
        }
        return count
    }

    static func decode(_ s: String, table: [UInt8]) -> [UInt8]? {
        var s = s
        return s.withUTF8 { decode($0, table: table) }
    }

    /// Four symbols at a time into three bytes (a JWT's claims are decoded at every journey
    /// step: a symbol at a time cost ~70 instructions a character).
    static func decode(_ input: UnsafeBufferPointer<UInt8>, table: [UInt8]) -> [UInt8]? {
        var n = input.count
        // Padding, if present, must complete the last quantum: total length a multiple of 4, at most two '='.
        var pad = 0
        while n > 0, input[n - 1] == UInt8(ascii: "=") {
            n -= 1
            pad += 1
        }
        if pad > 0 {
            guard pad <= 2, (n + pad) % 4 == 0 else { return nil }
        }
        let rem = n % 4
        guard rem != 1 else { return nil }
        if pad > 0 && rem == 0 { return nil }

        return table.withUnsafeBufferPointer { t -> [UInt8]? in
            let full = n - rem
            let outCount = full / 4 * 3 + (rem == 0 ? 0 : rem - 1)
            var invalid: UInt32 = 0
            let out = [UInt8](unsafeUninitializedCapacity: outCount) { o, written in
                var i = 0, j = 0
                while i < full {
                    let a = UInt32(t[Int(input[i])]), b = UInt32(t[Int(input[i + 1])])
                    let c = UInt32(t[Int(input[i + 2])]), d = UInt32(t[Int(input[i + 3])])
                    invalid |= a | b | c | d
                    let v = a << 18 | b << 12 | c << 6 | d
                    o[j] = UInt8(truncatingIfNeeded: v >> 16)
                    o[j + 1] = UInt8(truncatingIfNeeded: v >> 8)
                    o[j + 2] = UInt8(truncatingIfNeeded: v)
                    i += 4
                    j += 3
                }
                if rem > 0 {
                    var v: UInt32 = 0
                    for k in 0..<rem {
                        let x = UInt32(t[Int(input[full + k])])
                        invalid |= x
                        v = v << 6 | x
                    }
                    // 2 symbols: 12 bits, one byte and 4 leftover bits; 3 symbols: 18 bits, two bytes and 2.
                    let leftover = rem == 2 ? 4 : 2
                    // Leftover bits must be zero for a canonical encoding.
                    if v & ((1 << UInt32(leftover)) - 1) != 0 { invalid |= 0xFF }
                    v >>= UInt32(leftover)
                    if rem == 3 {
                        o[j] = UInt8(truncatingIfNeeded: v >> 8)
                        o[j + 1] = UInt8(truncatingIfNeeded: v)
                    } else {
                        o[j] = UInt8(truncatingIfNeeded: v)
                    }
                }
                written = outCount
            }
            // The table maps every byte outside the alphabet to 0xFF, and every symbol to < 64.
            return invalid & 0xC0 == 0 ? out : nil
        }
    }
}

/// Packs symbols of a few bits each (base64's 6, base32's 5) into bytes, most significant
/// bit first.
struct BitPacker {
    private(set) var bytes: [UInt8] = []
    private var acc: UInt32 = 0
    private var bits = 0

    init(capacity: Int = 0) { bytes.reserveCapacity(capacity) }

    /// Whether the bits that did not fill a last byte are all zero.
    var leftoverIsZero: Bool { acc == 0 }

    mutating func append(_ symbol: UInt8, width: Int) {
        acc = acc << UInt32(width) | UInt32(symbol)
        bits += width
        if bits >= 8 {
            bits -= 8
            bytes.append(UInt8(truncatingIfNeeded: acc >> UInt32(bits)))
            acc &= (1 << UInt32(bits)) - 1
        }
    }
}

/// Base32 (RFC 4648 §6, alphabet `A–Z 2–7`), as used for TOTP secrets in otpauth:// URIs.
public enum Base32 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".utf8)

    /// Encodes in upper case; without padding by default (otpauth:// URIs omit it).
    public static func encode(_ b: [UInt8], padding: Bool = false) -> String {
        var out = [UInt8]()
        out.reserveCapacity((b.count + 4) / 5 * 8)
        var acc: UInt32 = 0
        var bits = 0
        for byte in b {
            acc = acc << 8 | UInt32(byte)
            bits += 8
            while bits >= 5 {
                bits -= 5
                out.append(alphabet[Int(acc >> UInt32(bits) & 31)])
            }
            acc &= (1 << UInt32(bits)) - 1
        }
        if bits > 0 { out.append(alphabet[Int(acc << UInt32(5 - bits) & 31)]) }
        if padding {
            while out.count % 8 != 0 { out.append(UInt8(ascii: "=")) }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes case-insensitively, ignoring spaces and `=`; nil on any other character or on a length that no
    /// encoder produces (1, 3 or 6 symbols in the last group). Trailing bits are not checked (secrets are
    /// often typed or pasted by hand).
    public static func decode(_ s: String) -> [UInt8]? {
        var out = BitPacker()
        var symbols = 0
        for c in s.utf8 {
            let v: UInt8
            switch c {
            case UInt8(ascii: " "), UInt8(ascii: "="):
                continue
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): v = c - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): v = c - UInt8(ascii: "a")
            case UInt8(ascii: "2")...UInt8(ascii: "7"): v = c - UInt8(ascii: "2") + 26
            default: return nil
            }
            symbols += 1
            out.append(v, width: 5)
        }
        switch symbols % 8 {
        case 1, 3, 6: return nil
        default: return out.bytes
        }
    }
}
