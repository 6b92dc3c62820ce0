import Foundation
import TxGateCrypto

/// `oauth2.resources[]`: an API behind the gateway that OAuth clients (an MCP server's clients
/// among them) reach with access tokens issued for it alone (RFC 8707 `resource`, RFC 9728
/// metadata). Requests under `path` get the bearer challenges of RFC 6750 / RFC 9728 rather than
/// a redirect to the login page.
public struct OAuthResource: ConfigObject, Sendable, Equatable {
    /// A path prefix (`/mcp`): the resource is `{publicUrl}{path}`.
    public var path: String
    /// The scopes a client asks for to use it (`scopes_supported` of its metadata).
    public var scopes: [String] = []

    public init(path: String, scopes: [String] = []) {
        self.path = path
        self.scopes = scopes
    }

    enum Key: String, ConfigKey { case path, scopes }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        path = o.required(.path) ?? "/"
        scopes = o.value(.scopes, default: scopes)
        if !path.hasPrefix("/") || path == "/" || path.hasSuffix("/") || path.contains("?") || path.contains("#") {
            o.invalid(.path, "'\(path)' is not a path prefix such as /mcp (not /, no trailing slash, no query)")
        }
        for (i, s) in scopes.enumerated() where s.isEmpty || s.contains(" ") || s.hasPrefix(TransactionScope.prefix) {
            o.invalid(.scopes, index: i, "'\(s)' is not a scope (no spaces; transaction: scopes are the gateway's)")
        }
    }

    /// Whether `requestPath` (no query) is this resource or under it.
    public func contains(_ requestPath: Substring) -> Bool {
        requestPath == path[...] || (requestPath.hasPrefix(path) && requestPath.dropFirst(path.count).first == "/")
    }

    /// The resource's identifier (RFC 8707 §2): its URL.
    public func identifier(publicURL: String) -> String { publicURL + path }

    /// Its RFC 9728 metadata's URL: the well-known path with the resource's path after it.
    public func metadataURL(publicURL: String) -> String { publicURL + ProtectedResourceMetadata.wellKnown + path }
}

/// RFC 9728 protected resource metadata.
public enum ProtectedResourceMetadata {
    public static let wellKnown = "/.well-known/oauth-protected-resource"

    public static func document(resource: String, issuer: String, scopes: [String]) -> String {
        JSONValue.object([
            "resource": .string(resource), "authorization_servers": .array([.string(issuer)]),
            "scopes_supported": .array(scopes.map { .string($0) }), "bearer_methods_supported": ["header"],
        ]).canonical
    }
}

/// The scope that names a transaction (WIRE.md §13): `transaction:<TxId>`. `authorize` treats
/// it exactly as `txid=<TxId>`; a client that steps up by scope (MCP) asks for it after a
/// `403 insufficient_scope` that names it.
public enum TransactionScope {
    public static let prefix = "transaction:"

    public static func scope(_ txid: String) -> String { prefix + txid }

    /// The TxId of the last `transaction:` scope (a client that keeps its earlier scopes asks for
    /// every one it was ever challenged with, the newest last), if any.
    public static func txid(in scopes: [String]) -> String? {
        scopes.last { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) }
    }
}

/// `oauth2.dynamicRegistration`: RFC 7591 dynamic client registration, off unless configured,
/// `open` or with an initial access token (read from `initialAccessTokenFile`).
public struct DynamicRegistrationConfig: ConfigObject, Sendable, Equatable {
    public var open = false
    public var initialAccessTokenFile: String?
    /// Filled from the file when the configuration is loaded.
    public var initialAccessToken: String?
    /// The scopes a registered client may ask for, besides `openid`, `profile`, `email` and
    /// every resource's scopes.
    public var scopes: [String] = []

    public init() {}

    enum Key: String, ConfigKey { case open, initialAccessTokenFile, scopes }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        open = o.value(.open, default: open)
        initialAccessTokenFile = o.optional(.initialAccessTokenFile)
        scopes = o.value(.scopes, default: scopes)
        if open == (initialAccessTokenFile != nil) {
            o.invalid(.open, "set either open: true or an initialAccessTokenFile (registration needs one or the other)")
        }
    }
}

/// A client registered at run time (RFC 7591), kept nowhere: its `client_id` is its metadata
/// (redirect URIs, scopes, name) and the gateway's MAC over it, so that every instance that
/// shares the key knows it, across restarts, and nothing has to be stored or purged. Such a
/// client is public (PKCE, no secret): a registration that asks for a secret gets `none`.
public enum DynamicClientID {
    public static let prefix = "dyn."

    public struct Metadata: Equatable, Sendable {
        public var redirectUris: [String]
        public var scopes: [String]
        public var name: String?
    }

    /// Why a registration request is refused (RFC 7591 §3.2.2).
    public struct Refusal: Error, Equatable, Sendable {
        public let code: String
        public let description: String
        public var json: String { OAuthError(code, description).json }
    }

