/// An ordered list of header fields. Names compare ASCII case-insensitively; order and
/// duplicates are kept, because a proxy must forward what it received.
public struct HTTPHeaders: Sequence, Sendable, Equatable {
    public struct Field: Sendable, Equatable {
        public var name: String
        public var value: String
        public init(name: String, value: String) { self.name = name; self.value = value }
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
        fields.removeAll { asciiCaseInsensitiveEquals($0.name, name) }
    }

    public mutating func removeAll(where shouldRemove: (Field) -> Bool) {
        fields.removeAll(where: shouldRemove)
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

    /// Sum of the wire size of the fields ("Name: value\r\n").
    public var wireSize: Int { fields.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 } }
}

@inline(__always)
func lowerASCII(_ b: UInt8) -> UInt8 { (b >= 65 && b <= 90) ? b | 0x20 : b }

public func asciiCaseInsensitiveEquals(_ a: String, _ b: String) -> Bool {
    let ua = a.utf8, ub = b.utf8
    guard ua.count == ub.count else { return false }
    for (x, y) in zip(ua, ub) where lowerASCII(x) != lowerASCII(y) { return false }
    return true
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
