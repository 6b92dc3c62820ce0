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
        var out = [UInt8]()
        out.reserveCapacity((b.count + 2) / 3 * 4)
        var i = 0
        while i + 3 <= b.count {
            let v = UInt32(b[i]) << 16 | UInt32(b[i + 1]) << 8 | UInt32(b[i + 2])
            out.append(alphabet[Int(v >> 18 & 63)])
            out.append(alphabet[Int(v >> 12 & 63)])
            out.append(alphabet[Int(v >> 6 & 63)])
            out.append(alphabet[Int(v & 63)])
            i += 3
        }
        switch b.count - i {
        case 1:
            let v = UInt32(b[i]) << 16
            out.append(alphabet[Int(v >> 18 & 63)])
            out.append(alphabet[Int(v >> 12 & 63)])
            if padding { out.append(contentsOf: [UInt8(ascii: "="), UInt8(ascii: "=")]) }
        case 2:
            let v = UInt32(b[i]) << 16 | UInt32(b[i + 1]) << 8
            out.append(alphabet[Int(v >> 18 & 63)])
            out.append(alphabet[Int(v >> 12 & 63)])
            out.append(alphabet[Int(v >> 6 & 63)])
            if padding { out.append(UInt8(ascii: "=")) }
        default:
            break
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func decode(_ s: String, table: [UInt8]) -> [UInt8]? {
        var chars = Array(s.utf8)
        // Padding, if present, must complete the last quantum: total length a multiple of 4, at most two '='.
        var pad = 0
        while let last = chars.last, last == UInt8(ascii: "=") {
            chars.removeLast()
            pad += 1
        }
        if pad > 0 {
            guard pad <= 2, (chars.count + pad) % 4 == 0 else { return nil }
        }
        let rem = chars.count % 4
        guard rem != 1 else { return nil }
        if pad > 0 && rem == 0 { return nil }

        var out = BitPacker(capacity: chars.count / 4 * 3 + 2)
        for c in chars {
            let v = table[Int(c)]
            guard v != 0xFF else { return nil }
            out.append(v, width: 6)
        }
        // Leftover bits (2 or 4) must be zero for a canonical encoding.
        guard out.leftoverIsZero else { return nil }
        return out.bytes
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
