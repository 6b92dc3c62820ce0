/// A JSON number as its exact decimal value, never a binary floating-point approximation:
/// transactions bind amounts, and approving 9007199254740992 must not open 9007199254740993,
/// nor 100 open 100.000000000000001.
///
/// It is kept as one canonical text, so that equal values have equal text (and equal digests):
/// `100`, `100.0`, `1e2` and `1.00E+2` are all `100`; `-0` is `0`. The canonical text is valid
/// JSON and is also what the user is shown (`JSONValue.displayText`):
/// - no exponent while the value is written in at most 64 digits around the point:
///   `12.5`, `0.000125`, `9007199254740993`, `1000000000000000000000`;
/// - otherwise one digit before the point and a bare exponent: `1.25e-7`, `1e100`.
///
/// Hostile numbers are refused rather than expanded: at most `maxLength` bytes as written,
/// `maxSignificantDigits` significant digits, and a magnitude a Double can still approximate
/// (below about 1.8e308, so `doubleValue` is always finite), down to 1e-999.
public struct JSONNumber: Hashable, Sendable, CustomStringConvertible {
    /// The canonical decimal text.
    public let text: String

    public static let maxLength = 128
    public static let maxSignificantDigits = 64
    /// The power of ten of the first significant digit.
    public static let magnitudeRange = -999...308

    /// A JSON number (RFC 8259 grammar, nothing around it); nil if it is not one or exceeds the limits.
    public init?(_ text: String) {
        self.init(utf8: Array(text.utf8)[...])
    }

    public init(_ value: Int) {
        text = String(value)
    }

    /// The shortest decimal that reads back as `value` (Swift's `description`), so `0.1` is
    /// `0.1`; nil for infinities and NaN.
    public init?(_ value: Double) {
        guard value.isFinite else { return nil }
        self.init("\(value)")
    }

    /// The number in `bytes`, which must be exactly one JSON number.
    init?(utf8 bytes: ArraySlice<UInt8>) {
        // An integer written plainly (no leading zero, no "-0"), as nearly every number a record,
        // a token or a body holds (times, counters, amounts in cents), is its own canonical text.
        if Self.isPlainInteger(bytes) {
            text = String(decoding: bytes, as: UTF8.self)
            return
        }
        guard !bytes.isEmpty, bytes.count <= Self.maxLength, let (negative, digits, scanned) = Self.scan(bytes) else { return nil }
        let zero = UInt8(ascii: "0")
        // Strip to the significant digits: digits × 10^exponent stays the same value.
        guard let first = digits.firstIndex(where: { $0 != zero }) else {
            text = "0"
            return
        }
        let last = digits.lastIndex { $0 != zero }!
        let exponent = scanned + digits.count - 1 - last
        let significant = digits[first...last]
        guard significant.count <= Self.maxSignificantDigits else { return nil }
        // The position of the decimal point, counted from the first significant digit.
        let point = significant.count + exponent
        guard Self.magnitudeRange.contains(point - 1) else { return nil }
        text = Self.write(negative: negative, significant, exponent: exponent, point: point)
        // Just under the top of the range, a Double may still overflow (1.8e308).
        if point - 1 == Self.magnitudeRange.upperBound && !(Double(text)?.isFinite ?? false) { return nil }
    }

    private static func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }

    /// `0`, or `-?[1-9][0-9]*` of at most `maxSignificantDigits` digits: a number whose canonical
    /// text is the text itself (its significant digits, then its zeros, with no point).
    private static func isPlainInteger(_ bytes: ArraySlice<UInt8>) -> Bool {
        var i = bytes.startIndex
        if i < bytes.endIndex && bytes[i] == UInt8(ascii: "-") { i += 1 }
        let digits = bytes.endIndex - i
        guard digits >= 1, digits <= maxSignificantDigits else { return false }
        if bytes[i] == UInt8(ascii: "0") { return digits == 1 && i == bytes.startIndex }
        while i < bytes.endIndex {
            guard isDigit(bytes[i]) else { return false }
            i += 1
        }
        return true
    }

    /// The sign, every digit of the integer and fraction parts, and the power of ten of the
    /// last one; nil unless `bytes` is exactly one JSON number.
    private static func scan(_ bytes: ArraySlice<UInt8>) -> (negative: Bool, digits: [UInt8], exponent: Int)? {
        let zero = UInt8(ascii: "0")
        var i = bytes.startIndex
        let end = bytes.endIndex
        let negative = bytes[i] == UInt8(ascii: "-")
        if negative { i += 1 }
        var digits: [UInt8] = []
        digits.reserveCapacity(bytes.count)
        guard i < end, isDigit(bytes[i]) else { return nil }
        if bytes[i] == zero {
            i += 1
            if i < end, isDigit(bytes[i]) { return nil }   // no leading zeros
        } else {
            while i < end, isDigit(bytes[i]) { digits.append(bytes[i]); i += 1 }
        }
        var exponent = 0
        if i < end, bytes[i] == UInt8(ascii: ".") {
            i += 1
            let start = i
            while i < end, isDigit(bytes[i]) { digits.append(bytes[i]); i += 1 }
            guard i > start else { return nil }
            exponent -= i - start
        }
        if i < end, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
            i += 1
            var sign = 1
            if i < end, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") {
                if bytes[i] == UInt8(ascii: "-") { sign = -1 }
                i += 1
            }
            let start = i
            var e = 0
            // Saturates far beyond any accepted magnitude (the text is at most 128 bytes).
            while i < end, isDigit(bytes[i]) { e = min(e * 10 + Int(bytes[i] - zero), 1_000_000); i += 1 }
            guard i > start else { return nil }
            exponent += sign * e
        }
        return i == end ? (negative, digits, exponent) : nil
    }

    /// The canonical text: plain decimals for reasonable magnitudes, else one digit, a point
    /// and an exponent.
    private static func write(negative: Bool, _ significant: ArraySlice<UInt8>, exponent: Int, point: Int) -> String {
        let zero = UInt8(ascii: "0")
        var out: [UInt8] = negative ? [UInt8(ascii: "-")] : []
        out.reserveCapacity(significant.count + 72)
        if exponent >= 0 && point <= 64 {
            out += significant
            out += repeatElement(zero, count: exponent)
        } else if exponent < 0 && point > 0 {
            out += significant.prefix(point)
            out.append(UInt8(ascii: "."))
            out += significant.dropFirst(point)
        } else if exponent < 0 && point > -6 {
            out += [zero, UInt8(ascii: ".")]
            out += repeatElement(zero, count: -point)
            out += significant
        } else {
            out.append(significant.first!)
            if significant.count > 1 {
                out.append(UInt8(ascii: "."))
                out += significant.dropFirst()
            }
            out.append(UInt8(ascii: "e"))
            out += Array(String(point - 1).utf8)
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The value if it is an integer that fits an `Int`; nil otherwise (never rounded).
    public var intValue: Int? { Int(text) }

    /// The nearest Double, for callers that need one (times, indexes); never for comparing
    /// bound values.
    public var doubleValue: Double { Double(text)! }

    public var description: String { text }
}
