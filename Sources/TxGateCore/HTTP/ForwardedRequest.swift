import HTTPCore

/// The request a forward-auth proxy asks about on `/-/authz` (WIRE.md §10), from the headers
/// nginx (`X-Original-Method`, `X-Original-URI`) or Traefik (`X-Forwarded-Method`,
/// `X-Forwarded-Uri`, with `X-Forwarded-Proto` and `X-Forwarded-Host`) set.
public struct ForwardedRequest: Equatable, Sendable {
    public enum Proxy: Equatable, Sendable {
        /// nginx `auth_request` accepts only 2xx, 401 and 403: a browser's login redirect is a
        /// 401 with `Location`, which nginx turns into a redirect with `error_page 401`.
        case nginx
        /// Traefik `forwardAuth` returns any non-2xx answer to the client: a browser gets a 302.
        case traefik
    }

    /// Why the original request cannot be known (400).
    public struct Invalid: Error, Equatable {
        public let reason: String
        init(_ reason: String) { self.reason = reason }
    }

    public var proxy: Proxy
    public var method: String
    /// The original request target: a path with its query (origin-form).
    public var target: String

    public init(proxy: Proxy, method: String, target: String) {
        self.proxy = proxy
        self.method = method
        self.target = target
    }

    /// The original request, or what is missing; `fallbackMethod` is the method of the
    /// `/-/authz` request itself (nginx forwards the original method unless told otherwise).
    public static func parse(_ headers: HTTPHeaders, fallbackMethod: String) -> Result<ForwardedRequest, Invalid> {
        if let uri = single(headers, "X-Original-URI") {
            guard let target = uri else { return .failure(Invalid("X-Original-URI is repeated")) }
            return build(.nginx, method: single(headers, "X-Original-Method"), fallbackMethod, target)
        }
        if let uri = single(headers, "X-Forwarded-Uri") {
            guard let target = uri else { return .failure(Invalid("X-Forwarded-Uri is repeated")) }
            return build(.traefik, method: single(headers, "X-Forwarded-Method"), fallbackMethod, target)
        }
        return .failure(Invalid("/-/authz needs the original request: X-Original-URI (nginx) or X-Forwarded-Uri (Traefik)"))
    }

    private static func build(_ proxy: Proxy, method: String??, _ fallback: String, _ target: String) -> Result<ForwardedRequest, Invalid> {
        guard target.hasPrefix("/") else { return .failure(Invalid("the original URI '\(target)' is not a path")) }
        let m: String
        switch method {
        case .none: m = fallback
        case .some(.none): return .failure(Invalid("the original method is repeated"))
        case .some(.some(let v)): m = v
        }
        guard !m.isEmpty, m.utf8.allSatisfy({ (0x41...0x5A).contains($0) }) else { return .failure(Invalid("'\(m)' is not an HTTP method")) }
        return .success(ForwardedRequest(proxy: proxy, method: m, target: target))
    }

    /// nil: absent; .some(nil): repeated (ambiguous, refused); else the one value.
    private static func single(_ headers: HTTPHeaders, _ name: String) -> String?? {
        let values = headers.values(name)
        if values.isEmpty { return .none }
        return values.count == 1 ? .some(values[0]) : .some(.none)
    }
}
