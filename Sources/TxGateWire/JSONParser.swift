/// A strict RFC 8259 parser from bytes to `JSONValue`, without Foundation's JSONDecoder (whose
/// generic Codable machinery costs far more than the parse itself on every request).
///
/// Accepts exactly valid JSON in UTF-8: any value at the top, whitespace around it, no trailing
/// bytes, no control characters in strings, no lone surrogates, no leading zeros or bare dots in
/// numbers, nesting up to `maxDepth`. An object with a repeated key is rejected (RFC 7493):
/// parsers disagree on which copy wins, so a body bound by the gateway could mean something
/// else to the backend.
///
/// `parseReportingErrors` says where and why a document is refused (for configuration files);
/// the failure is recorded only on the way out of a failed parse, so `parse` costs the same.
struct JSONParser {
    static let maxDepth = 512

    private let bytes: [UInt8]
    private var i = 0
    /// The first failure: where, and what was wrong.
    private var failure: (offset: Int, message: String)?
    /// The keys and indexes leading to the failure, innermost first (filled while unwinding).
    private var failurePath: [JSONSyntaxError.PathComponent] = []

    static func parse(_ bytes: [UInt8]) -> JSONValue? {
        var p = JSONParser(bytes: bytes)
        return p.document()
    }

    static func parseReportingErrors(_ bytes: [UInt8]) -> Result<JSONValue, JSONSyntaxError> {
        var p = JSONParser(bytes: bytes)
        if let v = p.document() { return .success(v) }
        let (offset, message) = p.failure ?? (p.i, "not valid JSON")
        return .failure(JSONSyntaxError(bytes: bytes, offset: offset, path: p.failurePath.reversed(), message: message))
    }

    /// Reads a document that must be one object, handing each member to `member` in the order
    /// written instead of collecting them in a dictionary; false if the document is not valid
    /// JSON, not an object, or `member` returned false. Repeated keys are the caller's to refuse.
    static func forEachMember(_ bytes: [UInt8], _ member: (String, JSONValue) -> Bool) -> Bool {
        var p = JSONParser(bytes: bytes)
        p.skipWhitespace()
        guard p.i < bytes.count, bytes[p.i] == UInt8(ascii: "{") else { return false }
        p.i += 1
        p.skipWhitespace()
        if p.i < bytes.count, bytes[p.i] == UInt8(ascii: "}") {
            p.i += 1
        } else {
            while true {
                p.skipWhitespace()
                guard p.i < bytes.count, bytes[p.i] == UInt8(ascii: "\""), let key = p.string() else { return false }
                p.skipWhitespace()
                guard p.i < bytes.count, bytes[p.i] == UInt8(ascii: ":") else { return false }
                p.i += 1
                guard let v = p.value(depth: 1), member(key, v) else { return false }
                p.skipWhitespace()
                guard p.i < bytes.count else { return false }
                p.i += 1
                if bytes[p.i - 1] == UInt8(ascii: ",") { continue }
                if bytes[p.i - 1] == UInt8(ascii: "}") { break }
                return false
            }
        }
        p.skipWhitespace()
        return p.i == bytes.count
    }

    private init(bytes: [UInt8]) { self.bytes = bytes }

    private mutating func document() -> JSONValue? {
        guard let v = value(depth: 0) else { return nil }
        skipWhitespace()
        return i == bytes.count ? v : fail("unexpected \(found) after the end of the JSON document")
    }

    /// Records the failure at the current position (the first one recorded wins: it is the
    /// innermost) and returns nil. Only failures build a message.
    private mutating func fail(_ message: String, at offset: Int? = nil) -> JSONValue? {
        if failure == nil { failure = (offset ?? i, message) }
        return nil
    }

    private mutating func failString(_ message: String, at offset: Int? = nil) -> String? {
        _ = fail(message, at: offset)
        return nil
    }

    /// What is at the current position, for messages: `'x'` or "the end of the input".
    private var found: String {
        guard i < bytes.count else { return "end of input" }
        let b = bytes[i]
        if b >= 0x21 && b < 0x7F { return "'\(Character(Unicode.Scalar(b)))'" }
        if b < 0x80 { return "byte 0x\(String(b, radix: 16, uppercase: true))" }
        var end = i + 1
        while end < bytes.count, end - i < 4, bytes[end] & 0xC0 == 0x80 { end += 1 }
        if let s = String(validating: bytes[i..<end], as: UTF8.self) { return "'\(s)'" }
        return "a byte that is not UTF-8"
    }

    private mutating func skipWhitespace() {
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0A || bytes[i] == 0x0D || bytes[i] == 0x09 { i += 1 }
    }

