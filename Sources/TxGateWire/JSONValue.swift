import Foundation
import HTTPCore

/// A JSON document as a value: what AM's callbacks carry, and what transactions bind to.
public enum JSONValue: Equatable, Sendable, Codable {
    case null
    case bool(Bool)
    /// The exact decimal value as written (`JSONNumber`); no binary floating point.
    case number(JSONNumber)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null }
        else if let b = try? c.decode(Bool.self) { self = .bool(b) }
        // Codable only sees numbers through Foundation: Decimal keeps 38 digits exactly, Double
        // covers the rest of the range. Request bodies go through `parse`, which keeps every digit.
        else if let d = try? c.decode(Decimal.self), let n = JSONNumber("\(d)") { self = .number(n) }
        else if let d = try? c.decode(Double.self), let n = JSONNumber(d) { self = .number(n) }
        else if let s = try? c.decode(String.self) { self = .string(s) }
        else if let a = try? c.decode([JSONValue].self) { self = .array(a) }
        else if let o = try? c.decode([String: JSONValue].self) { self = .object(o) }
        else { throw DecodingError.dataCorruptedError(in: c, debugDescription: "not a JSON value") }
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .number(let n):
            // Only an exact encoding: a number neither a Decimal nor a Double holds is an error.
            if let d = Decimal(string: n.text), JSONNumber("\(d)") == n { try c.encode(d) }
            else if JSONNumber(n.doubleValue) == n { try c.encode(n.doubleValue) }
            else {
                throw EncodingError.invalidValue(n, .init(codingPath: encoder.codingPath,
                                                          debugDescription: "\(n) has more digits than Foundation can encode exactly"))
            }
        case .string(let s): try c.encode(s)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }

    /// Parses JSON text; nil if it is not valid JSON (see `JSONParser`).
    public static func parse(_ bytes: [UInt8]) -> JSONValue? {
        JSONParser.parse(bytes)
    }

    /// Reads JSON text that must be one object member by member, in the order written, without
    /// building a dictionary of it (for records read on every request, whose members the caller
    /// knows by name); false if it is not valid JSON, not an object, or `member` returned false.
    /// The caller refuses repeated keys: `parse` does.
    public static func forEachMember(of bytes: [UInt8], _ member: (String, JSONValue) -> Bool) -> Bool {
        JSONParser.forEachMember(bytes, member)
    }

    /// Parses JSON text, or says where (line, column, the path of the value) and why it is not
    /// valid JSON: for configuration files.
    public static func parseReportingErrors(_ bytes: [UInt8]) -> Result<JSONValue, JSONSyntaxError> {
        JSONParser.parseReportingErrors(bytes)
    }

    public subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    public var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { return a } else { return nil } }
    public var objectValue: [String: JSONValue]? { if case .object(let o) = self { return o } else { return nil } }
    public var numberValue: JSONNumber? { if case .number(let n) = self { return n } else { return nil } }
    /// An integer number (exactly; `1.5` is nil), or a string of one.
    public var intValue: Int? {
        if case .number(let n) = self { return n.intValue }
        if case .string(let s) = self { return Int(s) }
        return nil
    }

    /// Compact JSON with object keys sorted: one canonical text per value (for digests).
    public var canonical: String { canonicalWritten.string }

    /// `canonical` as UTF-8 bytes, written straight into one byte buffer (records are encoded
    /// and signed this way several times per journey step).
    public var canonicalBytes: [UInt8] { canonicalWritten.bytes }

    /// The canonical text in a writer, for `canonical` and `canonicalBytes` to copy out once.
    private var canonicalWritten: ByteWriter {
        var out = ByteWriter(capacity: 256)
        write(&out)
        return out
    }

    /// `canonicalBytes` appended to `out`.
    public func write(_ out: inout ByteWriter) {
        switch self {
        case .null: out.append("null" as StaticString)
        case .bool(let b): out.append(b ? "true" as StaticString : "false")
        case .number(let n): out.append(n.text)
        case .string(let s): JSONText.write(s, into: &out)
        case .array(let a):
            out.append(UInt8(ascii: "["))
            for (i, v) in a.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                v.write(&out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let o):
            out.append(UInt8(ascii: "{"))
            for (i, member) in o.sorted(by: { $0.key < $1.key }).enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSONText.write(member.key, into: &out)
                out.append(UInt8(ascii: ":"))
                member.value.write(&out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// The value at a JSON Pointer (RFC 6901), e.g. `/amount`.
    public func at(pointer: String) -> JSONValue? {
        // A member of this object named by one token with nothing to unescape (`/amount`): the
        // binding's usual pointer, looked up without splitting it.
        if case .object(let o) = self, pointer.utf8.first == UInt8(ascii: "/"),
           !pointer.utf8.dropFirst().contains(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "~") }) {
            return o[String(Substring(pointer.utf8.dropFirst()))]
        }
        // Unicode scalars, not Characters: found by fuzzing (Fuzz/README.md), a `/` or `~0` followed
        // by a combining mark is one Character, and the key it names was missed.
        guard pointer.unicodeScalars.first == "/" else { return pointer.isEmpty ? self : nil }
        var v = self
        for raw in pointer.unicodeScalars.dropFirst().split(separator: "/", omittingEmptySubsequences: false) {
            let token = Self.unescapePointerToken(raw)
            switch v {
            case .object(let o): guard let n = o[token] else { return nil }; v = n
            case .array(let a): guard let i = Int(token), a.indices.contains(i) else { return nil }; v = a[i]
            default: return nil
            }
        }
        return v
    }

    /// A JSON Pointer reference token as the key it names: `~1` is `/`, then `~0` is `~`.
    package static func unescapePointerToken(_ raw: Substring) -> String {
        unescapePointerToken(raw.unicodeScalars)
    }

    package static func unescapePointerToken(_ raw: Substring.UnicodeScalarView) -> String {
        guard raw.contains("~") else { return String(raw) }
        var out = String.UnicodeScalarView()
        var i = raw.startIndex
        while i != raw.endIndex {
            let c = raw[i]
            i = raw.index(after: i)
            if c == "~", i != raw.endIndex, raw[i] == "0" || raw[i] == "1" {
                out.append(raw[i] == "0" ? "~" : "/")
                i = raw.index(after: i)
            } else {
                out.append(c)
            }
        }
        return String(out)
    }

    /// How a value reads in a prompt: strings bare, everything else as JSON. A number shows its
    /// exact canonical decimal (`JSONNumber`): `100.0` and `1e2` both read `100`, and
    /// `100.000000000000001` reads as exactly that, so the user approves the value that is bound.
    public var displayText: String {
        switch self {
        case .string(let s): return s
        case .number(let n): return n.text  // its canonical text, already made
        default: return canonical
        }
    }
}

