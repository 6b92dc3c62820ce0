import HTTPCore

/// The JSON error body every gateway error uses, AM's shape: `{"code":N,"reason":"...","message":"..."}`.
public enum ErrorBody {
    public static func json(status: Int, message: String) -> [UInt8] {
        Array(text(status: status, message: message).utf8)
    }

    /// The same, with more members after `message` (`members` is JSON text such as
    /// `"advices":{...}`, written as given).
    public static func text(status: Int, message: String, members: String = "") -> String {
        #"{"code":\#(status),"reason":"\#(JSONText.escape(HTTPStatus.reason(status)))","message":"\#(JSONText.escape(message))""#
            + (members.isEmpty ? "}" : "," + members + "}")
    }

    public static let contentType = "application/json"
}

public enum JSONText {
    /// Escapes a string for use inside JSON double quotes.
    public static func escape(_ s: String) -> String {
        var needs = false
        for b in s.utf8 where b < 0x20 || b == 0x22 || b == 0x5C { needs = true; break }
        guard needs else { return s }
        var out = ""
        out.reserveCapacity(s.utf8.count + 8)
        for ch in s.unicodeScalars {
            switch ch {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if ch.value < 0x20 {
                    out += "\\u00" + (ch.value < 0x10 ? "0" : "") + String(ch.value, radix: 16)
                } else {
                    out.unicodeScalars.append(ch)
                }
            }
        }
        return out
    }
}
