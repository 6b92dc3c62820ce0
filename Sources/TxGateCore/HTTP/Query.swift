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

    static func decode(_ s: Substring) -> String {
        let plus = s.replacingOccurrences(of: "+", with: " ")
        return plus.removingPercentEncoding ?? plus
    }

    /// Percent-encodes a query component (RFC 3986 unreserved characters stay).
    public static func encode(_ s: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return s.addingPercentEncoding(withAllowedCharacters: allowed) ?? s
    }
}
