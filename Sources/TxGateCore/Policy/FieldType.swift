import Foundation

/// A bound field's declared type (`bind.types`), checked before any challenge: a value the
/// backend would refuse ("12,50" for an amount) is answered 400 at once, instead of being
/// approved by the user and only then refused by the backend.
public enum FieldType: Equatable, Sendable {
    /// A plain decimal (`-?digits[.digits]`, a JSON number or a form's string), with at most
    /// `maxScale` digits after the point, within `min`...`max` when given.
    case decimal(maxScale: Int?, min: Decimal?, max: Decimal?)
    /// Digits only (a JSON number without a fraction, or a string of digits), within the bounds.
    case integer(min: Int?, max: Int?)
    /// A string of at most `maxLength` characters that, with `pattern`, matches it whole.
    case string(maxLength: Int?, pattern: String?)
    /// One of these values exactly (compared as the text shown to the user).
    case oneOf([String])

    /// Why `value` is not of this type, as the end of "'/amount' must be …", or nil.
    public func violation(_ value: JSONValue) -> String? {
        switch self {
        case .decimal(let maxScale, let min, let max):
            guard let text = Self.plainNumber(value), Self.isDecimal(text) else {
                return "a decimal number like 12.50 (digits, one '.' at most)"
            }
            let scale = text.firstIndex(of: ".").map { text.distance(from: $0, to: text.endIndex) - 1 } ?? 0
            if let maxScale, scale > maxScale {
                return "a decimal number with at most \(maxScale) digit\(maxScale == 1 ? "" : "s") after the point"
            }
            guard let d = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) else { return "a decimal number" }
            if let min, d < min { return "at least \(min)" }
            if let max, d > max { return "at most \(max)" }
            return nil
        case .integer(let min, let max):
            guard let text = Self.plainNumber(value), Self.isInteger(text), let n = Int(text) else { return "a whole number" }
            if let min, n < min { return "at least \(min)" }
            if let max, n > max { return "at most \(max)" }
            return nil
        case .string(let maxLength, let pattern):
            guard case .string(let s) = value else { return "a string" }
            if let maxLength, s.count > maxLength { return "at most \(maxLength) characters long" }
            if let pattern, !Self.matchesWhole(pattern, s) { return "text matching \(pattern)" }
            return nil
        case .oneOf(let allowed):
            let text = value.displayText
            return allowed.contains(text) ? nil : "one of " + allowed.joined(separator: ", ")
        }
    }

    /// The number a JSON number or a string holds as plain text (a JSON number's canonical
    /// decimal text; a string as sent).
    private static func plainNumber(_ value: JSONValue) -> String? {
        switch value {
        case .number(let n): return n.text
        case .string(let s): return s
        default: return nil
        }
    }

    static func isDecimal(_ s: String) -> Bool {
        let body = s.hasPrefix("-") ? s.utf8.dropFirst() : s.utf8[...]
        let parts = body.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        return (1...2).contains(parts.count) && parts.allSatisfy { !$0.isEmpty && $0.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }
    }

    static func isInteger(_ s: String) -> Bool {
        let digits = s.hasPrefix("-") ? s.utf8.dropFirst() : s.utf8[...]
        return !digits.isEmpty && digits.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }

    static func matchesWhole(_ pattern: String, _ s: String) -> Bool {
        guard let re = try? NSRegularExpression(pattern: pattern) else { return false }
        let range = NSRange(s.startIndex..., in: s)
        return re.firstMatch(in: s, options: [.anchored], range: range).map { $0.range == range } ?? false
    }
}

/// One entry of `bind.types`: `{"type": "decimal", "maxScale": 2, "min": "0.01", "max": "10000"}`,
/// `{"type": "integer", "min": 1}`, `{"type": "string", "maxLength": 70, "pattern": "[A-Za-z ]+"}`
/// or `{"oneOf": ["EUR", "USD"]}`.
struct FieldTypeConfig: ConfigObject {
    var type: FieldType

    enum Key: String, ConfigKey {
        case `type`, maxScale, min, max, maxLength, pattern, oneOf
    }

    init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        type = .oneOf([])
        func decimal(_ key: Key) -> Decimal? {
            guard let s: String = o.optional(key) else { return nil }
            guard FieldType.isDecimal(s), let d = Decimal(string: s, locale: Locale(identifier: "en_US_POSIX")) else {
                o.invalid(key, "'\(s)' is not a decimal number (write it as a string: \"0.01\")")
                return nil
            }
            return d
        }
        if let list: [String] = o.optional(.oneOf) {
            if list.isEmpty { o.invalid(.oneOf, "list at least one value") }
            if o.has(.type) { o.invalid(.type, "oneOf is a type of its own; leave type out") }
            type = .oneOf(list)
            return
        }
        switch o.required(.type, as: String.self) {
        case "decimal":
            let scale: Int? = o.optional(.maxScale)
            if let scale, scale < 0 { o.invalid(.maxScale, "must be 0 or more") }
            type = .decimal(maxScale: scale, min: decimal(.min), max: decimal(.max))
        case "integer":
            type = .integer(min: o.optional(.min), max: o.optional(.max))
        case "string":
            let pattern: String? = o.optional(.pattern)
            if let pattern, (try? NSRegularExpression(pattern: pattern)) == nil {
                o.invalid(.pattern, "'\(pattern)' is not a valid regular expression")
            }
            let maxLength: Int? = o.optional(.maxLength)
            if let maxLength, maxLength < 1 { o.invalid(.maxLength, "must be 1 or more") }
            type = .string(maxLength: maxLength, pattern: pattern)
        case let other?:
            o.invalid(.type, "'\(other)' is not decimal, integer or string (or use oneOf)")
        case nil:
            break
        }
        for key in [Key.maxScale] where o.has(key) && type.isDecimal == false { o.invalid(key, "only for a decimal") }
        for key in [Key.maxLength, .pattern] where o.has(key) && type.isString == false { o.invalid(key, "only for a string") }
    }
}

extension FieldType {
    var isDecimal: Bool { if case .decimal = self { return true } else { return false } }
    var isString: Bool { if case .string = self { return true } else { return false } }
}
