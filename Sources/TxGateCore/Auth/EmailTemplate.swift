/// Fills `{name}` placeholders: email subjects and bodies, and what a transaction displays.
public enum EmailTemplate {
    /// Replaces each `{name}` whose name is in `values`; unknown placeholders stay as written,
    /// so a typo shows in the message instead of vanishing (and `txgate check` refuses one:
    /// `unknownPlaceholders`). One pass: a value that itself contains `{name}` is not expanded
    /// again, so user input cannot pull in other values.
    /// Names are letters, digits, `_`, `-`, `.` and `/` (JSON Pointers).
    public static func render(_ template: String, _ values: [String: String]) -> String {
        expand(template) { values[String($0)] }
    }

    /// `render` with each value from `lookup`, asked only for the names the template holds.
    public static func render(_ template: String, _ lookup: (Substring) -> String?) -> String {
        expand(template, lookup)
    }

    /// The placeholders of `template` (names without braces), in order, as `render` sees them.
    public static func placeholders(in template: String) -> [String] {
        var names: [String] = []
        _ = expand(template) { names.append(String($0)); return nil }
        return names
    }

    /// The placeholders of `template` that name none of `known`, each once, in order.
    public static func unknownPlaceholders(in template: String, known: Set<String>) -> [String] {
        var seen = Set<String>()
        return placeholders(in: template).filter { !known.contains($0) && seen.insert($0).inserted }
    }

    /// One pass over `template`: each `{name}` becomes `lookup(name)`, or stays as written when
    /// that is nil.
    private static func expand(_ template: String, _ lookup: (Substring) -> String?) -> String {
        if template.utf8.allSatisfy({ $0 < 0x80 }) { return expandASCII(template, lookup) }
        var out = ""
        var rest = template[...]
        while let open = rest.firstIndex(of: "{") {
            out += rest[..<open]
            let afterOpen = rest.index(after: open)
            let name = rest[afterOpen...].prefix { $0.isASCII && ($0.isLetter || $0.isNumber || "_-./".contains($0)) }
            let close = name.endIndex
            if !name.isEmpty, close < rest.endIndex, rest[close] == "}", let value = lookup(name) {
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
    /// step-up), on bytes: in ASCII every byte is a Character (CR LF aside, which is neither a
    /// brace nor in a name), so the result is the same as walking Characters, at a fraction of
    /// the cost.
    private static func expandASCII(_ template: String, _ lookup: (Substring) -> String?) -> String {
        let u = template.utf8
        var out = ""
        out.reserveCapacity(u.count + 32)
        var copied = u.startIndex
        var i = u.startIndex
        while let open = u[i...].firstIndex(of: UInt8(ascii: "{")) {
            let afterOpen = u.index(after: open)
            var close = afterOpen
            while close < u.endIndex, isNameByte(u[close]) { close = u.index(after: close) }
            if close > afterOpen, close < u.endIndex, u[close] == UInt8(ascii: "}"),
               let value = lookup(Substring(u[afterOpen..<close])) {
                out += Substring(u[copied..<open])
                out += value
                i = u.index(after: close)
                copied = i
            } else {
                i = afterOpen
            }
        }
        out += Substring(u[copied...])
        return out
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
