import Foundation

/// A response as read off the wire.
public struct HTTPResponse: CustomStringConvertible, Sendable {
    public var version: String
    public var status: Int
    public var reason: String
    /// In the order received, names as received.
    public var headers: [(name: String, value: String)]
    /// The de-chunked body.
    public var body: [UInt8]
    /// How the body was framed on the wire.
    public var framing: Framing
    /// The interim (1xx) responses that came before it, such as `100 Continue`.
    public var interim: [Int] = []

    public enum Framing: Equatable, Sendable {
        case none
        case contentLength(Int)
        case chunked
        case untilClose
    }

    /// The first value of a header, name compared case-insensitively.
    public func header(_ name: String) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    /// Every value of a header, in order.
    public func headerValues(_ name: String) -> [String] {
        headers.filter { $0.name.caseInsensitiveCompare(name) == .orderedSame }.map(\.value)
    }

    public func hasHeader(_ name: String) -> Bool { header(name) != nil }

    /// The comma-separated tokens of every value of a header, lowercased.
    public func headerTokens(_ name: String) -> [String] {
        headerValues(name).flatMap { $0.split(separator: ",") }
            .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            .filter { !$0.isEmpty }
    }

    public var bodyText: String { String(decoding: body, as: UTF8.self) }

    /// The body parsed as a JSON object.
    public func json() throws -> [String: Any] {
        guard let obj = try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else {
            throw HarnessError("body is not a JSON object: \(bodyText.prefix(300))")
        }
        return obj
    }

    public var headerSummary: String {
        headers.map { "\($0.name): \($0.value)" }.joined(separator: "\n")
    }

    public var description: String {
        let text = bodyText
        let shown = text.count > 500 ? String(text.prefix(500)) + "…(\(body.count) bytes)" : text
        return "\(version) \(status) \(reason)\n\(headerSummary)\n\n\(shown)"
    }
}

