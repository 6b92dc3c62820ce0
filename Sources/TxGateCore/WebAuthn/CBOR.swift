/// A strict CBOR decoder (RFC 8949) for what WebAuthn sends: attestation objects, COSE keys and
/// authenticator extensions.
///
/// Our own rather than a package: no CBOR package is among the Swift packages this project can
/// build with (the local mirror has none: SwiftCBOR and PotentCBOR are not there); Debian's
/// libcbor would be a new C dependency that accepts far more (indefinite lengths, tags, floats),
/// all to be refused again on top. The subset WebAuthn needs is small, and what matters here is
/// what a general decoder leaves out: it must refuse, and say where, everything outside that
/// subset, and it must tell how many bytes one item used (the credential public key is followed
/// by extensions inside `authenticatorData`, with no length of its own).
///
/// What it reads: unsigned and negative integers (64-bit arguments), byte strings, text strings
/// (valid UTF-8 only), arrays, maps, and the simple values false, true and null. What it refuses,
/// each as a `CBORError` that names the problem and the byte offset where the offending item
/// starts:
/// - indefinite lengths (additional information 31) and the break code: WebAuthn's encoding is
///   CTAP2's canonical form, which uses definite lengths only;
/// - an argument not in its shortest form (24 encoded in two bytes, say): CTAP2 canonical, and
///   it makes the encoding of a decoded item unique (`CBOR.encoded` gives the input back);
/// - tags (major type 6): neither `none` nor `packed` attestation, COSE keys nor extensions use
///   one; a later attestation format that needs one adds it here;
/// - floats, `undefined` and the other simple values;
/// - a map with two equal keys (equal as CBOR items, so as bytes);
/// - nesting deeper than `Limits.maxDepth` (16) and items larger than `Limits.maxSize` (64 KiB);
///   a length or count larger than the bytes left is refused before anything is allocated;
/// - bytes after the item, when one item is expected (`decode`); `decodePrefix` instead returns
///   where the item ended.
/// Map keys are not required to be in canonical order: client platforms re-encode attestation
/// objects, and order carries nothing WebAuthn reads.
public indirect enum CBOR: Sendable {
    case unsigned(UInt64)
    /// Major type 1 with argument `n`: the integer -1 - n (down to -2^64).
    case negative(UInt64)
    case bytes([UInt8])
    case text(String)
    case array([CBOR])
    case map(CBORMap)
    case bool(Bool)
    case null

    /// An integer item from an Int.
    public static func int(_ value: Int) -> CBOR {
        value >= 0 ? .unsigned(UInt64(value)) : .negative(UInt64(-(value + 1)))
    }

    /// The value of an integer item that fits an Int (COSE labels and algorithm numbers).
    public var intValue: Int? {
        switch self {
        case .unsigned(let n): return n <= UInt64(Int.max) ? Int(n) : nil
        case .negative(let n): return n <= UInt64(Int.max) ? -1 - Int(n) : nil
        default: return nil
        }
    }

    public var bytesValue: [UInt8]? { if case .bytes(let b) = self { return b } else { return nil } }
    public var textValue: String? { if case .text(let s) = self { return s } else { return nil } }
    public var mapValue: CBORMap? { if case .map(let m) = self { return m } else { return nil } }
    public var arrayValue: [CBOR]? { if case .array(let a) = self { return a } else { return nil } }

    /// What kind of item this is, for error messages ("a byte string").
    public var kindName: String {
        switch self {
        case .unsigned, .negative: return "an integer"
        case .bytes: return "a byte string"
        case .text: return "a text string"
        case .array: return "an array"
        case .map: return "a map"
        case .bool: return "a boolean"
        case .null: return "null"
        }
    }
}

