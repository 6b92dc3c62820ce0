#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An ordered list of header fields. Names compare ASCII case-insensitively; order and
/// duplicates are kept, because a proxy must forward what it received.
///
/// The fields are kept as bytes: one buffer holds every name and value (a parsed head's header
/// block copied once), and each field is a pair of ranges into it. A field becomes `String`s
/// only when it is read as a `Field` (`first`, iteration); forwarding, framing and the proxy's
/// header rules work on the bytes (`forEachRaw`, `append(_: RawField)`), so a proxied request
/// builds no String per header on either side.
public struct HTTPHeaders: Sequence, Sendable, Equatable {
    public struct Field: Sendable, Equatable {
        public var name: String
        /// The value as text. Bytes that are not UTF-8 (obs-text, RFC 9110 §5.5: Latin-1 from
        /// old clients) read as U+FFFD here; `received` keeps them. Setting it drops `received`.
        public var value: String { didSet { received = nil } }
        /// The value's bytes as received, only when they are not valid UTF-8: a proxy forwards
        /// what it received, and `HeadWriter` writes these instead of `value`.
        public private(set) var received: [UInt8]?

        public init(name: String, value: String) { self.name = name; self.value = value }

        /// A field read off the wire: `value` decoded, the bytes kept when they are not UTF-8.
        public init(name: String, bytes: UnsafeBufferPointer<UInt8>) {
            self.init(name: name, bytes: bytes, isUTF8: String(validating: bytes, as: UTF8.self) != nil)
        }

        init(name: String, bytes: UnsafeBufferPointer<UInt8>, isUTF8: Bool) {
            self.name = name
            value = String(decoding: bytes, as: UTF8.self)
            if !isUTF8 { received = Array(bytes) }
        }
    }

    /// One field as bytes, valid only inside the `forEachRaw` call that hands it out.
    public struct RawField {
        public let name: UnsafeBufferPointer<UInt8>
        public let value: UnsafeBufferPointer<UInt8>
        /// Whether `value` is valid UTF-8 (false: obs-text, forwarded as it is).
        public let isUTF8: Bool

        @usableFromInline
        init(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>, isUTF8: Bool) {
            self.name = name
            self.value = value
            self.isUTF8 = isUTF8
        }

        /// The value as text (as `field.value`, without making the name a String too).
        public var valueText: String { String(decoding: value, as: UTF8.self) }

        /// The field as text.
        public var field: Field {
            Field(name: String(decoding: name, as: UTF8.self), bytes: value, isUTF8: isUTF8)
        }
    }

    /// Where one field's name and value lie in `storage`.
    @usableFromInline
    struct Entry: Sendable {
        @usableFromInline var nameStart: Int32
        @usableFromInline var nameCount: Int32
        @usableFromInline var valueStart: Int32
        @usableFromInline var valueCount: Int32
        @usableFromInline var isUTF8: Bool
    }

    /// What the parser saw of the fields that frame a message and scope its connection, so
    /// that the questions asked of every message (`framingFields`, keep-alive, the names
    /// `Connection` lists) need no second pass over the fields. Nil once the fields change.
    @usableFromInline
    struct Noted: Sendable {
        /// The index of the one Content-Length field; -1 when there is none, -2 when several.
        var contentLength = -1
        var transferEncoding = false
        var connectionClose = false
        var connectionKeepAlive = false
        /// `Connection` lists another token than `close` and `keep-alive`.
        var connectionOther = false

        mutating func noteConnection(_ value: UnsafeBufferPointer<UInt8>) {
            _ = scanTokens(value) { s, e in
                let token = UnsafeBufferPointer(rebasing: value[s..<e])
                if equalsLowercased(token, "close") {
                    connectionClose = true
                } else if equalsLowercased(token, "keep-alive") {
                    connectionKeepAlive = true
                } else {
                    connectionOther = true
                }
                return false
            }
        }
    }

    @usableFromInline var storage: [UInt8]
    @usableFromInline var entries: [Entry]
    @usableFromInline var noted: Noted?

    public init() {
        storage = []
        entries = []
    }

    public init(_ pairs: [(String, String)]) {
        storage = []
        entries = []
        for (name, value) in pairs { add(name, value) }
    }

