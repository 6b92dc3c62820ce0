/// The header fields a proxy sends upstream for a client's request, without copying them:
/// the client's fields it keeps (in their order, as their bytes), then the forwarding fields it
/// sets (`Forwarding`), then the fields it adds. The client's fields are read from the client's
/// headers when the head is written (`forEachRaw`, `HeadWriter.writeFields`), so a proxied
/// request builds no second set of headers: building one cost ~2,800 instructions per request
/// (two buffers allocated, every kept name and value copied, five fields appended).
public struct ForwardedFields: Sendable {
    /// The client's fields, the ones dropped included.
    public let client: HTTPHeaders
    private var dropped = FieldSet()
    /// Client fields forwarded with another value (bit set in `dropped` too), in field order.
    private var replacements: [Replacement] = []
    /// The proxy's forwarding fields, written after the client's.
    public var forwarding: Forwarding?
    /// Fields added after the forwarding fields (`add`): as `Field`s, one array holding the
    /// strings given (as `HTTPHeaders`, their bytes were copied into two new buffers).
    private var added: [HTTPHeaders.Field] = []

    /// The fields the proxy sets for every request it forwards.
    public struct Forwarding: Sendable {
        /// `Host`: the upstream's authority.
        public var host: String
        /// `X-Forwarded-For`.
        public var forwardedFor: String
        /// `X-Forwarded-Proto`: `https` or `http`.
        public var tls: Bool
        /// `X-Forwarded-Host`: the client field at this index (its `Host`), if any.
        public var forwardedHost: Int?
        /// `X-Request-Id`.
        public var requestId: String

        public init(host: String, forwardedFor: String, tls: Bool, forwardedHost: Int?, requestId: String) {
            self.host = host
            self.forwardedFor = forwardedFor
            self.tls = tls
            self.forwardedHost = forwardedHost
            self.requestId = requestId
        }
    }

    struct Replacement: Sendable {
        var index: Int
        var field: HTTPHeaders.Field
    }

    /// Every field of `client`, nothing dropped or added yet.
    public init(_ client: HTTPHeaders) { self.client = client }

    /// The client's field at `index` is not forwarded.
    public mutating func drop(at index: Int) {
        dropped.insert(index)
        if !replacements.isEmpty { replacements.removeAll { $0.index == index } }
    }

    /// The client's field at `index` is forwarded as `field` instead (in its place).
    public mutating func replace(at index: Int, with field: HTTPHeaders.Field) {
        dropped.insert(index)
        replacements.removeAll { $0.index == index }
        replacements.append(Replacement(index: index, field: field))
        replacements.sort { $0.index < $1.index }
    }

    /// Adds a field after the forwarding fields.
    public mutating func add(_ name: String, _ value: String) { added.append(HTTPHeaders.Field(name: name, value: value)) }

    /// Removes the client's fields and the added fields called `name` (the forwarding fields
    /// are the proxy's and stay).
    public mutating func remove(_ name: String) {
        name.withUTF8Bytes { n in
            var i = 0
            client.forEachRaw { f in
                if asciiCaseInsensitiveEquals(f.name, n) { dropped.insert(i) }
                i += 1
            }
        }
        if !replacements.isEmpty {
            replacements.removeAll { asciiCaseInsensitiveEquals($0.field.name, name) }
        }
        if !added.isEmpty { added.removeAll { asciiCaseInsensitiveEquals($0.name, name) } }
    }

    /// Calls `body` with each field that goes upstream, in order, as bytes.
    public func forEachRaw(_ body: (HTTPHeaders.RawField) -> Void) {
        var i = 0, r = 0
        client.forEachRaw { f in
            defer { i += 1 }
            guard dropped.contains(i) else { return body(f) }
            guard r < replacements.count, replacements[r].index == i else { return }
            let field = replacements[r].field
            r += 1
            Self.withRaw(field, body)
        }
        if let fw = forwarding {
            @inline(__always) func field(_ name: StaticString, _ value: UnsafeBufferPointer<UInt8>, isUTF8: Bool = true) {
                body(HTTPHeaders.RawField(name: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount),
                                          value: value, isUTF8: isUTF8))
            }
            fw.host.withUTF8Bytes { field("Host", $0) }
            fw.forwardedFor.withUTF8Bytes { field("X-Forwarded-For", $0) }
            let proto: StaticString = fw.tls ? "https" : "http"
            field("X-Forwarded-Proto", UnsafeBufferPointer(start: proto.utf8Start, count: proto.utf8CodeUnitCount))
            if let h = fw.forwardedHost, h < client.count {
                client.withRaw(at: h) { field("X-Forwarded-Host", $0.value, isUTF8: $0.isUTF8) }
            }
            fw.requestId.withUTF8Bytes { field("X-Request-Id", $0) }
        }
        for field in added { Self.withRaw(field, body) }
    }

    /// `body` with `field` as bytes: the bytes received when they are not UTF-8.
    private static func withRaw(_ field: HTTPHeaders.Field, _ body: (HTTPHeaders.RawField) -> Void) {
        field.name.withUTF8Bytes { name in
            if let received = field.received {
                received.withUnsafeBufferPointer { body(HTTPHeaders.RawField(name: name, value: $0, isUTF8: false)) }
            } else {
                field.value.withUTF8Bytes { body(HTTPHeaders.RawField(name: name, value: $0, isUTF8: true)) }
            }
        }
    }

    /// The fields as `HTTPHeaders` (a copy: for tests and for callers that need one).
    public var headers: HTTPHeaders {
        var h = HTTPHeaders()
        forEachRaw { h.append($0) }
        return h
    }
}

/// A set of field indices: the first 64 in one word, kept inline (requests rarely have more
/// fields), the rest in words allocated when needed.
struct FieldSet: Sendable {
    private var low: UInt64 = 0
    private var high: [UInt64] = []

    @inline(__always)
    func contains(_ i: Int) -> Bool {
        if i < 64 { return low & (1 << UInt64(i)) != 0 }
        let w = (i - 64) >> 6
        return w < high.count && high[w] & (1 << UInt64((i - 64) & 63)) != 0
    }

    mutating func insert(_ i: Int) {
        if i < 64 { low |= 1 << UInt64(i); return }
        let w = (i - 64) >> 6
        while high.count <= w { high.append(0) }
        high[w] |= 1 << UInt64((i - 64) & 63)
    }
}

extension HeadWriter {
    /// The fields a proxy forwards, from the client's bytes and its own.
    public mutating func writeFields(_ fields: ForwardedFields) {
        fields.forEachRaw { writeField($0) }
    }
}
