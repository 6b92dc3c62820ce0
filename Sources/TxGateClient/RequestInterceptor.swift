import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TxGateWire

/// The action an outbound call is tagged with (WIRE.md §6), so that interceptors can tell a
/// journey's first call from its later steps, a resume, or a logout.
public struct InterceptorAction: Sendable, Equatable {
    public enum Kind: String, Sendable, CaseIterable {
        case startAuthenticate = "START_AUTHENTICATE"
        case authenticate = "AUTHENTICATE"
        case resumeAuthenticate = "RESUME_AUTHENTICATE"
        case logout = "LOGOUT"
        case authorize = "AUTHORIZE"
        case exchangeToken = "EXCHANGE_TOKEN"
        case refreshToken = "REFRESH_TOKEN"
        case revokeToken = "REVOKE_TOKEN"
        case userInfo = "USER_INFO"
        case endSession = "END_SESSION"
        case pushRegister = "PUSH_REGISTER"
        case pushAuthenticate = "PUSH_AUTHENTICATE"
    }

    public var kind: Kind
    /// `{"tree": <name or advice XML>, "type": "service" | "composite_advice"}` on
    /// START_AUTHENTICATE and AUTHENTICATE; empty otherwise.
    public var payload: [String: String]

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
public protocol RequestInterceptor: Sendable {
    func intercept(_ request: URLRequest, action: InterceptorAction) async throws -> URLRequest
}

/// An interceptor from a closure.
public struct ClosureInterceptor: RequestInterceptor {
    let body: @Sendable (URLRequest, InterceptorAction) async throws -> URLRequest
    public init(_ body: @escaping @Sendable (URLRequest, InterceptorAction) async throws -> URLRequest) { self.body = body }
    public func intercept(_ request: URLRequest, action: InterceptorAction) async throws -> URLRequest {
        try await body(request, action)
    }
}

extension URLRequest {
    /// Adds `name=value` to the URL's query (an interceptor's most common change).
    public mutating func addQueryItem(_ name: String, _ value: String) {
        guard let url else { return }
        guard var c = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return }
        let existing = c.percentEncodedQuery.map { $0 + "&" } ?? ""
        c.percentEncodedQuery = existing + name + "=" + Query.encode(value)
        if let u = c.url { self.url = u }
    }
}