// Text strings compare as their UTF-8 bytes, as CBOR does, not by Swift's canonical
// equivalence (U+00E9 and "e" + U+0301 are two different map keys).
extension CBOR: Hashable {
    public static func == (a: CBOR, b: CBOR) -> Bool {
        switch (a, b) {
        case (.unsigned(let x), .unsigned(let y)), (.negative(let x), .negative(let y)): return x == y
        case (.bytes(let x), .bytes(let y)): return x == y
        case (.text(let x), .text(let y)): return x.utf8.elementsEqual(y.utf8)
        case (.array(let x), .array(let y)): return x == y
        case (.map(let x), .map(let y)): return x == y
        case (.bool(let x), .bool(let y)): return x == y
        case (.null, .null): return true
        default: return false
        }
    }

    public func hash(into h: inout Hasher) {
        switch self {
        case .unsigned(let n): h.combine(0); h.combine(n)
        case .negative(let n): h.combine(1); h.combine(n)
        case .bytes(let b): h.combine(2); h.combine(b)
        case .text(let s): h.combine(3); h.combine(s.utf8.count); for byte in s.utf8 { h.combine(byte) }
        case .array(let a): h.combine(4); h.combine(a)
        case .map(let m): h.combine(5); h.combine(m)
        case .bool(let v): h.combine(6); h.combine(v)
        case .null: h.combine(7)
        }
    }
}

/// A CBOR map: its entries in the order they were read (or written), keys distinct.
public struct CBORMap: Hashable, Sendable {
    public struct Entry: Hashable, Sendable {
        public var key: CBOR
        public var value: CBOR
        public init(key: CBOR, value: CBOR) { self.key = key; self.value = value }
    }

    public let entries: [Entry]

    /// Entries as given; the caller keeps keys distinct (the decoder refuses duplicates).
    public init(_ entries: [Entry]) { self.entries = entries }

    public init(_ pairs: [(CBOR, CBOR)]) { self.entries = pairs.map { Entry(key: $0.0, value: $0.1) } }

    public subscript(key: CBOR) -> CBOR? { entries.first { $0.key == key }?.value }
    public subscript(int key: Int) -> CBOR? { self[CBOR.int(key)] }
    public subscript(text key: String) -> CBOR? { self[CBOR.text(key)] }

    public var count: Int { entries.count }
}

/// Why bytes are not a CBOR item this decoder accepts, and the byte offset of the item (or head
/// byte) at fault, counted from the start of the buffer given to the decoder.
public struct CBORError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Problem: Equatable, Sendable {
        /// The input ends inside an item: `needed` more bytes than there are.
        case truncated(needed: Int)
        /// Additional information 28, 29 or 30 (reserved in RFC 8949).
        case reservedAdditionalInfo(UInt8)
        /// Additional information 31 on a string, array or map.
        case indefiniteLength
        /// The break code 0xFF (only meaningful after an indefinite length).
        case unexpectedBreak
        /// An argument written in more bytes than its value needs.
        case nonMinimalEncoding
        case tagNotAllowed(UInt64)
        case floatNotAllowed
        /// `undefined` or an unassigned simple value.
        case simpleValueNotAllowed(UInt64)
        case invalidUTF8
        case duplicateMapKey
        case tooDeep(limit: Int)
        case tooLarge(limit: Int)
        case trailingBytes(count: Int)
    }

    public let problem: Problem
    public let offset: Int

    public init(_ problem: Problem, at offset: Int) {
        self.problem = problem
        self.offset = offset
    }

    public var description: String {
        let what: String
        switch problem {
        case .truncated(let n): what = "input ends inside an item (\(n) more byte\(n == 1 ? "" : "s") needed)"
        case .reservedAdditionalInfo(let ai): what = "reserved additional information \(ai)"
        case .indefiniteLength: what = "indefinite length (only definite lengths are accepted)"
        case .unexpectedBreak: what = "break code outside an indefinite-length item"
        case .nonMinimalEncoding: what = "integer or length not in its shortest form"
        case .tagNotAllowed(let t): what = "tag \(t) (no tag is accepted)"
        case .floatNotAllowed: what = "floating-point number (not accepted)"
        case .simpleValueNotAllowed(let v): what = "simple value \(v) (only false, true and null are accepted)"
        case .invalidUTF8: what = "text string is not valid UTF-8"
        case .duplicateMapKey: what = "duplicate map key"
        case .tooDeep(let limit): what = "nested deeper than \(limit) levels"
        case .tooLarge(let limit): what = "item larger than \(limit) bytes"
        case .trailingBytes(let n): what = "\(n) byte\(n == 1 ? "" : "s") after the item"
        }
        return "CBOR: \(what) at byte \(offset)"
    }
}