extension JSONValue {
    /// An integer number.
    public static func number(_ value: Int) -> JSONValue { .number(JSONNumber(value)) }

    /// The shortest decimal that reads back as `value`; null for infinities and NaN (as
    /// JavaScript's `JSON.stringify` does).
    public static func number(_ value: Double) -> JSONValue { JSONNumber(value).map { .number($0) } ?? .null }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral, ExpressibleByBooleanLiteral {
    public init(stringLiteral v: String) { self = .string(v) }
    public init(integerLiteral v: Int) { self = .number(JSONNumber(v)) }
    public init(booleanLiteral v: Bool) { self = .bool(v) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, b in b }))
    }
}

/// A canonical JSON object written member by member, without building a dictionary first: for
/// records encoded at every step. The caller adds the members in the order of their names
/// (`String`'s `<`, which `canonicalBytes` sorts by); a debug build checks it. Written into a
/// `ByteWriter`: each piece one copy, not an `Array` append's checks.
public struct CanonicalObjectWriter: ~Copyable {
    private var out: ByteWriter
    private var empty = true
    #if DEBUG
    private var last: String?
    #endif

    public init(capacity: Int = 256) {
        out = ByteWriter(capacity: capacity)
        out.append(UInt8(ascii: "{"))
    }

    public mutating func member(_ name: String, _ value: String) {
        key(name)
        JSONText.write(value, into: &out)
    }

    public mutating func member(_ name: String, _ value: JSONValue) {
        key(name)
        value.write(&out)
    }

    public mutating func member(_ name: String, _ value: Int) {
        key(name)
        out.appendInteger(value)
    }

    /// A member whose value is an object written already (another writer's `finish()`).
    public mutating func member(_ name: String, object: [UInt8]) {
        key(name)
        object.withUnsafeBufferPointer { out.append($0) }
    }

    /// A member whose value is an object of strings, its members in canonical order.
    public mutating func member(_ name: String, strings: [String: String]) {
        var nested = CanonicalObjectWriter(capacity: 128)
        for (k, v) in strings.sorted(by: { $0.key < $1.key }) { nested.member(k, v) }
        member(name, object: nested.finish())
    }

    private mutating func key(_ name: String) {
        if !empty { out.append(UInt8(ascii: ",")) }
        empty = false
        #if DEBUG
        if let last { assert(last < name, "canonical members out of order: '\(last)' before '\(name)'") }
        last = name
        #endif
        JSONText.write(name, into: &out)
        out.append(UInt8(ascii: ":"))
    }

    /// The object's bytes.
    public consuming func finish() -> [UInt8] {
        out.append(UInt8(ascii: "}"))
        return out.bytes
    }
}
