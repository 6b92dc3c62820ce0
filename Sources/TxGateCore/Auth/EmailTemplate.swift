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
}