/// Decodes CBOR under the rules of `CBOR`'s documentation.
public enum CBORDecoder {
    public struct Limits: Sendable {
        /// Nesting: a scalar at the top is depth 1, an item inside one array depth 2, ...
        public var maxDepth: Int
        /// Bytes one item (with everything inside it) may take.
        public var maxSize: Int

        public init(maxDepth: Int = 16, maxSize: Int = 65_536) {
            self.maxDepth = maxDepth
            self.maxSize = maxSize
        }
    }

    /// Exactly one item filling `bytes`.
    public static func decode(_ bytes: [UInt8], limits: Limits = Limits()) throws(CBORError) -> CBOR {
        let (item, end) = try decodePrefix(bytes, at: 0, limits: limits)
        guard end == bytes.count else { throw CBORError(.trailingBytes(count: bytes.count - end), at: end) }
        return item
    }

    /// One item starting at `offset`, and the offset just past it; what follows is not read.
    /// Error offsets count from the start of `bytes`.
    public static func decodePrefix(_ bytes: [UInt8], at offset: Int = 0,
                                    limits: Limits = Limits()) throws(CBORError) -> (item: CBOR, end: Int) {
        precondition(offset >= 0 && offset <= bytes.count, "decodePrefix: offset \(offset) outside the input")
        // Only the bytes an item may use are looked at: a length past them reads as too large.
        let window = limits.maxSize >= bytes.count - offset ? bytes.count : offset + max(limits.maxSize, 0)
        var reader = Reader(bytes: bytes, position: offset, end: window, inputEnd: bytes.count, limits: limits)
        let item = try reader.item(depth: 1)
        return (item, reader.position)
    }

    private struct Reader {
        let bytes: [UInt8]
        var position: Int
        /// Where this item must end by (`maxSize`), and where the input ends.
        let end: Int
        let inputEnd: Int
        let limits: Limits

        /// Refuses `count` more bytes from `position` when they are not there.
        func need(_ count: UInt64, item start: Int) throws(CBORError) {
            let left = UInt64(end - position)
            guard count > left else { return }
            if end < inputEnd { throw CBORError(.tooLarge(limit: limits.maxSize), at: start) }
            let missing = count - left
            throw CBORError(.truncated(needed: missing > UInt64(Int.max) ? Int.max : Int(missing)), at: start)
        }

        /// The head: major type and argument (additional information 24...27 read in shortest form).
        mutating func head() throws(CBORError) -> (major: UInt8, info: UInt8, argument: UInt64) {
            let start = position
            try need(1, item: start)
            let initial = bytes[position]
            position += 1
            let major = initial >> 5, info = initial & 0x1F
            switch info {
            case 0..<24: return (major, info, UInt64(info))
            case 24...27:
                let size = 1 << Int(info - 24)
                try need(UInt64(size), item: start)
                var value: UInt64 = 0
                for i in 0..<size { value = value << 8 | UInt64(bytes[position + i]) }
                position += size
                // Floats (major 7, 25...27) keep their bits as written; everything else is a number.
                let smallest: UInt64 = [24, 0x100, 0x1_0000, 0x1_0000_0000][Int(info - 24)]
                if major != 7, value < smallest { throw CBORError(.nonMinimalEncoding, at: start) }
                return (major, info, value)
            case 28...30: throw CBORError(.reservedAdditionalInfo(info), at: start)
            default:
                if major == 7 { throw CBORError(.unexpectedBreak, at: start) }
                if major == 0 || major == 1 || major == 6 { throw CBORError(.reservedAdditionalInfo(info), at: start) }
                throw CBORError(.indefiniteLength, at: start)
            }
        }

