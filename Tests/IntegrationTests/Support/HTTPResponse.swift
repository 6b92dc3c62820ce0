import Foundation

/// A response as read off the wire.
struct HTTPResponse: CustomStringConvertible {
    var version: String
    var status: Int
    var reason: String
    /// In the order received, names as received.
    var headers: [(name: String, value: String)]
    /// The de-chunked body.
    var body: [UInt8]
    /// How the body was framed on the wire.
    var framing: Framing

    enum Framing: Equatable {
        case none
        case contentLength(Int)
        case chunked
        case untilClose
    }

    /// The first value of a header, name compared case-insensitively.
    func header(_ name: String) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    /// Every value of a header, in order.
    func headerValues(_ name: String) -> [String] {
        headers.filter { $0.name.caseInsensitiveCompare(name) == .orderedSame }.map(\.value)
    }

    func hasHeader(_ name: String) -> Bool { header(name) != nil }

    /// The comma-separated tokens of every value of a header, lowercased.
    func headerTokens(_ name: String) -> [String] {
        headerValues(name).flatMap { $0.split(separator: ",") }
            .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            .filter { !$0.isEmpty }
    }

    var bodyText: String { String(decoding: body, as: UTF8.self) }

    /// The body parsed as a JSON object.
    func json() throws -> [String: Any] {
        guard let obj = try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else {
            throw HarnessError("body is not a JSON object: \(bodyText.prefix(300))")
        }
        return obj
    }

    var headerSummary: String {
        headers.map { "\($0.name): \($0.value)" }.joined(separator: "\n")
    }

    var description: String {
        let text = bodyText
        let shown = text.count > 500 ? String(text.prefix(500)) + "…(\(body.count) bytes)" : text
        return "\(version) \(status) \(reason)\n\(headerSummary)\n\n\(shown)"
    }
}

/// What demo-bank's /echo saw arrive.
struct EchoedRequest: CustomStringConvertible {
    let method: String
    let uri: String
    let version: String
    let headers: [(name: String, value: String)]
    let bodyLength: Int
    let bodySha256: String
    let bodyBase64: String

    init(_ response: HTTPResponse) throws {
        let obj = try response.json()
        guard let method = obj["method"] as? String, let uri = obj["uri"] as? String,
              let list = obj["headers"] as? [[String: Any]],
              let length = (obj["bodyLength"] as? NSNumber)?.intValue,
              let sha = obj["bodySha256"] as? String, let b64 = obj["bodyBase64"] as? String else {
            throw HarnessError("not a demo-bank /echo body: \(response.bodyText.prefix(300))")
        }
        self.method = method
        self.uri = uri
        self.version = obj["version"] as? String ?? ""
        self.headers = list.map { (name: $0["name"] as? String ?? "", value: $0["value"] as? String ?? "") }
        self.bodyLength = length
        self.bodySha256 = sha
        self.bodyBase64 = b64
    }

    func header(_ name: String) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    func headerValues(_ name: String) -> [String] {
        headers.filter { $0.name.caseInsensitiveCompare(name) == .orderedSame }.map(\.value)
    }

    func hasHeader(_ name: String) -> Bool { header(name) != nil }

    var body: [UInt8] { [UInt8](Data(base64Encoded: bodyBase64) ?? Data()) }

    var description: String {
        "\(method) \(uri) \(version)\n" + headers.map { "\($0.name): \($0.value)" }.joined(separator: "\n")
            + "\n(body \(bodyLength) bytes)"
    }
}
