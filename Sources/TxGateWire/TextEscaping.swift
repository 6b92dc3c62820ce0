/// Escaping text for JSON strings and for XML/HTML markup, as the wire formats need it.
public enum JSONText {
    /// Escapes a string for use inside JSON double quotes.
    public static func escape(_ s: String) -> String {
        // Most strings need nothing: found in one pass over the bytes.
        var probe = s
        let clean = probe.withUTF8 { bytes in !bytes.contains { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C } }
        if clean { return s }
        return TextEscaping.escape(s, where: { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C }) { ch in
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

extension JSONText {
    /// `s` as a JSON string, quotes included, appended to `out`: the bytes `escape` gives.
    public static func write(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { bytes in
            var start = 0
            for i in 0..<bytes.count where bytes[i] < 0x20 || bytes[i] == 0x22 || bytes[i] == 0x5C {
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<i]))
                start = i + 1
                let b = bytes[i]
                switch b {
                case 0x22: out.append(contentsOf: #"\""#.utf8)
                case 0x5C: out.append(contentsOf: #"\\"#.utf8)
                case 0x0A: out.append(contentsOf: #"\n"#.utf8)
                case 0x0D: out.append(contentsOf: #"\r"#.utf8)
                case 0x09: out.append(contentsOf: #"\t"#.utf8)
                default:
                    let hex = Array("0123456789abcdef".utf8)
                    out.append(contentsOf: #"\u00"#.utf8)
                    out.append(hex[Int(b >> 4)])
                    out.append(hex[Int(b & 0xF)])
                }
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start...]))
        }
        out.append(UInt8(ascii: "\""))
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
