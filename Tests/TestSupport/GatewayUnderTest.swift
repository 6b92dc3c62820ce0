import Foundation

/// A running gateway as a test sees it: an HTTP port, a log, and a clock. Two forms conform:
/// the spawned `txgate serve` (`GatewayInstance`: the system's clock, which only sleeping
/// moves on) and the gateway run inside the test process (TxGateTests' `InProcessGateway`: a
/// `ManualClock` the test advances, so that expiries are tested without waiting). A test body
/// written against this protocol runs unchanged against either (TxGateTests' `GatewayForm`).
public protocol GatewayUnderTest: Sendable {
    /// The port it listens on, on 127.0.0.1.
    var port: Int { get }
    /// What it has logged so far: JSON lines.
    var logText: String { get }
    /// Its clock, in Unix seconds (what TOTP codes and expiries are computed from).
    var nowS: Int { get }
    /// Moves its clock on by `seconds`: at once in process; the live binary sleeps.
    func advance(seconds: Double)
}

extension GatewayUnderTest {
    /// A fresh keep-alive connection to the gateway.
    public func connect(timeout: Double = 10) throws -> RawHTTPClient {
        try RawHTTPClient(port: port, timeout: timeout)
    }

    /// One request on its own connection (from the loopback address `source`, to look like
    /// another client).
    public func fetch(_ method: String = "GET", _ target: String, headers: [(String, String)] = [],
                      body: [UInt8]? = nil, source: String? = nil, timeout: Double = 10) throws -> HTTPResponse {
        try RawHTTPClient.fetch(port: port, method, target, headers: headers, body: body, source: source, timeout: timeout)
    }

    /// The JSON log lines written so far (lines that are not JSON are skipped).
    public func logLines() -> [[String: Any]] {
        logText.split(separator: "\n").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }
    }

    /// `http://127.0.0.1:<port>`: the gateway's public URL when the configuration names none.
    public var baseURL: String { "http://127.0.0.1:\(port)" }
}
