import Foundation
import TestSupport

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