    private mutating func value(depth: Int) -> JSONValue? {
        guard depth < Self.maxDepth else { return fail("nested deeper than \(Self.maxDepth) levels") }
        skipWhitespace()
        guard i < bytes.count else { return fail("expected a value, found end of input") }
        switch bytes[i] {
        case UInt8(ascii: "{"): return object(depth: depth)
        case UInt8(ascii: "["): return array(depth: depth)
        case UInt8(ascii: "\""): return string().map { .string($0) }
        case UInt8(ascii: "t"): return literal("true") ? .bool(true) : fail("expected a value, found \(found)")
        case UInt8(ascii: "f"): return literal("false") ? .bool(false) : fail("expected a value, found \(found)")
        case UInt8(ascii: "n"): return literal("null") ? .null : fail("expected a value, found \(found)")
        default: return number()
        }
    }

    private mutating func literal(_ word: StaticString) -> Bool {
        let n = word.utf8CodeUnitCount
        guard i + n <= bytes.count else { return false }
        for k in 0..<n where bytes[i + k] != word.utf8Start[k] { return false }
        i += n
        return true
    }

    private mutating func object(depth: Int) -> JSONValue? {
        i += 1
        skipWhitespace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; return .object([:]) }
        // Room for the members of a typical record up front: growing from one member rehashes
        // every key at each doubling. Made with the room rather than given it afterwards:
        // `reserveCapacity` is not specialized for these types, and looks up the storage's
        // generic type at every call (about 400 instructions an object).
        var members = [String: JSONValue](minimumCapacity: 8)
        while true {
            skipWhitespace()
            let keyStart = i
            guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else {
                if i < bytes.count, bytes[i] == UInt8(ascii: "}") { return fail("trailing comma before '}'") }
                return fail("expected a key in double quotes, found \(found)")
            }
            guard let key = string() else { return nil }
            skipWhitespace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { return fail("expected ':' after the key, found \(found)") }
            i += 1
            guard let v = value(depth: depth + 1) else { failurePath.append(.key(key)); return nil }
            guard members.updateValue(v, forKey: key) == nil else {
                failurePath.append(.key(key))
                return fail("duplicate key '\(key)' (parsers disagree on which copy wins)", at: keyStart)
            }
            skipWhitespace()
            guard i < bytes.count else { return fail("expected ',' or '}', found end of input") }
            if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
            if bytes[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
            return fail("expected ',' or '}' after the value of '\(key)', found \(found)")
        }
    }

    private mutating func array(depth: Int) -> JSONValue? {
        i += 1
        var items: [JSONValue] = []
        skipWhitespace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
        while true {
            if !items.isEmpty {
                skipWhitespace()
                if i < bytes.count, bytes[i] == UInt8(ascii: "]") { return fail("trailing comma before ']'") }
            }
            guard let v = value(depth: depth + 1) else { failurePath.append(.index(items.count)); return nil }
            items.append(v)
            skipWhitespace()
            guard i < bytes.count else { return fail("expected ',' or ']', found end of input") }
            if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
            if bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
            return fail("expected ',' or ']' after an array element, found \(found)")
        }
    }

