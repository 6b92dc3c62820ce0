import HTTPCore

/// The header rules of a reverse proxy (RFC 9110 §7.6): what is removed, what is added.
/// Each direction is one pass over the fields (this runs for every request).
public enum ProxyHeaders {
    /// Connection-specific fields that never cross a proxy.
    public static let hopByHop = ["Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer",
                                  "Transfer-Encoding", "Upgrade", "Proxy-Authorization", "Proxy-Authenticate"]

    /// Fields a client may not send through, because a backend may trust them: method overrides
    /// (a backend's override middleware would execute another method than the one policy
    /// decided on), route overrides (`X-Original-URL`, `X-Rewrite-URL`: Symfony and IIS serve
    /// that path instead of the one decided on), the gateway's own identity header
    /// (`X-TxGate-User`), and client addresses (`Forwarded`, `X-Real-IP`, `True-Client-IP`,
    /// `X-Client-IP`: the gateway's own `X-Forwarded-For` says where the request came from).
    public static let clientOverrides = ["Forwarded", "X-HTTP-Method", "X-HTTP-Method-Override", "X-Method-Override",
                                         "X-Original-URL", "X-Rewrite-URL", "X-TxGate-User",
                                         "X-Real-IP", "True-Client-IP", "X-Client-IP"]

    enum Kind { case hopByHop, host, contentLength, forwardedFor, forwardedProto, forwardedHost, requestId, override, other }

    /// Classifies a field name by its length first, so most names cost one comparison.
    static func kind(_ name: String) -> Kind {
        name.withUTF8Bytes { kind($0) }
    }

    /// `kind` on a name's bytes (what the per-request passes read).
    static func kind(_ name: UnsafeBufferPointer<UInt8>) -> Kind {
        @inline(__always) func eq(_ known: StaticString) -> Bool { equalsLowercased(name, known) }
        switch name.count {
        case 2: return eq("te") ? .hopByHop : .other
        case 4: return eq("host") ? .host : .other
        case 7: return eq("upgrade") || eq("trailer") ? .hopByHop : .other
        case 9: return eq("forwarded") || eq("x-real-ip") ? .override : .other
        case 13: return eq("x-http-method") || eq("x-txgate-user") || eq("x-rewrite-url") ? .override : .other
        case 10: return eq("connection") || eq("keep-alive") ? .hopByHop : .other
        case 11: return eq("x-client-ip") ? .override : .other
        case 12: return eq("x-request-id") ? .requestId : .other
        case 14: return eq("content-length") ? .contentLength : eq("x-original-url") || eq("true-client-ip") ? .override : .other
        case 15: return eq("x-forwarded-for") ? .forwardedFor : .other
        case 16: return eq("proxy-connection") ? .hopByHop : eq("x-forwarded-host") ? .forwardedHost : .other
        case 17: return eq("transfer-encoding") ? .hopByHop : eq("x-forwarded-proto") ? .forwardedProto
            : eq("x-method-override") ? .override : .other
        case 18: return eq("proxy-authenticate") ? .hopByHop : .other
        case 19: return eq("proxy-authorization") ? .hopByHop : .other
        case 22: return eq("x-http-method-override") ? .override : .other
        default: return .other
        }
    }

    public static func isHopByHop(_ name: String) -> Bool { kind(name) == .hopByHop }

    /// Removes the hop-by-hop fields and every field the `Connection` header names.
    public static func removeHopByHop(_ headers: inout HTTPHeaders) {
        let named = headers.connectionNamedHeaders()
        headers.removeAll(whereName: { kind($0) == .hopByHop || isNamed($0, named) })
    }

    @inline(__always)
    static func isNamed(_ name: UnsafeBufferPointer<UInt8>, _ named: [String]) -> Bool {
        !named.isEmpty && named.contains { n in
            n.withUTF8Bytes { asciiCaseInsensitiveEquals($0, name) }
        }
    }

