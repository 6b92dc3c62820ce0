/// An ordered list of header fields. Names compare ASCII case-insensitively; order and
/// duplicates are kept, because a proxy must forward what it received.
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
        /// Valid UTF-8 (the usual case) costs the one validating pass that decoding costs anyway.
        public init(name: String, bytes: UnsafeBufferPointer<UInt8>) {
            self.name = name
            if let text = String(validating: bytes, as: UTF8.self) {
                value = text
            } else {
                value = String(decoding: bytes, as: UTF8.self)
                received = Array(bytes)
            }
        }

        /// The value's size on the wire.
        var wireCount: Int { received?.count ?? value.utf8.count }
    }

    public private(set) var fields: [Field]

    public init(_ pairs: [(String, String)] = []) {
        fields = pairs.map { Field(name: $0.0, value: $0.1) }
        fields.reserveCapacity(16)
    }

    public var count: Int { fields.count }
    public func makeIterator() -> IndexingIterator<[Field]> { fields.makeIterator() }

    public mutating func add(_ name: String, _ value: String) {
        fields.append(Field(name: name, value: value))
    }

    /// Replaces every field called `name` with one field.
    public mutating func set(_ name: String, _ value: String) {
        remove(name)
        add(name, value)
    }

    public mutating func remove(_ name: String) {
        removeAll { asciiCaseInsensitiveEquals($0.name, name) }
    }

    /// Removes the fields `shouldRemove` picks, keeping the others' order. Nothing is
    /// written when none is picked (the usual case).
    public mutating func removeAll(where shouldRemove: (Field) -> Bool) {
        guard let first = fields.firstIndex(where: shouldRemove) else { return }
        var kept = first
        for i in (first + 1)..<fields.count where !shouldRemove(fields[i]) {
            fields.swapAt(kept, i)
            kept += 1
        }
        fields.removeLast(fields.count - kept)
    }

    public func first(_ name: String) -> String? {
        for f in fields where asciiCaseInsensitiveEquals(f.name, name) { return f.value }
        return nil
    }

    public func values(_ name: String) -> [String] {
        fields.filter { asciiCaseInsensitiveEquals($0.name, name) }.map(\.value)
    }

    public func contains(_ name: String) -> Bool { first(name) != nil }

    /// The comma-separated tokens of every field called `name`, lowercased and trimmed
    /// (as in `Connection: close, Upgrade`).
    public func tokens(_ name: String) -> [String] {
        var out: [String] = []
        for f in fields where asciiCaseInsensitiveEquals(f.name, name) {
            for part in f.value.split(separator: ",") {
                let t = part.trimmingOWS()
                if !t.isEmpty { out.append(t.lowercasedASCII()) }
            }
        }
        return out
    }

    /// Whether any field called `name` lists `token` (case-insensitively) among its
    /// comma-separated values. No allocation: it runs for every message.
    public func hasToken(_ name: String, _ token: String) -> Bool {
        for f in fields where asciiCaseInsensitiveEquals(f.name, name) {
            if listContains(f.value, token) { return true }
        }
        return false
    }

    /// The header names that `Connection` declares hop-by-hop (its tokens other than `close`
    /// and `keep-alive`). Empty, without allocating, in the common case.
    public func connectionNamedHeaders() -> [String] {
        var out: [String] = []
        for f in fields where asciiCaseInsensitiveEquals(f.name, "Connection") {
            if onlyConnectionKeywords(f.value) { continue }
            forEachToken(f.value) { t in
                if !asciiCaseInsensitiveEquals(t, "close") && !asciiCaseInsensitiveEquals(t, "keep-alive") {
                    out.append(t)
                }
            }
        }
        return out
    }

    public mutating func reserveCapacity(_ n: Int) { fields.reserveCapacity(n) }

    public mutating func append(_ field: Field) { fields.append(field) }

    /// Sum of the wire size of the fields ("Name: value\r\n").
    public var wireSize: Int { fields.reduce(0) { $0 + $1.name.utf8.count + $1.wireCount + 4 } }
}

@inline(__always) @usableFromInline
func lowerASCII(_ b: UInt8) -> UInt8 { (b >= 65 && b <= 90) ? b | 0x20 : b }

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
    var a = a, b = b
    return a.withUTF8 { pa in
        b.withUTF8 { pb in
            for i in 0..<pa.count where lowerASCII(pa[i]) != lowerASCII(pb[i]) { return false }
            return true
        }
    }
}

/// Calls `body` with each comma-separated, OWS-trimmed, non-empty token of a header value.
func forEachToken(_ value: String, _ body: (String) -> Void) {
    for part in value.split(separator: ",") {
        let t = part.trimmingOWS()
        if !t.isEmpty { body(t) }
    }
}

/// Calls `body` with the byte range of each trimmed token of a comma-separated value; stops
/// when it returns true. Nil when the string is not contiguous.
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

@inline(__always)
func bytesEqualFolded(_ v: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int, _ lower: StaticString) -> Bool {
    guard end - start == lower.utf8CodeUnitCount else { return false }
    let p = lower.utf8Start
    for k in 0..<(end - start) where lowerASCII(v[start + k]) != p[k] { return false }
    return true
}

/// True when every token is `close` or `keep-alive` (what nearly every message says).
func onlyConnectionKeywords(_ value: String) -> Bool {
    value.utf8.withContiguousStorageIfAvailable { v in
        !scanTokens(v) { s, e in !bytesEqualFolded(v, s, e, "close") && !bytesEqualFolded(v, s, e, "keep-alive") }
    } ?? false
}

/// Whether a comma-separated header value lists `token`, compared case-insensitively, on
/// the raw bytes.
func listContains(_ value: String, _ token: String) -> Bool {
    let result = value.utf8.withContiguousStorageIfAvailable { v -> Bool in
        token.utf8.withContiguousStorageIfAvailable { t -> Bool in
            scanTokens(v) { start, end in
                guard end - start == t.count else { return false }
                for k in 0..<t.count where lowerASCII(v[start + k]) != lowerASCII(t[k]) { return false }
                return true
            }
        } ?? false
    }
    if let r = result { return r }
    var found = false
    forEachToken(value) { if asciiCaseInsensitiveEquals($0, token) { found = true } }
    return found
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
