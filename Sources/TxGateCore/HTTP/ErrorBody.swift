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