    /// The headers sent upstream for a client request. Besides the hop-by-hop fields, the
    /// client's overrides (`clientOverrides`), and any field whose name has an underscore are
    /// dropped: a backend (or a CGI-style one) may read `X_Forwarded_For` as `X-Forwarded-For`
    /// (nginx drops them too, `underscores_in_headers off`). `X-Forwarded-For` is the peer
    /// (`clientIP`) appended to the chain the client sent when that peer is a trusted proxy
    /// (`forwardedChain`, as nginx's `$proxy_add_x_forwarded_for`), and the peer alone
    /// otherwise: a chain nobody vouches for never reaches the backend.
    ///
    /// With `credentials`, the gateway's own are left out in the same pass (`GatewayCredentials`).
    ///
    /// Done in place on fields made of the client's (`ForwardedFields(client)`), which refer to
    /// the client's fields instead of copying them. (Built here and returned, the fields were
    /// copied once more on the way out: six more retains and releases per request.)
    public static func upstreamRequest(_ out: inout ForwardedFields, clientIP: String, forwardedChain: Bool = false,
                                       isTLS: Bool, upstreamAuthority: String, requestId: String,
                                       credentials: GatewayCredentials? = nil) {
        let client = out.client
        let named = client.connectionNamedHeaders()
        var originalHost: Int?
        var forwardedFor: String?
        var i = 0
        client.forEachRaw { f in
            defer { i += 1 }
            switch kind(f.name) {
            case .hopByHop, .contentLength, .forwardedProto, .forwardedHost, .requestId, .override:
                out.drop(at: i)
            case .host:
                out.drop(at: i)
                originalHost = i
            case .forwardedFor:
                out.drop(at: i)
                if forwardedChain {
                    let v = f.valueText
                    forwardedFor = forwardedFor.map { $0 + ", " + v } ?? v
                }
            case .other:
                if isNamed(f.name, named) || f.name.contains(0x5F) {
                    out.drop(at: i)
                } else if let credentials, let concern = credentials.concern(f.name) {
                    // The session's own field (every request of a session sends it) is dropped
                    // as bytes; only a Cookie or Authorization field is read as text.
                    if concern == .credential {
                        out.drop(at: i)
                        return
                    }
                    let field = f.field
                    if let kept = credentials.withoutCredentials(field) {
                        if kept != field { out.replace(at: i, with: kept) }
                    } else {
                        out.drop(at: i)
                    }
                }
            }
        }
        out.forwarding = ForwardedFields.Forwarding(host: upstreamAuthority,
                                                    forwardedFor: forwardedFor.map { $0 + ", " + clientIP } ?? clientIP,
                                                    tls: isTLS, forwardedHost: originalHost, requestId: requestId)
    }

    /// The headers sent to the client for an upstream response: the upstream's own fields that
    /// may cross (`forwardedResponseFields`), `X-Request-Id`, then the gateway's (`own`, e.g. its
    /// CORS answer). Built as `HTTPHeaders`; the proxy writes the same fields straight into the
    /// response head (`writeClientResponse`).
    public static func clientResponse(_ upstream: HTTPHeaders, requestId: String, keepContentLength: Bool,
                                      own: HTTPHeaders = HTTPHeaders()) -> HTTPHeaders {
        var h = HTTPHeaders()
        h.reserveCapacity(upstream.count + own.count + 1, bytes: upstream.byteCount + own.byteCount + 44)
        forwardedResponseFields(upstream, keepContentLength: keepContentLength, own: own) { h.append($0) }
        h.add("X-Request-Id", requestId)
        own.forEachRaw { h.append($0) }
        return h
    }

    /// `clientResponse`'s fields, written into a response head without building them first.
    public static func writeClientResponse(_ upstream: HTTPHeaders, requestId: String, keepContentLength: Bool,
                                           own: HTTPHeaders, into w: inout HeadWriter) {
        forwardedResponseFields(upstream, keepContentLength: keepContentLength, own: own) { w.writeField($0) }
        w.writeField("X-Request-Id", requestId)
        w.writeFields(own)
    }

    /// The upstream response fields that go to the client. Framing fields do not (the gateway
    /// frames the body itself), except a HEAD response's Content-Length, which describes the
    /// body the client did not ask for; nor does an `Access-Control-*` field the gateway sets
    /// itself in `own` (its CORS answer replaces the upstream's).
    static func forwardedResponseFields(_ upstream: HTTPHeaders, keepContentLength: Bool, own: HTTPHeaders,
                                        _ body: (HTTPHeaders.RawField) -> Void) {
        let named = upstream.connectionNamedHeaders()
        let replaced = own.count == 0 ? [] : own.fields.map(\.name).filter { $0.hasPrefix("Access-Control-") }
        upstream.forEachRaw { f in
            switch kind(f.name) {
            case .hopByHop, .requestId:
                return
            case .contentLength:
                if keepContentLength { body(f) }
            default:
                if !isNamed(f.name, named) && !isNamed(f.name, replaced) { body(f) }
            }
        }
    }

