import Foundation

/// `oauth2.clientIdMetadataDocuments`: clients whose `client_id` is an `https` URL the gateway
/// fetches (draft-ietf-oauth-client-id-metadata-document, as the MCP authorization spec uses
/// it). Off unless configured. Such a client is public (PKCE) and gets a code only with the
/// person's consent (`consentJourney`), as a dynamically registered one.
public struct ClientIDMetadataConfig: ConfigObject, Sendable, Equatable {
    public var consentJourney = ""
    /// Fetch from loopback, private, link-local and other non-public addresses too (a test, a
    /// private network). Off: a document on such an address is refused before connecting.
    public var allowPrivateAddresses = false
    public var maxBytes = 5120
    public var timeoutMs = 3000
    /// How long a fetched document is used before it is fetched again (a failure: 30 s at most).
    public var cacheS = 300
    /// PEM CAs for the documents' servers (default: the system's).
    public var caFile: String?

    public init(consentJourney: String) { self.consentJourney = consentJourney }

    enum Key: String, ConfigKey { case consentJourney, allowPrivateAddresses, maxBytes, timeoutMs, cacheS, caFile }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        consentJourney = o.required(.consentJourney) ?? ""
        allowPrivateAddresses = o.value(.allowPrivateAddresses, default: allowPrivateAddresses)
        maxBytes = o.int(.maxBytes, default: maxBytes, atLeast: 256)
        if maxBytes > 65536 { o.invalid(.maxBytes, "at most 65536: a client's metadata is small") }
        timeoutMs = o.int(.timeoutMs, default: timeoutMs, atLeast: 100)
        if timeoutMs > 30000 { o.invalid(.timeoutMs, "at most 30000") }
        cacheS = o.int(.cacheS, default: cacheS, atLeast: 10)
        caFile = o.optional(.caFile)
    }
}

/// A client ID that is the URL of its own metadata document: what it may look like, where the
/// gateway may fetch it from, and the client the document describes.
public enum ClientMetadataDocument {
    /// A client ID the gateway would fetch: `https`, a host, a path other than `/`, no
    /// user, fragment or dot segment, at most 512 characters. Its host, port and request target.
    public static func location(_ clientId: String) -> (host: String, port: Int, target: String)? {
        guard clientId.hasPrefix("https://"), clientId.utf8.count <= 512, let c = URLComponents(string: clientId),
              c.scheme == "https", let host = c.host, !host.isEmpty, c.user == nil, c.password == nil, c.fragment == nil,
              c.percentEncodedPath.count > 1 else { return nil }
        let segments = c.percentEncodedPath.split(separator: "/", omittingEmptySubsequences: false)
        guard !segments.contains(where: { $0 == "." || $0 == ".." || $0.lowercased() == "%2e" || $0.lowercased().contains("%2e%2e") }) else { return nil }
        let target = c.percentEncodedPath + (c.percentEncodedQuery.map { "?" + $0 } ?? "")
        return (host.trimmingCharacters(in: CharacterSet(charactersIn: "[]")), c.port ?? 443, target)
    }

    /// Addresses a document is never fetched from unless `allowPrivateAddresses`: this host,
    /// private networks, link-local, shared and reserved space, multicast, and IPv6's mapped,
    /// NAT64 and unique-local forms (an IPv4-mapped address reads as its IPv4 address).
    public static let nonPublic: [CIDR] = [
        "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.0.0.0/24",
        "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
        "::/128", "::1/128", "64:ff9b::/96", "100::/64", "2001:db8::/32", "fc00::/7", "fe80::/10", "ff00::/8",
    ].map { try! CIDR(parsing: $0) }

    /// Why the gateway may not fetch from `address` (a numeric IP), or nil.
    public static func addressRefusal(_ address: String, allowPrivate: Bool) -> String? {
        guard let ip = IPAddress(address) else { return "'\(address)' is not an IP address" }
        if allowPrivate { return nil }
        return nonPublic.contains { $0.contains(ip) } ? "its host resolves to \(address), which is not a public address" : nil
    }

    /// What a document describes (checked as a registration's metadata is, `DynamicClientID.metadata`):
    /// `client_id` exactly the URL it was fetched from, a public client (no secret, no key).
    public static func client(_ body: [UInt8], url: String, allowedScopes: Set<String>) -> Result<(OAuthClient, name: String?), OAuthError> {
        func refuse(_ d: String) -> Result<(OAuthClient, name: String?), OAuthError> {
            .failure(.invalidClient("the client metadata document at \(url): \(d)"))
        }
        guard let doc = JSONValue.parse(body), case .object = doc else { return refuse("not one JSON object") }
        guard doc["client_id"]?.stringValue == url else { return refuse("its client_id is not its own URL") }
        if let method = doc["token_endpoint_auth_method"]?.stringValue, method != "none" {
            return refuse("token_endpoint_auth_method '\(method)': only public clients (none) are accepted")
        }
        if doc["client_secret"] != nil { return refuse("a document holds no secret") }
        switch DynamicClientID.metadata(doc, allowedScopes: allowedScopes) {
        case .failure(let r): return refuse(r.description)
        case .success(let m):
            if let name = m.name, let why = TransactionBinding.undisplayable(name) { return refuse("client_name \(why)") }
            let scopes = m.scopes.isEmpty ? Array(allowedScopes).sorted() : m.scopes
            return .success((OAuthClient(clientId: url, redirectUris: m.redirectUris, scopes: scopes, isPublic: true), m.name))
        }
    }

    /// The name the consent shows: the document's `client_name` and, always, the host that
    /// serves it (a name is the client's claim; the host is where it comes from).
    public static func displayName(_ name: String?, url: String) -> String {
        let host = location(url)?.host ?? url
        guard let name, !name.isEmpty else { return host }
        return "\(name) (\(host))"
    }
}
