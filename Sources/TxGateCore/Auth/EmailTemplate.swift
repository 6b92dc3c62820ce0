/// Fills `{name}` placeholders: email subjects and bodies, and what a transaction displays.
public enum EmailTemplate {
    /// Replaces each `{name}` whose name is in `values`; unknown placeholders stay as written,
    /// so a typo shows in the message instead of vanishing. One pass: a value that itself
    /// contains `{name}` is not expanded again, so user input cannot pull in other values.
    /// Names are letters, digits, `_`, `-`, `.` and `/` (JSON Pointers).
    public static func render(_ template: String, _ values: [String: String]) -> String {
        var out = ""
        var rest = template[...]
        while let open = rest.firstIndex(of: "{") {
            out += rest[..<open]
            let afterOpen = rest.index(after: open)
            let name = rest[afterOpen...].prefix { $0.isASCII && ($0.isLetter || $0.isNumber || "_-./".contains($0)) }
            let close = name.endIndex
            if !name.isEmpty, close < rest.endIndex, rest[close] == "}", let value = values[String(name)] {
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