    /// A client-supplied request id, if it is safe to pass on (printable, bounded).
    public static func acceptableRequestId(_ value: String?) -> String? {
        guard let v = value, !v.isEmpty, v.utf8.count <= 200,
              v.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") }) else { return nil }
        return v
    }
}

/// The gateway's own credentials, which never go upstream: the session token (its header, its
/// cookie, or the bearer token it came in) and `X-TxID`. The backend gets the identity headers
/// the gateway decides on, never a replayable token.
public struct GatewayCredentials: Sendable {
    public var cookieName: String
    /// The token the request was identified by, dropped when it came as `Authorization: Bearer`.
    public var bearerToken: String?

    public init(cookieName: String, bearerToken: String?) {
        self.cookieName = cookieName
        self.bearerToken = bearerToken
    }

    /// What a field of this name may carry of the gateway's credentials. The one list of
    /// those names: `ProxyHeaders.upstreamRequest`'s pass over the bytes and `withoutCredentials`
    /// both ask it.
    enum Concern { case credential, authorization, cookie }

    func concern(_ name: UnsafeBufferPointer<UInt8>) -> Concern? {
        if equalsLowercased(name, "x-txid") || cookieName.withUTF8Bytes({ asciiCaseInsensitiveEquals($0, name) }) {
            return .credential
        }
        if bearerToken != nil && equalsLowercased(name, "authorization") { return .authorization }
        return equalsLowercased(name, "cookie") ? .cookie : nil
    }

    /// `f` as it may go upstream: nil when it is a credential, a `Cookie` without the session
    /// cookie (nil when nothing else is left), any other field as it is.
    public func withoutCredentials(_ f: HTTPHeaders.Field) -> HTTPHeaders.Field? {
        switch f.name.withUTF8Bytes({ concern($0) }) {
        case nil:
            return f
        case .credential:
            return nil
        case .authorization:
            guard let bearerToken, f.value.utf8.count == bearerToken.utf8.count + 7, f.value.hasSuffix(bearerToken) else { return f }
            return nil
        case .cookie:
            break
        }
        let kept = f.value.split(byte: UInt8(ascii: ";")).filter { pair in
            pair.split(byte: UInt8(ascii: "="), maxSplits: 1).first.map { $0.trimmingOWS() != cookieName } ?? true
        }.map { $0.trimmingOWS() }
        return kept.isEmpty ? nil : HTTPHeaders.Field(name: f.name, value: kept.joined(separator: "; "))
    }
}

/// Cheap, unique request ids: a random per-generator prefix and a counter, in 15 characters of
/// the URL-safe base64 alphabet (8 for 48 random bits, 7 for a 42-bit counter; a new prefix when
/// the counter runs out). They need to be unique, not secret, and making one must cost no
/// system call and no allocation: a String of at most 15 bytes is stored inline, where the
/// 32 hex digits of before cost a heap allocation per request (~900 instructions with its release).
public struct RequestIdGenerator {
    private var prefix: UInt64
    private var counter: UInt64

    public init() {
        self.init(prefix: Self.randomPrefix(), counter: 0)
    }

    init(prefix: UInt64, counter: UInt64) {
        self.prefix = prefix
        self.counter = counter
    }

    public mutating func next() -> String {
        counter &+= 1
        if counter >> 42 != 0 {
            prefix = Self.randomPrefix()
            counter = 1
        }
        let p = prefix, n = counter
        return String(unsafeUninitializedCapacity: 15) { out in
            let digits = Self.alphabet.utf8Start
            for i in 0..<8 { out[i] = digits[Int(p >> UInt64(42 - 6 * i) & 63)] }
            for i in 0..<7 { out[8 + i] = digits[Int(n >> UInt64(36 - 6 * i) & 63)] }
            return 15
        }
    }

    private static func randomPrefix() -> UInt64 {
        var rng = SystemRandomNumberGenerator()
        return rng.next() & (1 << 48 - 1)
    }

    static let alphabet: StaticString = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
}

extension String {
    func leftPadded(to n: Int) -> String {
        count >= n ? self : String(repeating: "0", count: n - count) + self
    }
}
