import Foundation

/// Where a login may send the browser afterwards: only to the gateway's own origin, so that
/// `goto` can never be an open redirect.
public struct GotoPolicy: Sendable {
    public let origin: HTTPURL

    public init(origin: HTTPURL) { self.origin = origin }

    /// The URL to follow, or nil if `goto` points anywhere else.
    public func validate(_ goto: String) -> String? {
        guard !goto.isEmpty, goto.utf8.allSatisfy({ $0 > 0x20 && $0 != 0x7F }) else { return nil }
        if goto.hasPrefix("/") {
            // "//host" and "/\host" are protocol-relative in browsers.
            if goto.hasPrefix("//") || goto.hasPrefix("/\\") { return nil }
            return goto
        }
        guard let u = HTTPURL(parsingAllowingQuery: goto), origin.isSameOrigin(u) else { return nil }
        return goto
    }
}

extension HTTPURL {
    /// Like `init(parsing:)` but the URL may carry a query (a `goto` does).
    init?(parsingAllowingQuery s: String) {
        guard var c = URLComponents(string: s), c.user == nil, c.password == nil else { return nil }
        c.query = nil
        c.fragment = nil
        c.path = ""
        guard let base = c.string, let u = HTTPURL(parsing: base) else { return nil }
        self = u
    }

    /// Whether an `Origin` header names the gateway's own origin (scheme, host, port).
    public func isSameOrigin(_ header: String) -> Bool {
        guard let u = HTTPURL(parsingAllowingQuery: header) else { return false }
        return isSameOrigin(u)
    }

    func isSameOrigin(_ u: HTTPURL) -> Bool {
        u.scheme == scheme && u.host.lowercased() == host.lowercased() && u.port == port
    }
}
