import Foundation
import TxGateWire

/// Where the client talks to, and how it names things on the wire.
///
/// Only ``serverURL`` has no default: the defaults are TxGate's, and AM's for an AM deployment
/// with IG in front of the API.
///
/// ```swift
/// let configuration = ClientConfiguration(serverURL: URL(string: "https://gw.example.com")!)
/// ```
public struct ClientConfiguration: Sendable {
    /// How a retried request names its approved transaction.
    ///
    /// The gateway strips the TxId before it forwards the request, so the API never sees it.
    public enum TxIdCarrier: Sendable {
        /// `?_txid=TXID` added to the URL (what the SDKs send to IG and TxGate).
        case query
        /// `X-TxID: TXID` (what the JS SDK sends to non-IG resources).
        case header
    }

    /// The gateway (or AM's host): scheme, host and port. Journeys, resume URIs and the session
    /// token are only ever for this origin.
    public var serverURL: URL
    /// The path of the authentication service under `serverURL` (`/am` for TxGate; `/am` or
    /// `/openam` for AM): empty, or starting with `/`, with no `?` or `#`.
    public var amPath: String
    /// The realm journeys run in (`/`, or `/sub`).
    public var realm: String
    /// The header (and cookie) that carries the session token.
    public var sessionHeader: String
    /// The journey `login` runs when no other is named.
    public var loginJourney: String
    /// How the retry after a transaction's approval names it: ``TxIdCarrier/query`` (the default)
    /// or ``TxIdCarrier/header``.
    public var txidCarrier: TxIdCarrier
    /// Ask for the 401 SSOADVICE form (`x-authenticate-response: header`) rather than a redirect.
    public var requestHeaderChallenges: Bool
    /// `Accept-API-Version` on the authentication calls.
    public var acceptAPIVersion: String
    /// How long one request may wait for an answer, in seconds (URLSession's request timeout).
    public var timeout: TimeInterval

    /// A configuration for the server at `serverURL`, with TxGate's defaults for the rest.
    ///
    /// - Parameters:
    ///   - serverURL: The gateway: an absolute `http` or `https` URL; only its scheme, host and
    ///     port are used.
    ///   - amPath: The authentication service's path under `serverURL`, starting with `/`.
    ///   - realm: The realm journeys run in.
    ///   - sessionHeader: The header that carries the session token.
    ///   - loginJourney: The journey a login challenge without a named tree runs.
    ///   - txidCarrier: How the retry names an approved transaction.
    ///   - requestHeaderChallenges: Whether to ask for the 401 form of a challenge rather than a redirect.
    ///   - acceptAPIVersion: The `Accept-API-Version` of the authentication calls.
    ///   - timeout: How long one request may wait for an answer, in seconds.
    public init(serverURL: URL, amPath: String = "/am", realm: String = "/", sessionHeader: String = "iPlanetDirectoryPro",
                loginJourney: String = "Login", txidCarrier: TxIdCarrier = .query, requestHeaderChallenges: Bool = true,
                acceptAPIVersion: String = "resource=2.0, protocol=1.0", timeout: TimeInterval = 30) {
        self.serverURL = serverURL
        self.amPath = amPath
        self.realm = realm
        self.sessionHeader = sessionHeader
        self.loginJourney = loginJourney
        self.txidCarrier = txidCarrier
        self.requestHeaderChallenges = requestHeaderChallenges
        self.acceptAPIVersion = acceptAPIVersion
        self.timeout = timeout
    }

    /// `{server}{amPath}/json/realms/root[/realms/SUB]/<endpoint>`. Throws
    /// `.invalidConfiguration` (rather than trapping) when `serverURL` or `amPath`, both the
    /// caller's, cannot make one.
    func amURL(_ endpoint: String, query: [(String, String)] = []) throws -> URL {
        let origin = Origin(serverURL)
        guard ["http", "https"].contains(origin.scheme), !origin.host.isEmpty else {
            throw TxGateClientError.invalidConfiguration("serverURL \(serverURL.absoluteString) is not an absolute http(s) URL with a host")
        }
        guard amPath.isEmpty || amPath.hasPrefix("/"), !amPath.contains("?"), !amPath.contains("#") else {
            throw TxGateClientError.invalidConfiguration("amPath \(amPath) is not a path: it must start with '/' and have no '?' or '#'")
        }
        var path = amPath.hasSuffix("/") ? String(amPath.dropLast()) : amPath
        path += "/json/realms/root"
        for part in realm.split(separator: "/") { path += "/realms/" + Query.encode(String(part)) }
        var text = Origin(serverURL).text + path + "/" + endpoint
        if !query.isEmpty { text += "?" + query.map { "\($0.0)=\(Query.encode($0.1))" }.joined(separator: "&") }
        guard let url = URL(string: text) else {
            throw TxGateClientError.invalidConfiguration("\(text) is not a URL (serverURL \(serverURL.absoluteString), amPath \(amPath))")
        }
        return url
    }

    /// Whether `url` is on the configured server: the same scheme, host and port, a port left
    /// out being the scheme's default.
    ///
    /// The client sends the session token only to its own origin, and resumes only links on it.
    ///
    /// - Parameter url: Any URL.
    /// - Returns: `true` when `url` has ``serverURL``'s scheme, host and port.
    public func isOwnOrigin(_ url: URL) -> Bool { Origin(url) == Origin(serverURL) }
}

/// Scheme, host and port, with the scheme's default port filled in.
struct Origin: Equatable {
    let scheme: String
    let host: String
    let port: Int

    init(_ url: URL) {
        let c = URLComponents(url: url, resolvingAgainstBaseURL: true)
        scheme = (c?.scheme ?? "").lowercased()
        host = (c?.host ?? "").lowercased()
        port = c?.port ?? (scheme == "https" ? 443 : scheme == "http" ? 80 : -1)
    }

    var text: String {
        let defaultPort = (scheme == "https" && port == 443) || (scheme == "http" && port == 80)
        let h = host.contains(":") ? "[\(host)]" : host
        return "\(scheme)://\(h)" + (defaultPort ? "" : ":\(port)")
    }
}