    /// Empties these headers and gives them `block` (a parser's header block) as their bytes,
    /// fields then added with `appendParsed`. The buffers they already have are reused when
    /// nothing else holds them (a connection's spare, its previous message's headers: no
    /// allocation per message); buffers something else still holds are left to it (copy on
    /// write makes new ones).
    mutating func reset(block: UnsafeBufferPointer<UInt8>) {
        storage.replaceSubrange(0..<storage.count, with: block)
        entries.removeAll(keepingCapacity: true)
        if entries.capacity < 16 { entries.reserveCapacity(16) }
        noted = Noted()
    }

    /// Whether these headers' buffers are small enough to keep for a next message
    /// (`HeadersSpare`, a pool of them): a large head's buffers are not held on to.
    public var isWorthKeeping: Bool { storage.capacity <= 4096 && entries.capacity <= 64 }

    /// A field of the block given to `init(block:)`, by its offsets in it (`name` and `value`
    /// are its bytes there), noted when it frames the message or scopes the connection.
    @inline(__always)
    mutating func appendParsed(name: Range<Int>, value: Range<Int>, isUTF8: Bool,
                               _ nameBytes: UnsafeBufferPointer<UInt8>, _ valueBytes: UnsafeBufferPointer<UInt8>) {
        switch name.count {
        case 10 where equalsLowercased(nameBytes, "connection"):
            noted?.noteConnection(valueBytes)
        case 14 where equalsLowercased(nameBytes, "content-length"):
            let first = noted?.contentLength == -1
            noted?.contentLength = first ? entries.count : -2
        case 17 where equalsLowercased(nameBytes, "transfer-encoding"):
            noted?.transferEncoding = true
        default:
            break
        }
        entries.append(Entry(nameStart: Int32(name.lowerBound), nameCount: Int32(name.count),
                             valueStart: Int32(value.lowerBound), valueCount: Int32(value.count), isUTF8: isUTF8))
    }

    /// Transfer-Encoding and Content-Length, each joined with ", " when repeated: from what
    /// the parser noted when it can say, else one pass over the names' bytes; a String only
    /// for the fields found.
    func framingFields() -> (te: String?, cl: String?) {
        if let noted, !noted.transferEncoding, noted.contentLength != -2 {
            return (nil, noted.contentLength >= 0 ? withRaw(at: noted.contentLength) { $0.valueText } : nil)
        }
        var te: String?, cl: String?
        forEachRaw { f in
            switch f.name.count {
            case 17 where equalsLowercased(f.name, "transfer-encoding"):
                let v = f.valueText
                te = te.map { $0 + ", " + v } ?? v
            case 14 where equalsLowercased(f.name, "content-length"):
                let v = f.valueText
                cl = cl.map { $0 + ", " + v } ?? v
            default:
                break
            }
        }
        return (te, cl)
    }

    /// What the parser's notes say of the framing fields, without a String: no Transfer-Encoding
    /// and no Content-Length (`none`), or no Transfer-Encoding and one Content-Length of plain
    /// digits (`length`); `unknown` otherwise (`framingFields` reads them).
    enum NotedFraming: Equatable { case none, length(Int), unknown }

    func notedFraming() -> NotedFraming {
        guard let noted, !noted.transferEncoding, noted.contentLength != -2 else { return .unknown }
        guard noted.contentLength >= 0 else { return .none }
        return withRaw(at: noted.contentLength) { f in plainDecimal(f.value).map(NotedFraming.length) ?? .unknown }
    }

    /// Whether `Connection` lists `close` (HTTP/1.1: the connection ends after this message).
    public var connectionClose: Bool { noted?.connectionClose ?? hasToken("Connection", "close") }

    /// Whether `Connection` lists `keep-alive` (HTTP/1.0: the connection stays open).
    public var connectionKeepAlive: Bool { noted?.connectionKeepAlive ?? hasToken("Connection", "keep-alive") }

    public var count: Int { entries.count }

    public func makeIterator() -> Iterator { Iterator(headers: self) }

    public struct Iterator: IteratorProtocol {
        let headers: HTTPHeaders
        var index = 0
        public mutating func next() -> Field? {
            guard index < headers.entries.count else { return nil }
            defer { index += 1 }
            return headers.field(at: index)
        }
    }

    /// Every field as text (a copy; `forEachRaw` reads them without one).
    public var fields: [Field] { (0..<entries.count).map(field(at:)) }

    public func field(at i: Int) -> Field {
        storage.withUnsafeBufferPointer { raw(entries[i], $0).field }
    }

