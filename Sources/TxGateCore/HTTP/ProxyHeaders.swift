import HTTPCore

/// The header rules of a reverse proxy (RFC 9110 §7.6): what is removed, what is added.
public enum ProxyHeaders {
    /// Connection-specific fields that never cross a proxy.
    public static let hopByHop = ["Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer",
                                  "Transfer-Encoding", "Upgrade", "Proxy-Authorization", "Proxy-Authenticate"]

    public static func isHopByHop(_ name: String) -> Bool {
        for h in hopByHop where asciiCaseInsensitiveEquals(h, name) { return true }
        return false
    }

    /// Removes the hop-by-hop fields and every field the `Connection` header names.
    public static func removeHopByHop(_ headers: inout HTTPHeaders) {
        let named = headers.tokens("Connection")
        headers.removeAll { f in
            isHopByHop(f.name) || (!named.isEmpty && named.contains(f.name.lowercasedASCII()))
        }
    }

    /// The headers sent upstream for a client request.
    public static func upstreamRequest(_ client: HTTPHeaders, clientIP: String, isTLS: Bool,
                                       upstreamAuthority: String, requestId: String) -> HTTPHeaders {
        var h = client
        removeHopByHop(&h)
        let originalHost = h.first("Host")
        let priorXFF = h.values("X-Forwarded-For")
        h.removeAll { f in
            asciiCaseInsensitiveEquals(f.name, "Host") || asciiCaseInsensitiveEquals(f.name, "Content-Length")
                || asciiCaseInsensitiveEquals(f.name, "X-Forwarded-For") || asciiCaseInsensitiveEquals(f.name, "X-Forwarded-Proto")
                || asciiCaseInsensitiveEquals(f.name, "X-Forwarded-Host") || asciiCaseInsensitiveEquals(f.name, "X-Request-Id")
        }
        h.add("Host", upstreamAuthority)
        h.add("X-Forwarded-For", (priorXFF + [clientIP]).joined(separator: ", "))
        h.add("X-Forwarded-Proto", isTLS ? "https" : "http")
        if let originalHost { h.add("X-Forwarded-Host", originalHost) }
        h.add("X-Request-Id", requestId)
        return h
    }

    /// The headers sent to the client for an upstream response. Framing headers go too: the
    /// gateway frames the body itself, except for a HEAD response, whose Content-Length
    /// describes the body the client did not ask for.
    public static func clientResponse(_ upstream: HTTPHeaders, requestId: String, keepContentLength: Bool) -> HTTPHeaders {
        var h = upstream
        removeHopByHop(&h)
        h.removeAll { f in
            (!keepContentLength && asciiCaseInsensitiveEquals(f.name, "Content-Length"))
                || asciiCaseInsensitiveEquals(f.name, "X-Request-Id")
        }
        h.add("X-Request-Id", requestId)
        return h
    }

    /// A client-supplied request id, if it is safe to pass on (printable, bounded).
    public static func acceptableRequestId(_ value: String?) -> String? {
        guard let v = value, !v.isEmpty, v.utf8.count <= 200,
              v.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") }) else { return nil }
        return v
    }
}

/// Cheap, unique request ids: a random per-generator prefix and a counter. They need to be
/// unique, not secret, and generating one must not cost a system call per request.
public struct RequestIdGenerator {
    private let prefix: String
    private var counter: UInt64 = 0

    public init() {
        var rng = SystemRandomNumberGenerator()
        let a = rng.next() as UInt64
        prefix = String(a, radix: 16).leftPadded(to: 16)
    }

    public mutating func next() -> String {
        counter &+= 1
        return prefix + String(counter, radix: 16).leftPadded(to: 16)
    }
}

extension String {
    func leftPadded(to n: Int) -> String {
        count >= n ? self : String(repeating: "0", count: n - count) + self
    }
}
