import HTTPCore

/// The JSON error body every gateway error uses, AM's shape: `{"code":N,"reason":"...","message":"..."}`.
public enum ErrorBody {
    public static func json(status: Int, message: String, members: String = "") -> [UInt8] {
        var out = ByteWriter(capacity: 64 + message.utf8.count + members.utf8.count)
        out.append(#"{"code":"# as StaticString)
        out.appendDecimal(status)
        out.append(#","reason":"# as StaticString)
        JSONText.write(HTTPStatus.reason(status), into: &out)
        out.append(#","message":"# as StaticString)
        JSONText.write(message, into: &out)
        if !members.isEmpty {
            out.append(UInt8(ascii: ","))
            out.append(members)
        }
        out.append(UInt8(ascii: "}"))
        return out.bytes
    }

    /// The same, with more members after `message` (`members` is JSON text such as
    /// `"advices":{...}`, written as given).
    public static func text(status: Int, message: String, members: String = "") -> String {
        String(decoding: json(status: status, message: message, members: members), as: UTF8.self)
    }

    public static let contentType = "application/json"
}