    @inlinable @inline(__always)
    func raw(_ e: Entry, _ b: UnsafeBufferPointer<UInt8>) -> RawField {
        let base = b.baseAddress ?? UnsafePointer(bitPattern: 1)!
        return RawField(name: UnsafeBufferPointer(start: base + Int(e.nameStart), count: Int(e.nameCount)),
                        value: UnsafeBufferPointer(start: base + Int(e.valueStart), count: Int(e.valueCount)),
                        isUTF8: e.isUTF8)
    }

    /// Calls `body` with each field's bytes, in order, without making a String.
    @inlinable
    public func forEachRaw(_ body: (RawField) throws -> Void) rethrows {
        try storage.withUnsafeBufferPointer { b in
            for e in entries { try body(raw(e, b)) }
        }
    }

    /// Calls `body` with the field at `i` as bytes.
    @inlinable
    func withRaw<R>(at i: Int, _ body: (RawField) throws -> R) rethrows -> R {
        try storage.withUnsafeBufferPointer { try body(raw(entries[i], $0)) }
    }

    /// The first field for which `body` returns a value, and that value.
    @inlinable
    func firstRaw<R>(_ body: (RawField) -> R?) -> R? {
        storage.withUnsafeBufferPointer { b in
            for e in entries { if let r = body(raw(e, b)) { return r } }
            return nil
        }
    }

    public mutating func add(_ name: String, _ value: String) {
        name.withUTF8Bytes { n in value.withUTF8Bytes { v in append(name: n, value: v, isUTF8: true) } }
    }

    /// Appends a field given as bytes (another `HTTPHeaders`' `RawField`: forwarded as it is).
    public mutating func append(_ raw: RawField) {
        append(name: raw.name, value: raw.value, isUTF8: raw.isUTF8)
    }

    public mutating func append(_ field: Field) {
        field.name.withUTF8Bytes { n in
            if let received = field.received {
                received.withUnsafeBufferPointer { append(name: n, value: $0, isUTF8: false) }
            } else {
                field.value.withUTF8Bytes { append(name: n, value: $0, isUTF8: true) }
            }
        }
    }

    mutating func append(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>, isUTF8: Bool) {
        noted = nil
        let start = storage.count
        // Fields built one by one (a reply's, those added to a forwarded request) start from
        // empty arrays: room for a few at once, instead of growing both arrays at the first
        // fields (each growth is an allocation and a copy).
        if entries.capacity == 0 { entries.reserveCapacity(4) }
        let needed = start + name.count + value.count
        if needed > storage.capacity { storage.reserveCapacity(Swift.max(needed + 128, 2 * storage.capacity)) }
        storage.append(contentsOf: name)
        storage.append(contentsOf: value)
        entries.append(Entry(nameStart: Int32(start), nameCount: Int32(name.count),
                             valueStart: Int32(start + name.count), valueCount: Int32(value.count), isUTF8: isUTF8))
    }

    /// Replaces every field called `name` with one field.
    public mutating func set(_ name: String, _ value: String) {
        remove(name)
        add(name, value)
    }

    public mutating func remove(_ name: String) {
        name.withUTF8Bytes { n in removeAll(whereName: { asciiCaseInsensitiveEquals($0, n) }) }
    }

    /// Removes the fields `shouldRemove` picks, keeping the others' order.
    public mutating func removeAll(where shouldRemove: (Field) -> Bool) {
        let drop = (0..<entries.count).map { shouldRemove(field(at: $0)) }
        guard drop.contains(true) else { return }
        entries = entries.indices.filter { !drop[$0] }.map { entries[$0] }
        noted = nil
    }

    /// Removes the fields whose name `shouldRemove` picks, keeping the others' order (their
    /// bytes stay in the buffer until the headers are copied).
    public mutating func removeAll(whereName shouldRemove: (UnsafeBufferPointer<UInt8>) -> Bool) {
        let kept = storage.withUnsafeBufferPointer { b in entries.filter { !shouldRemove(raw($0, b).name) } }
        if kept.count != entries.count {
            entries = kept
            noted = nil
        }
    }

    public func first(_ name: String) -> String? {
        name.withUTF8Bytes { n in
            firstRaw { f in asciiCaseInsensitiveEquals(f.name, n) ? f.valueText : nil }
        }
    }