    /// Reads and checks a registration request's metadata: redirect URIs `https`, or `http` on a
    /// loopback host (RFC 8252 §7.3), no fragment, at most 5 of at most 512 characters; only
    /// the code grant with refresh; scopes among `allowed`.
    public static func metadata(_ body: JSONValue, allowedScopes: Set<String>) -> Result<Metadata, Refusal> {
        func refuse(_ code: String, _ d: String) -> Result<Metadata, Refusal> { .failure(Refusal(code: code, description: d)) }
        guard case .object = body else { return refuse("invalid_client_metadata", "the body must be a JSON object") }
        guard let list = body["redirect_uris"]?.arrayValue, !list.isEmpty, list.count <= 5 else {
            return refuse("invalid_redirect_uri", "redirect_uris must list 1 to 5 URIs")
        }
        var uris: [String] = []
        for v in list {
            guard let u = v.stringValue, u.utf8.count <= 512, let c = URLComponents(string: u), c.fragment == nil,
                  let host = c.host?.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]")),
                  c.scheme == "https" || (c.scheme == "http" && ["localhost", "127.0.0.1", "::1"].contains(host)) else {
                return refuse("invalid_redirect_uri", "'\(v.stringValue ?? v.canonical)' is not an https URI, or http on a loopback host")
            }
            uris.append(u)
        }
        for (name, allowed) in [("grant_types", ["authorization_code", "refresh_token"]), ("response_types", ["code"])] {
            if let values = body[name]?.arrayValue, let bad = values.first(where: { !allowed.contains($0.stringValue ?? "") }) {
                return refuse("invalid_client_metadata", "\(name) may hold only \(allowed.joined(separator: ", ")), not \(bad.canonical)")
            }
        }
        let scopes = (body["scope"]?.stringValue ?? "").split(separator: " ").map(String.init)
        if let bad = scopes.first(where: { !allowedScopes.contains($0) && !$0.hasPrefix(TransactionScope.prefix) }) {
            return refuse("invalid_client_metadata", "scope '\(bad)' is not offered here")
        }
        let name = body["client_name"]?.stringValue.map { String($0.prefix(100)) }
        return .success(Metadata(redirectUris: uris, scopes: scopes.filter { !$0.hasPrefix(TransactionScope.prefix) }, name: name))
    }

    /// The client ID that is `m`, MACed with `key`.
    public static func issue(_ m: Metadata, key: [UInt8]) -> String {
        var o: [String: JSONValue] = ["r": .array(m.redirectUris.map { .string($0) }), "s": .array(m.scopes.map { .string($0) })]
        if let name = m.name { o["n"] = .string(name) }
        let body = Base64URL.encode(JSONValue.object(o).canonicalBytes)
        return prefix + body + "." + Base64URL.encode(Array(Crypto.hmacSHA256(key: key, data: Array((prefix + body).utf8)).prefix(16)))
    }

    /// The client `id` stands for, if the gateway issued it: public, its URIs and scopes (with
    /// `allowedScopes`, so that a scope the configuration added later is usable).
    public static func client(_ id: String, key: [UInt8], allowedScopes: Set<String>) -> OAuthClient? {
        guard id.hasPrefix(prefix), id.utf8.count <= 4096 else { return nil }
        let rest = id.dropFirst(prefix.count)
        guard let dot = rest.lastIndex(of: "."), let mac = Base64URL.decode(String(rest[rest.index(after: dot)...])),
              let body = Base64URL.decode(String(rest[..<dot])) else { return nil }
        let expected = Array(Crypto.hmacSHA256(key: key, data: Array((prefix + rest[..<dot]).utf8)).prefix(16))
        guard Crypto.constantTimeEquals(mac, expected), let v = JSONValue.parse(body),
              let uris = v["r"]?.arrayValue?.compactMap(\.stringValue) else { return nil }
        let scopes = (v["s"]?.arrayValue?.compactMap(\.stringValue) ?? []).filter(allowedScopes.contains)
        return OAuthClient(clientId: id, redirectUris: uris, scopes: scopes, isPublic: true)
    }
}

/// RFC 9126 pushed authorization requests: a client posts its authorization request's
/// parameters first, and sends the user to `authorize` with the `request_uri` it got back. The
/// parameters are kept 60 s, for one use.
public enum PushedAuthorizationRequest {
    public static let uriPrefix = "urn:ietf:params:oauth:request_uri:"
    public static let ttlS = 60
    public static let keyPrefix = "oauth2:par:"

    /// Where the parameters of `requestUri` are kept (under a hash: the URI is a bearer secret).
    public static func key(_ requestUri: String) -> String { keyPrefix + Crypto.hex(Crypto.sha256(Array(requestUri.utf8))) }

    /// The parameters as a query string, and the client that pushed them (checked again at use).
    public static func encode(_ pairs: [(name: String, value: String)]) -> [UInt8] {
        Array(pairs.map { Query.encode($0.name) + "=" + Query.encode($0.value) }.joined(separator: "&").utf8)
    }
}

