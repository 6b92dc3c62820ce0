import Foundation

/// The query of a request target, decoded (`+` is a space, `%XX` escapes), order kept.
public struct Query: Sendable {
    public let pairs: [(name: String, value: String)]

    public init(target: String) {
        self.init(string: target.firstIndex(of: "?").map { String(target[target.index(after: $0)...]) } ?? "")
    }

    public init(string: String) {
        pairs = string.split(separator: "&", omittingEmptySubsequences: true).map { part in
            let kv = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (Self.decode(kv[0]), kv.count > 1 ? Self.decode(kv[1]) : "")
        }
    }

    public subscript(name: String) -> String? { pairs.first { $0.name == name }?.value }

    /// `+` is a space and `%XX` a byte. A malformed escape, or escapes that do not make UTF-8,
    /// leave the `%` sequences as they are (only `+` decoded).
    static func decode(_ s: Substring) -> String {
        let raw = s.utf8
        guard raw.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "%") }) else { return String(s) }
        var out: [UInt8] = []
        out.reserveCapacity(raw.count)
        var i = raw.startIndex
        var escapesOK = true
        while i != raw.endIndex {
            let b = raw[i]
            if b == UInt8(ascii: "%") {
                let h = raw.index(after: i)
                if h != raw.endIndex, raw.index(after: h) != raw.endIndex,
                   let hi = hexValue(raw[h]), let lo = hexValue(raw[raw.index(after: h)]) {
                    out.append(hi << 4 | lo)
                    i = raw.index(h, offsetBy: 2)
                    continue
                }
                escapesOK = false
                break
            }
            out.append(b == UInt8(ascii: "+") ? 0x20 : b)
            i = raw.index(after: i)
        }
        if escapesOK, let decoded = String(validating: out, as: UTF8.self) { return decoded }
        return String(decoding: raw.map { $0 == UInt8(ascii: "+") ? 0x20 : $0 }, as: UTF8.self)
    }

    private static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return b - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return b - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return b - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// Percent-encodes a query component (RFC 3986 unreserved characters stay).
    public static func encode(_ s: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return s.addingPercentEncoding(withAllowedCharacters: allowed) ?? s
    }
}