    public func values(_ name: String) -> [String] {
        var out: [String] = []
        name.withUTF8Bytes { n in forEachRaw { f in if asciiCaseInsensitiveEquals(f.name, n) { out.append(f.valueText) } } }
        return out
    }

    public func contains(_ name: String) -> Bool {
        name.withUTF8Bytes { n in firstRaw { asciiCaseInsensitiveEquals($0.name, n) ? true : nil } } ?? false
    }

    /// The comma-separated tokens of every field called `name`, lowercased and trimmed
    /// (as in `Connection: close, Upgrade`).
    public func tokens(_ name: String) -> [String] {
        var out: [String] = []
        for value in values(name) {
            for part in value.split(separator: ",") {
                let t = part.trimmingOWS()
                if !t.isEmpty { out.append(t.lowercasedASCII()) }
            }
        }
        return out
    }

    /// Whether any field called `name` lists `token` (case-insensitively) among its
    /// comma-separated values. No allocation: it runs for every message.
    public func hasToken(_ name: String, _ token: String) -> Bool {
        name.withUTF8Bytes { n in
            token.withUTF8Bytes { t in
                firstRaw { f in
                    asciiCaseInsensitiveEquals(f.name, n) && scanTokens(f.value) { s, e in
                        asciiCaseInsensitiveEquals(UnsafeBufferPointer(rebasing: f.value[s..<e]), t)
                    } ? true : nil
                } ?? false
            }
        }
    }

    /// The header names that `Connection` declares hop-by-hop (its tokens other than `close`
    /// and `keep-alive`). Empty, without allocating, in the common case.
    public func connectionNamedHeaders() -> [String] {
        if let noted, !noted.connectionOther { return [] }
        var out: [String] = []
        forEachRaw { f in
            guard f.name.count == 10, equalsLowercased(f.name, "connection") else { return }
            _ = scanTokens(f.value) { s, e in
                let token = UnsafeBufferPointer(rebasing: f.value[s..<e])
                if !equalsLowercased(token, "close") && !equalsLowercased(token, "keep-alive") {
                    out.append(String(decoding: token, as: UTF8.self))
                }
                return false
            }
        }
        return out
    }

    /// Room for `n` fields and `bytes` bytes of names and values.
    public mutating func reserveCapacity(_ n: Int, bytes: Int = 0) {
        entries.reserveCapacity(n)
        if bytes > 0 { storage.reserveCapacity(bytes) }
    }

    /// The bytes of names and values the fields hold (a size hint for a copy).
    public var byteCount: Int { storage.count }

    /// Sum of the wire size of the fields ("Name: value\r\n").
    public var wireSize: Int { entries.reduce(0) { $0 + Int($1.nameCount) + Int($1.valueCount) + 4 } }

    /// Equal when the same names and values (as bytes) come in the same order.
    public static func == (a: HTTPHeaders, b: HTTPHeaders) -> Bool {
        guard a.entries.count == b.entries.count else { return false }
        return a.storage.withUnsafeBufferPointer { pa in
            b.storage.withUnsafeBufferPointer { pb in
                for (x, y) in zip(a.entries, b.entries) {
                    let fa = a.raw(x, pa), fb = b.raw(y, pb)
                    guard fa.name.elementsEqual(fb.name), fa.value.elementsEqual(fb.value) else { return false }
                }
                return true
            }
        }
    }
}

/// A Content-Length of 1 to 18 plain digits (no sign, no space, no list: what nearly every
/// message sends) as its value; nil for anything else, which the general path reads.
func plainDecimal(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
    guard !bytes.isEmpty, bytes.count <= 18 else { return nil }
    var n = 0
    for b in bytes {
        guard b >= 0x30 && b <= 0x39 else { return nil }
        n = n * 10 + Int(b &- 0x30)
    }
    return n
}

@inline(__always) @usableFromInline
func lowerASCII(_ b: UInt8) -> UInt8 { (b >= 65 && b <= 90) ? b | 0x20 : b }

