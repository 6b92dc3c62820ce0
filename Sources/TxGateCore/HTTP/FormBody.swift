/// One `name=value` pair of an `application/x-www-form-urlencoded` body, decoded.
public struct FormField: Equatable, Sendable {
    public var name: String
    public var value: String

    public init(name: String, value: String) { self.name = name; self.value = value }
}

/// A strict `application/x-www-form-urlencoded` parser (the WHATWG URL standard's, minus its
/// leniency), for reading bound fields as a form-parsing backend would.
public enum FormBody {
    /// The pairs in order, names and values decoded (`+` is a space, `%XX` a byte); an empty
    /// pair (`a=1&&b=2`, a trailing `&`) is skipped and a pair without `=` has an empty value,
    /// as every form parser does. Nil if any `%` is not followed by two hex digits, or the
    /// decoded bytes are not UTF-8: a lenient backend would read such a body some other way
    /// (keep the `%`, or substitute U+FFFD), so it cannot be bound.
    public static func parse(_ body: [UInt8]) -> [FormField]? {
        var fields: [FormField] = []
        for pair in body.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let eq = pair.firstIndex(of: UInt8(ascii: "="))
            guard let name = decode(pair[pair.startIndex..<(eq ?? pair.endIndex)]),
                  let value = eq.map({ decode(pair[pair.index(after: $0)...]) }) ?? "" else { return nil }
            fields.append(FormField(name: name, value: value))
        }
        return fields
    }

    private static func decode(_ bytes: ArraySlice<UInt8>) -> String? {
        PercentEncoding.decode(utf8: bytes, plusIsSpace: true)
    }
}