        mutating func item(depth: Int) throws(CBORError) -> CBOR {
            let start = position
            if depth > limits.maxDepth { throw CBORError(.tooDeep(limit: limits.maxDepth), at: start) }
            let (major, info, argument) = try head()
            switch major {
            case 0: return .unsigned(argument)
            case 1: return .negative(argument)
            case 2: return .bytes(try content(argument, item: start))
            case 3:
                let raw = try content(argument, item: start)
                let text = String(decoding: raw, as: UTF8.self)
                // Decoding replaces ill-formed UTF-8 (overlong forms, surrogates, stray bytes)
                // with U+FFFD, so a valid string is exactly one whose bytes come back unchanged.
                guard text.utf8.elementsEqual(raw) else { throw CBORError(.invalidUTF8, at: start) }
                return .text(text)
            case 4:
                // Each item takes at least one byte: a count beyond the bytes left is refused
                // before any memory is reserved.
                try need(argument, item: start)
                var items: [CBOR] = []
                items.reserveCapacity(Int(argument))
                for _ in 0..<argument { items.append(try item(depth: depth + 1)) }
                return .array(items)
            case 5:
                let (doubled, overflow) = argument.multipliedReportingOverflow(by: 2)
                try need(overflow ? UInt64.max : doubled, item: start)
                var entries: [CBORMap.Entry] = []
                entries.reserveCapacity(Int(argument))
                var keys = Set<CBOR>()
                for _ in 0..<argument {
                    let keyStart = position
                    let key = try item(depth: depth + 1)
                    guard keys.insert(key).inserted else { throw CBORError(.duplicateMapKey, at: keyStart) }
                    entries.append(CBORMap.Entry(key: key, value: try item(depth: depth + 1)))
                }
                return .map(CBORMap(entries))
            case 6: throw CBORError(.tagNotAllowed(argument), at: start)
            default:
                switch info {
                case 20: return .bool(false)
                case 21: return .bool(true)
                case 22: return .null
                case 25, 26, 27: throw CBORError(.floatNotAllowed, at: start)
                default: throw CBORError(.simpleValueNotAllowed(argument), at: start)
                }
            }
        }

        mutating func content(_ length: UInt64, item start: Int) throws(CBORError) -> [UInt8] {
            try need(length, item: start)
            let n = Int(length)
            defer { position += n }
            return Array(bytes[position..<position + n])
        }
    }
}

extension CBOR {
    /// The item in the shortest form, map entries in their order: for a decoded item, exactly
    /// the bytes it was decoded from.
    public var encoded: [UInt8] {
        var out: [UInt8] = []
        encode(into: &out)
        return out
    }

    private func encode(into out: inout [UInt8]) {
        switch self {
        case .unsigned(let n): Self.head(0, n, &out)
        case .negative(let n): Self.head(1, n, &out)
        case .bytes(let b): Self.head(2, UInt64(b.count), &out); out += b
        case .text(let s): Self.head(3, UInt64(s.utf8.count), &out); out += s.utf8
        case .array(let a):
            Self.head(4, UInt64(a.count), &out)
            for item in a { item.encode(into: &out) }
        case .map(let m):
            Self.head(5, UInt64(m.count), &out)
            for e in m.entries { e.key.encode(into: &out); e.value.encode(into: &out) }
        case .bool(let v): out.append(v ? 0xF5 : 0xF4)
        case .null: out.append(0xF6)
        }
    }

    private static func head(_ major: UInt8, _ n: UInt64, _ out: inout [UInt8]) {
        let m = major << 5
        switch n {
        case 0..<24: out.append(m | UInt8(n))
        case 24...0xFF: out += [m | 24, UInt8(n)]
        case 0x100...0xFFFF: out.append(m | 25); out += (0..<2).reversed().map { UInt8(truncatingIfNeeded: n >> ($0 * 8)) }
        case 0x1_0000...0xFFFF_FFFF: out.append(m | 26); out += (0..<4).reversed().map { UInt8(truncatingIfNeeded: n >> ($0 * 8)) }
        default: out.append(m | 27); out += (0..<8).reversed().map { UInt8(truncatingIfNeeded: n >> ($0 * 8)) }
        }
    }
}