    /// A string starting at the opening quote; the raw bytes must be valid UTF-8.
    private mutating func string() -> String? {
        let quote = i
        i += 1
        let start = i
        // Fast path: no escapes.
        let (end, nonASCII) = bytes.withUnsafeBufferPointer { JSONStringScan.plainRun($0, from: start) }
        i = end
        if i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: "\"") {
                guard let s = Self.string(bytes, start..<i, ascii: !nonASCII) else {
                    return failString("the string is not valid UTF-8", at: quote)
                }
                i += 1
                return s
            }
            if b < 0x20 { return failString(controlCharacter(b)) }
        }
        var out = Array(bytes[start..<i])
        while i < bytes.count {
            let b = bytes[i]
            switch b {
            case UInt8(ascii: "\""):
                i += 1
                guard let s = Self.string(out, 0..<out.count, ascii: false) else {
                    return failString("the string is not valid UTF-8", at: quote)
                }
                return s
            case UInt8(ascii: "\\"):
                guard unescape(into: &out, quote: quote) else { return nil }
            default:
                if b < 0x20 { return failString(controlCharacter(b)) }
                out.append(b)
                i += 1
            }
        }
        return failString("unterminated string (expected '\"' before the end of input)", at: quote)
    }

    /// The bytes in `range` as a String; nil when they are not UTF-8. Decoding, then checking that
    /// nothing was replaced, is far cheaper than the generic validating initializer; ASCII needs
    /// no check at all.
    private static func string(_ bytes: [UInt8], _ range: Range<Int>, ascii: Bool) -> String? {
        bytes.withUnsafeBufferPointer { all in
            let raw = UnsafeBufferPointer(rebasing: all[range])
            let s = String(decoding: raw, as: UTF8.self)
            return ascii || s.utf8.elementsEqual(raw) ? s : nil
        }
    }

    /// The escape at `i` (a backslash) appended to `out` as UTF-8; false once it failed.
    private mutating func unescape(into out: inout [UInt8], quote: Int) -> Bool {
        let escape = i
        i += 1
        guard i < bytes.count else { return failed("unterminated string (expected '\"' before the end of input)", at: quote) }
        let e = bytes[i]
        i += 1
        switch e {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
        case UInt8(ascii: "b"): out.append(0x08)
        case UInt8(ascii: "f"): out.append(0x0C)
        case UInt8(ascii: "n"): out.append(0x0A)
        case UInt8(ascii: "r"): out.append(0x0D)
        case UInt8(ascii: "t"): out.append(0x09)
        case UInt8(ascii: "u"):
            guard let u = unicodeEscape(at: escape) else { return false }
            out.append(contentsOf: UTF8.encode(u)!)
        default:
            return failed("an invalid escape (expected one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)", at: escape)
        }
        return true
    }

    /// The scalar of a `\uXXXX` escape (with its low half, for a surrogate pair) after `\u`.
    private mutating func unicodeEscape(at escape: Int) -> Unicode.Scalar? {
        guard var scalar = hex4() else { return failScalar("expected 4 hex digits after \\u", at: escape) }
        if (0xD800...0xDBFF).contains(scalar) {
            guard i + 1 < bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else {
                return failScalar("a lone surrogate \\u escape (expected its low half after it)", at: escape)
            }
            i += 2
            guard let low = hex4(), (0xDC00...0xDFFF).contains(low) else {
                return failScalar("a lone surrogate \\u escape (expected its low half after it)", at: escape)
            }
            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
        } else if (0xDC00...0xDFFF).contains(scalar) {
            return failScalar("a lone surrogate \\u escape", at: escape)
        }
        guard let u = Unicode.Scalar(scalar) else { return failScalar("an invalid \\u escape", at: escape) }
        return u
    }

    private mutating func failScalar(_ message: String, at position: Int) -> Unicode.Scalar? {
        _ = fail(message, at: position)
        return nil
    }

    private mutating func failed(_ message: String, at position: Int) -> Bool {
        _ = fail(message, at: position)
        return false
    }

    private func controlCharacter(_ b: UInt8) -> String {
        b == 0x0A ? "a line break inside a string (unterminated string, or write \\n)"
            : "a control character (0x\(String(b, radix: 16, uppercase: true))) inside a string (escape it)"
    }

    private mutating func hex4() -> UInt32? {
        guard i + 4 <= bytes.count else { return nil }
        var v: UInt32 = 0
        for _ in 0..<4 {
            guard let d = hexDigitValue(bytes[i]) else { return nil }
            v = v << 4 | UInt32(d)
            i += 1
        }
        return v
    }

    /// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, kept as its exact decimal value
    /// (`JSONNumber`, which also refuses numbers beyond its limits).
    private mutating func number() -> JSONValue? {
        let start = i
        while i < bytes.count, Self.isNumberByte(bytes[i]) { i += 1 }
        guard i > start else { return fail("expected a value, found \(found)") }
        guard let n = JSONNumber(utf8: bytes[start..<i]) else {
            return fail("'\(String(decoding: bytes[start..<i], as: UTF8.self))' is not a JSON number (or is beyond its limits)", at: start)
        }
        return .number(n)
    }

    private static func isNumberByte(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "+"), UInt8(ascii: "."),
             UInt8(ascii: "e"), UInt8(ascii: "E"):
            return true
        default:
            return false
        }
    }
}

/// Where and why `JSONParser` refused a document.
public struct JSONSyntaxError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum PathComponent: Equatable, Sendable {
        case key(String)
        case index(Int)
    }

    /// Byte offset of the problem.
    public let offset: Int
    /// 1-based line and column (in characters) of the problem.
    public let line: Int
    public let column: Int
    /// The keys and indexes of the value that holds the problem (a repeated key: that key).
    public let path: [PathComponent]
    /// What was wrong, or what was expected and what was found instead.
    public let message: String

    init(bytes: [UInt8], offset: Int, path: [PathComponent], message: String) {
        self.offset = offset
        self.path = path
        self.message = message
        var line = 1, lineStart = 0
        for k in 0..<min(offset, bytes.count) where bytes[k] == 0x0A {
            line += 1
            lineStart = k + 1
        }
        self.line = line
        // Characters, not bytes: count everything but UTF-8 continuation bytes.
        column = 1 + bytes[lineStart..<min(offset, bytes.count)].filter { $0 & 0xC0 != 0x80 }.count
    }

    /// `policies[2].name`, as configuration errors name paths ("" for the top).
    public var jsonPath: String {
        var s = ""
        for c in path {
            switch c {
            case .index(let n): s += "[\(n)]"
            case .key(let k): s += s.isEmpty ? k : ".\(k)"
            }
        }
        return s
    }

    public var description: String { "line \(line), column \(column): \(message)" }
}
