import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TxGateWire

/// The action an outbound call is tagged with, so that a ``RequestInterceptor`` can tell a
/// journey's first call from its later steps, a resume, or a logout.
///
/// The names are those of the ForgeRock (Ping) SDKs' request interceptors.
public struct InterceptorAction: Sendable, Equatable {
    /// The SDKs' action names. This library sends the first four; the others are defined for
    /// interceptors shared with the SDKs, and no call of this library uses them yet.
    public enum Kind: String, Sendable, CaseIterable {
        /// A journey's first call: ``TxGateClient/start(journey:)`` or ``TxGateClient/start(advice:)``.
        case startAuthenticate = "START_AUTHENTICATE"
        /// A journey's later step: ``TxGateClient/next(_:)``.
        case authenticate = "AUTHENTICATE"
        /// A suspended journey's resume: ``TxGateClient/resume(resumeURI:)``.
        case resumeAuthenticate = "RESUME_AUTHENTICATE"
        /// The session's end: ``TxGateClient/logout()``.
        case logout = "LOGOUT"
        /// OAuth 2.0's authorization request (not sent by this library).
        case authorize = "AUTHORIZE"
        /// OAuth 2.0's code-for-token exchange (not sent by this library).
        case exchangeToken = "EXCHANGE_TOKEN"
        /// OAuth 2.0's token refresh (not sent by this library).
        case refreshToken = "REFRESH_TOKEN"
        /// OAuth 2.0's token revocation (not sent by this library).
        case revokeToken = "REVOKE_TOKEN"
        /// OpenID Connect's userinfo call (not sent by this library).
        case userInfo = "USER_INFO"
        /// OpenID Connect's end-session call (not sent by this library).
        case endSession = "END_SESSION"
        /// A push authenticator's registration (not sent by this library).
        case pushRegister = "PUSH_REGISTER"
        /// A push authenticator's answer (not sent by this library).
        case pushAuthenticate = "PUSH_AUTHENTICATE"
    }

    /// Which action the call is.
    public var kind: Kind
    /// `{"tree": <name or advice XML>, "type": "service" | "composite_advice"}` on
    /// START_AUTHENTICATE and AUTHENTICATE; empty otherwise.
    public var payload: [String: String]

    /// An action of `kind`.
    ///
    /// - Parameters:
    ///   - kind: Which action.
    ///   - payload: What the action is about (see ``payload``).
    public init(_ kind: Kind, payload: [String: String] = [:]) {
        self.kind = kind
        self.payload = payload
    }

    /// The action's wire name, e.g. `START_AUTHENTICATE`.
    public var type: String { kind.rawValue }
}

/// Changes an outbound call before it is sent: its URL and query, method, headers (cookies are
/// the `Cookie` header) and body. Interceptors run in the order they were registered, each on
/// what the previous one returned.
///
/// They run on the client's journey and logout calls, not on the requests of
/// ``TxGateClient/send(_:delegate:)`` (change those before you pass them), nor on
/// ``TxGateClient/validate()``.
public protocol RequestInterceptor: Sendable {
    /// Returns the call to send in place of `request`.
    ///
    /// - Parameters:
    ///   - request: The call as the client (or the interceptor before this one) made it.
    ///   - action: What the call is for.
    /// - Returns: The call to send.
    /// - Throws: Any error, to stop the call: it reaches the caller of the client's method.
    func intercept(_ request: URLRequest, action: InterceptorAction) async throws -> URLRequest
}

/// An interceptor from a closure.
///
/// ```swift
/// let forceAuth = ClosureInterceptor { request, action in
///     var request = request
///     if action.kind == .startAuthenticate { request.addQueryItem("ForceAuth", "true") }
///     return request
/// }
/// ```
public struct ClosureInterceptor: RequestInterceptor {
    let body: @Sendable (URLRequest, InterceptorAction) async throws -> URLRequest
    /// An interceptor that runs `body`.
    ///
    /// - Parameter body: Returns the call to send, from the call and its action.
    public init(_ body: @escaping @Sendable (URLRequest, InterceptorAction) async throws -> URLRequest) { self.body = body }
    /// Runs the closure.
    ///
    /// - Parameters:
    ///   - request: The call as made so far.
    ///   - action: What the call is for.
    /// - Returns: What the closure returned.
    /// - Throws: What the closure threw.
    public func intercept(_ request: URLRequest, action: InterceptorAction) async throws -> URLRequest {
        try await body(request, action)
    }
}

/// A helper for interceptors.
extension URLRequest {
    /// Adds `name=value` to the URL's query (an interceptor's most common change); does nothing
    /// to a request without a URL.
    ///
    /// - Parameters:
    ///   - name: The parameter's name, sent as it is.
    ///   - value: The parameter's value, percent-encoded.
    public mutating func addQueryItem(_ name: String, _ value: String) {
        guard let url else { return }
        guard var c = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return }
        let existing = c.percentEncodedQuery.map { $0 + "&" } ?? ""
        c.percentEncodedQuery = existing + name + "=" + Query.encode(value)
        if let u = c.url { self.url = u }
    }
}
