import Foundation

/// The query of a request target, decoded (`+` is a space, `%XX` escapes), order kept.
public struct Query: Sendable {
    public let pairs: [(name: String, value: String)]

    public init(target: String) {
        // The query read where it lies in the target, not copied out first.
        self.init(target.utf8.firstIndex(of: UInt8(ascii: "?")).map { target[target.index(after: $0)...] } ?? "")
    }

    public init(string: String) {
        self.init(string[...])
    }

    private init(_ string: Substring) {
        // On the bytes `&` and `=`, as the URL standard's urlencoded parser does.
        pairs = string.split(byte: UInt8(ascii: "&")).map { part in
            guard let eq = part.utf8.firstIndex(of: UInt8(ascii: "=")) else { return (Self.decode(part), "") }
            return (Self.decode(part[..<eq]), Self.decode(part[part.utf8.index(after: eq)...]))
        }
    }

    /// Pairs already decoded.
    public init(pairs: [(name: String, value: String)]) { self.pairs = pairs }

    public subscript(name: String) -> String? { pairs.first { $0.name == name }?.value }

    /// The same query without the pairs named `name`.
    public func without(_ name: String) -> Query { Query(pairs: pairs.filter { $0.name != name }) }

    /// `+` is a space and `%XX` a byte. A malformed escape, or escapes that do not make UTF-8,
    /// leave the `%` sequences as they are (only `+` decoded).
    package static func decode(_ s: Substring) -> String {
        guard s.utf8.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "%") }) else { return String(s) }
        return PercentEncoding.decode(s, plusIsSpace: true)
            ?? String(decoding: s.utf8.map { $0 == UInt8(ascii: "+") ? 0x20 : $0 }, as: UTF8.self)
    }

    /// Percent-encodes a query component (RFC 3986 unreserved characters stay).
    public static func encode(_ s: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return s.addingPercentEncoding(withAllowedCharacters: allowed) ?? s
    }
}
