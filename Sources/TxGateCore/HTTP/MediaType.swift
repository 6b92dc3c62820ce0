/// A `Content-Type` value (RFC 9110 §8.3.1): `type/subtype` and its parameters.
public struct MediaType: Equatable, Sendable {
    /// Lower case, as media types compare case-insensitively.
    public let type: String
    public let subtype: String
    /// Names in lower case; values unquoted, and as sent (except `charset`, lower-cased).
    public let parameters: [String: String]

    /// Parses one `Content-Type` value; nil if it is not `type/subtype *(; name=value)`, or
    /// names a parameter twice. A header sent twice should be joined with ", ", which makes it
    /// invalid here: there is no telling which one the backend reads.
    public init?(_ header: String) {
        let b = Array(header.utf8)
        var i = 0
        func skipOWS() { while i < b.count, b[i] == 0x20 || b[i] == 0x09 { i += 1 } }
        func token() -> String? {
            let start = i
            while i < b.count, Self.isTokenByte(b[i]) { i += 1 }
            return i > start ? String(decoding: b[start..<i], as: UTF8.self).lowercased() : nil
        }
        skipOWS()
        guard let type = token(), i < b.count, b[i] == UInt8(ascii: "/") else { return nil }
        i += 1
        guard let subtype = token() else { return nil }
        var parameters: [String: String] = [:]
        while true {
            skipOWS()
            guard i < b.count else { break }
            guard b[i] == UInt8(ascii: ";") else { return nil }
            i += 1
            skipOWS()
            if i == b.count || b[i] == UInt8(ascii: ";") { continue }   // an empty parameter is allowed
            guard let name = token(), i < b.count, b[i] == UInt8(ascii: "=") else { return nil }
            i += 1
            var value: String
            if i < b.count, b[i] == UInt8(ascii: "\"") {
                i += 1
                var raw: [UInt8] = []
                var closed = false
                while i < b.count {
                    let c = b[i]
                    i += 1
                    if c == UInt8(ascii: "\"") { closed = true; break }
                    if c == UInt8(ascii: "\\") {
                        guard i < b.count else { return nil }
                        raw.append(b[i])
                        i += 1
                    } else {
                        guard c == 0x09 || c >= 0x20, c != 0x7F else { return nil }
                        raw.append(c)
                    }
                }
                guard closed, let s = String(validating: raw, as: UTF8.self) else { return nil }
                value = s
            } else {
                let start = i
                while i < b.count, Self.isTokenByte(b[i]) { i += 1 }
                guard i > start else { return nil }
                value = String(decoding: b[start..<i], as: UTF8.self)
            }
            if name == "charset" { value = value.lowercased() }
            guard parameters.updateValue(value, forKey: name) == nil else { return nil }
        }
        self.type = type
        self.subtype = subtype
        self.parameters = parameters
    }

    /// `type/subtype`, lower case: `application/json`.
    public var essence: String { type + "/" + subtype }

    /// `application/json` or any `+json` type (RFC 6839), such as `application/merge-patch+json`.
    public var isJSON: Bool { (type == "application" && subtype == "json") || subtype.hasSuffix("+json") }

    public var isForm: Bool { type == "application" && subtype == "x-www-form-urlencoded" }

    /// The essence and every parameter, sorted by name: one text for one meaning.
    public var normalized: String {
        var out = essence
        for name in parameters.keys.sorted() {
            let v = parameters[name]!
            out += ";" + name + "=" + (!v.isEmpty && v.utf8.allSatisfy(Self.isTokenByte) ? v : Self.quoted(v))
        }
        return out
    }

    static func quoted(_ v: String) -> String {
        var out: [UInt8] = [UInt8(ascii: "\"")]
        for c in v.utf8 {
            if c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") { out.append(UInt8(ascii: "\\")) }
            out.append(c)
        }
        out.append(UInt8(ascii: "\""))
        return String(decoding: out, as: UTF8.self)
    }

    private static let tokenSymbols = Array("!#$%&'*+-.^_`|~".utf8)

    /// RFC 9110 tchar.
    static func isTokenByte(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return tokenSymbols.contains(c)
        }
    }
}
