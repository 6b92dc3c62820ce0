/// Fills `{name}` placeholders: email subjects and bodies, and what a transaction displays.
public enum EmailTemplate {
    /// Replaces each `{name}` whose name is in `values`; unknown placeholders stay as written,
    /// so a typo shows in the message instead of vanishing (and `txgate check` refuses one:
    /// `unknownPlaceholders`). One pass: a value that itself contains `{name}` is not expanded
    /// again, so user input cannot pull in other values.
    /// Names are letters, digits, `_`, `-`, `.` and `/` (JSON Pointers).
    public static func render(_ template: String, _ values: [String: String]) -> String {
        expand(template) { values[$0] }
    }

    /// `render` with each value from `lookup`, asked only for the names the template holds.
    public static func render(_ template: String, _ lookup: (String) -> String?) -> String {
        expand(template, lookup)
    }

    /// The placeholders of `template` (names without braces), in order, as `render` sees them.
    public static func placeholders(in template: String) -> [String] {
        var names: [String] = []
        _ = expand(template) { names.append($0); return nil }
        return names
    }

    /// The placeholders of `template` that name none of `known`, each once, in order.
    public static func unknownPlaceholders(in template: String, known: Set<String>) -> [String] {
        var seen = Set<String>()
        return placeholders(in: template).filter { !known.contains($0) && seen.insert($0).inserted }
    }

    /// One pass over `template`: each `{name}` becomes `lookup(name)`, or stays as written when
    /// that is nil.
    private static func expand(_ template: String, _ lookup: (String) -> String?) -> String {
        if template.utf8.allSatisfy({ $0 < 0x80 }),
           let out = template.utf8.withContiguousStorageIfAvailable({ expandASCII($0, lookup) }) {
            return out
        }
        var out = ""
        var rest = template[...]
        while let open = rest.firstIndex(of: "{") {
            out += rest[..<open]
            let afterOpen = rest.index(after: open)
            let name = rest[afterOpen...].prefix { $0.isASCII && ($0.isLetter || $0.isNumber || "_-./".contains($0)) }
            let close = name.endIndex
            if !name.isEmpty, close < rest.endIndex, rest[close] == "}", let value = lookup(String(name)) {
                out += value
                rest = rest[rest.index(after: close)...]
            } else {
                out.append("{")
                rest = rest[afterOpen...]
            }
        }
        out += rest
        return out
    }

    /// `expand` for an ASCII template (a transaction's display text is rendered at every
    /// challenge), on its bytes: in ASCII every byte is a Character (CR LF aside, which is
    /// neither a brace nor in a name), so the result is the same as walking Characters, at a
    /// fraction of the cost. The template is read in place and the text written into a buffer
    /// of bytes: pieces of it as `Substring`s retained the template (shared by every worker)
    /// twice a placeholder.
    private static func expandASCII(_ t: UnsafeBufferPointer<UInt8>, _ lookup: (String) -> String?) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(t.count + 32)
        var copied = 0
        var i = 0
        while let open = t[i...].firstIndex(of: UInt8(ascii: "{")) {
            let afterOpen = open + 1
            var close = afterOpen
            while close < t.count, isNameByte(t[close]) { close += 1 }
            if close > afterOpen, close < t.count, t[close] == UInt8(ascii: "}"),
               let value = lookup(String(decoding: UnsafeBufferPointer(rebasing: t[afterOpen..<close]), as: UTF8.self)) {
                out.append(contentsOf: UnsafeBufferPointer(rebasing: t[copied..<open]))
                out.append(contentsOf: value.utf8)
                i = close + 1
                copied = i
            } else {
                i = afterOpen
            }
        }
        out.append(contentsOf: UnsafeBufferPointer(rebasing: t[copied...]))
        return String(decoding: out, as: UTF8.self)
    }

    private static func isNameByte(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "/"):
            return true
        default:
            return false
        }
    }
}
