/// Escaping text for JSON strings and for XML/HTML markup, as the wire formats need it.
public enum JSONText {
    /// Escapes a string for use inside JSON double quotes.
    public static func escape(_ s: String) -> String {
        TextEscaping.escape(s, where: { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C }) { ch in
            switch ch {
            case "\"": return "\\\""
            case "\\": return "\\\\"
            case "\n": return "\\n"
            case "\r": return "\\r"
            case "\t": return "\\t"
            default:
                guard ch.value < 0x20 else { return nil }
                return "\\u00" + (ch.value < 0x10 ? "0" : "") + String(ch.value, radix: 16)
            }
        }
    }
}

/// `&`, `<`, `>` and `"` as entities: text for XML (advices) and HTML (the login page).
public enum MarkupText {
    public static func escape(_ s: String) -> String {
        TextEscaping.escape(s, where: { $0 == 0x26 || $0 == 0x3C || $0 == 0x3E || $0 == 0x22 }) { ch in
            switch ch {
            case "&": return "&amp;"
            case "<": return "&lt;"
            case ">": return "&gt;"
            case "\"": return "&quot;"
            default: return nil
            }
        }
    }
}

/// One pass over the scalars; a string with no byte to escape is returned as it is.
package enum TextEscaping {
    package static func escape(_ s: String, where needs: (UInt8) -> Bool, _ replacement: (Unicode.Scalar) -> String?) -> String {
        guard s.utf8.contains(where: needs) else { return s }
        var out = ""
        out.reserveCapacity(s.utf8.count + 16)
        for ch in s.unicodeScalars {
            if let r = replacement(ch) { out += r } else { out.unicodeScalars.append(ch) }
        }
        return out
    }
}
