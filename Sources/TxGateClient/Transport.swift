import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TxGateWire

/// A response as the client hands it back: status, headers (every value of a repeated
/// header kept), body, and the step-up challenge it carried if any.
public struct ClientResponse: Sendable {
    /// The HTTP status code.
    public var status: Int
    /// The headers, sorted by name (any case); a repeated header is one entry per value.
    public var headers: [(name: String, value: String)]
    /// The body, as received.
    public var body: Data
    /// Set when this response is itself a step-up answer (e.g. a second one after the retry).
    public var challenge: StepUpChallenge?

    /// A response with these parts (for tests and fakes: the client makes its own).
    ///
    /// - Parameters:
    ///   - status: The HTTP status code.
    ///   - headers: The headers.
    ///   - body: The body.
    ///   - challenge: The step-up challenge the response carries, if any.
    public init(status: Int, headers: [(name: String, value: String)], body: Data, challenge: StepUpChallenge? = nil) {
        self.status = status
        self.headers = headers
        self.body = body
        self.challenge = challenge
    }

    /// The first value of a header.
    ///
    /// - Parameter name: The header's name, in any case.
    /// - Returns: Its first value, or nil when the response has no such header.
    public func header(_ name: String) -> String? { headers.first { $0.name.lowercased() == name.lowercased() }?.value }
    /// The body as UTF-8 text (an invalid sequence becomes U+FFFD).
    public var bodyText: String { String(decoding: body, as: UTF8.self) }
}

/// URLSession without redirects (a 307 or 303 is a challenge to read, not to follow) and
/// without cookie handling (the session travels in its header, on the configured origin only).
final class Transport: NSObject, URLSessionTaskDelegate, @unchecked Sendable {
    // @unchecked: `session` is set once in init and URLSession is thread-safe.
    private var session: URLSession!

    init(timeout: TimeInterval) {
        super.init()
        let config = URLSessionConfiguration.ephemeral
        config.httpCookieStorage = nil
        config.httpShouldSetCookies = false
        config.urlCache = nil
        config.timeoutIntervalForRequest = timeout
        session = URLSession(configuration: config, delegate: self, delegateQueue: nil)
    }

    func invalidate() { session.finishTasksAndInvalidate() }

    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void) {
        completionHandler(nil)
    }

    func perform(_ request: URLRequest) async throws -> ClientResponse {
        let (data, response): (Data, URLResponse) = try await withCheckedThrowingContinuation { k in
            let task = session.dataTask(with: request) { data, response, error in
                if let error { k.resume(throwing: TxGateClientError.transport("\(request.url?.absoluteString ?? "?"): \(error.localizedDescription)")) }
                else if let response { k.resume(returning: (data ?? Data(), response)) }
                else { k.resume(throwing: TxGateClientError.transport("no response")) }
            }
            task.resume()
        }
        guard let http = response as? HTTPURLResponse else { throw TxGateClientError.transport("not an HTTP response") }
        var headers: [(name: String, value: String)] = []
        for (k, v) in http.allHeaderFields {
            guard let name = k as? String, let value = v as? String else { continue }
            headers.append((name, value))
        }
        headers.sort { $0.name.lowercased() < $1.name.lowercased() }
        let www = headers.filter { $0.name.lowercased() == "www-authenticate" }.map(\.value)
        let location = headers.first { $0.name.lowercased() == "location" }?.value
        let challenge = StepUpChallenge.detect(status: http.statusCode, wwwAuthenticate: www, location: location, body: Array(data))
        return ClientResponse(status: http.statusCode, headers: headers, body: data, challenge: challenge)
    }
}
