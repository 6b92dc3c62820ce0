import Foundation

/// The AM authenticate API as the SDKs speak it: JSON posts with AM's version header, and
/// steps answered callback by callback. The suites that drive journeys adopt it.
public protocol JourneyClient {}

extension JourneyClient {
    public static var authPath: String { "/am/json/realms/root/authenticate" }
    public static var jsonHeaders: [(String, String)] {
        [("Content-Type", "application/json"), ("Accept-API-Version", "resource=2.0, protocol=1.0")]
    }

    /// POSTs `body` as JSON (nothing when nil) with `jsonHeaders` and `headers`, from the
    /// loopback address `source` when given.
    public static func post(_ g: some GatewayUnderTest, _ target: String, _ body: Any?, headers: [(String, String)] = [],
                     source: String? = nil, timeout: Double = 10) throws -> HTTPResponse {
        let bytes = try body.map { [UInt8](try JSONSerialization.data(withJSONObject: $0)) } ?? []
        return try g.fetch("POST", target, headers: jsonHeaders + headers, body: bytes, source: source, timeout: timeout)
    }

    /// Fills the inputs of a step's callbacks with `values`, in order (output-only callbacks
    /// such as TextOutputCallback are sent back as they came).
    public static func answer(_ step: [String: Any], _ values: [Any]) -> [String: Any] {
        var s = step
        var callbacks = s["callbacks"] as? [[String: Any]] ?? []
        var i = 0
        for (n, cb) in callbacks.enumerated() {
            guard var inputs = cb["input"] as? [[String: Any]], !inputs.isEmpty, i < values.count else { continue }
            inputs[0]["value"] = values[i]
            i += 1
            callbacks[n]["input"] = inputs
        }
        s["callbacks"] = callbacks
        return s
    }

    /// The callbacks of a step (none when the body is not one).
    public static func callbacks(_ r: HTTPResponse) -> [[String: Any]] {
        ((try? r.json())?["callbacks"] as? [[String: Any]]) ?? []
    }

    /// The value of a callback's output named `name`.
    public static func output(_ callback: [String: Any]?, _ name: String) -> Any? {
        (callback?["output"] as? [[String: Any]])?.first { $0["name"] as? String == name }?["value"]
    }
}