/// Whether two header names, as bytes, are equal ASCII case-insensitively.
@inlinable
public func asciiCaseInsensitiveEquals(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Bool {
    guard a.count == b.count else { return false }
    guard let pa = a.baseAddress, let pb = b.baseAddress else { return true }
    for i in 0..<a.count where pa[i] != pb[i] && lowerASCII(pa[i]) != lowerASCII(pb[i]) { return false }
    return true
}

/// Whether `a` is `lower`, ASCII case-insensitively; `lower` is a header name in lowercase
/// (letters, digits and '-' only). Names of eight bytes or more are compared a word at a time:
/// a byte ORed with 0x20 equals a lowercase letter only when it is that letter in either case,
/// and equals '-' or a digit only when it is that byte or the control character 0x20 below it,
/// which the test of bits 0x60 (none set: a control character) rules out.
@inlinable
public func equalsLowercased(_ a: UnsafeBufferPointer<UInt8>, _ lower: StaticString) -> Bool {
    let n = lower.utf8CodeUnitCount
    guard a.count == n else { return false }
    guard n > 0, let pa = a.baseAddress else { return true }
    let p = lower.utf8Start
    guard n >= 8 else {
        for i in 0..<n where lowerASCII(pa[i]) != p[i] { return false }
        return true
    }
    @inline(__always) func wordEqual(_ at: Int) -> Bool {
        let w = UnsafeRawPointer(pa + at).loadUnaligned(as: UInt64.self)
        let t = w & 0x6060_6060_6060_6060
        return w | 0x2020_2020_2020_2020 == UnsafeRawPointer(p + at).loadUnaligned(as: UInt64.self)
            && (t | t >> 1) & 0x2020_2020_2020_2020 == 0x2020_2020_2020_2020
    }
    var i = 0
    while i + 8 <= n {
        guard wordEqual(i) else { return false }
        i += 8
    }
    // The last bytes as the word that ends the name (it overlaps the one before).
    return i == n || wordEqual(n - 8)
}

/// Whether two header names are equal, ASCII case-insensitively. Inlined where it is called
/// (each request compares names many times): most comparisons end at the lengths.
@inlinable
public func asciiCaseInsensitiveEquals(_ a: String, _ b: String) -> Bool {
    a.utf8.count == b.utf8.count && sameLengthCaseInsensitiveEquals(a, b)
}

/// Byte by byte, through `withUTF8` (which also handles small and bridged strings): about half
/// the time of `withContiguousStorageIfAvailable` on the UTF-8 views.
@usableFromInline
func sameLengthCaseInsensitiveEquals(_ a: String, _ b: String) -> Bool {
    // Names usually come in their usual case: exactly equal is the common answer, and the quickest.
    // For strings of the same UTF-8 length, `==` (canonical equivalence) differs from byte
    // equality only when both are non-ASCII; the gateway always compares against an ASCII name
    // or between parsed tokens, which are ASCII.
    if a == b { return true }
    return a.withUTF8Bytes { pa in b.withUTF8Bytes { pb in asciiCaseInsensitiveEquals(pa, pb) } }
}

/// Calls `body` with the byte range of each trimmed, non-empty token of a comma-separated
/// value; stops when it returns true, and says whether it did.
@inline(__always)
func scanTokens(_ v: UnsafeBufferPointer<UInt8>, _ body: (Int, Int) -> Bool) -> Bool {
    var i = 0
    while i < v.count {
        var start = i
        while i < v.count && v[i] != 0x2C { i += 1 }
        var end = i
        i += 1
        while start < end && (v[start] == 0x20 || v[start] == 0x09) { start += 1 }
        while end > start && (v[end - 1] == 0x20 || v[end - 1] == 0x09) { end -= 1 }
        if end > start && body(start, end) { return true }
    }
    return false
}

extension StringProtocol {
    /// Trims optional whitespace (SP / HTAB) as HTTP defines it.
    public func trimmingOWS() -> String {
        var s = Substring(self)
        while let c = s.first, c == " " || c == "\t" { s.removeFirst() }
        while let c = s.last, c == " " || c == "\t" { s.removeLast() }
        return String(s)
    }

    public func lowercasedASCII() -> String {
        String(decoding: utf8.map(lowerASCII), as: UTF8.self)
    }
}

extension String {
    /// `hasPrefix` for ASCII text (request paths, header names) and an ASCII prefix, on the
    /// UTF-8 bytes: the standard library's compares Characters, about 100 instructions where
    /// this costs a few. (On non-ASCII text the two can differ: a combining mark after the
    /// prefix's last character makes another Character.)
    @inlinable
    public func hasASCIIPrefix(_ prefix: StaticString) -> Bool {
        let n = prefix.utf8CodeUnitCount
        guard utf8.count >= n else { return false }
        return withUTF8Bytes { memcmp($0.baseAddress!, prefix.utf8Start, n) == 0 }
    }
}
