import Foundation
import Testing
import TestSupport

/// Asserts that a response is the gateway's JSON error:
/// `{"code":N,"reason":"...","message":"..."}` with `Content-Type: application/json`.
func expectGatewayError(_ r: HTTPResponse, _ code: Int, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(r.status == code, "expected status \(code), got:\n\(r)", sourceLocation: sourceLocation)
    let contentType = r.header("Content-Type") ?? ""
    #expect(contentType.lowercased().hasPrefix("application/json"),
            "error Content-Type is '\(contentType)'", sourceLocation: sourceLocation)
    guard let obj = try? r.json() else {
        Issue.record("error body is not a JSON object: \(r.bodyText.prefix(300))", sourceLocation: sourceLocation)
        return
    }
    #expect((obj["code"] as? NSNumber)?.intValue == code, "error body code: \(obj)", sourceLocation: sourceLocation)
    #expect(!((obj["reason"] as? String) ?? "").isEmpty, "error body has no reason: \(obj)", sourceLocation: sourceLocation)
    #expect(!((obj["message"] as? String) ?? "").isEmpty, "error body has no message: \(obj)", sourceLocation: sourceLocation)
}

/// Runs `request` and asserts that its answer is the gateway's JSON error `code`, given in
/// less than `seconds`; returns the response and the seconds it took.
@discardableResult
func expectGatewayError(_ code: Int, within seconds: Double, sourceLocation: SourceLocation = #_sourceLocation,
                        _ request: () throws -> HTTPResponse) throws -> (HTTPResponse, Double) {
    let (r, elapsed) = try Timing.measure(request)
    expectGatewayError(r, code, sourceLocation: sourceLocation)
    #expect(elapsed < seconds, "\(code) took \(elapsed) s", sourceLocation: sourceLocation)
    return (r, elapsed)
}
