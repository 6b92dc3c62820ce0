import Foundation

/// `pdp`: who decides. `embedded` (the default) runs `policies` here; `am` asks a remote AM (or
/// another TxGate) over its REST policy evaluation, as an agent (WIRE.md §1).
public struct PDPConfig: ConfigObject, Sendable, Equatable {
    public enum Kind: String, Sendable { case embedded, am }

    public var type = Kind.embedded
    /// The AM's base URL as the gateway reaches it (`https://am.example.com/am`).
    public var url: HTTPURL?
    /// The AM's URL as clients reach it, for `am_uri` and the login page (default: `url`).
    public var publicUrl: HTTPURL?
    public var realm = "/"
    public var application = "iPlanetAMWebAgentService"
    /// A protected request that the AM does not answer within this fails closed (503).
    public var timeoutMs = 2_000
    /// How long a validated session names its user without asking the AM again.
    public var sessionCacheMs = 5_000
    /// CA bundle that verifies an `https://` AM (default: the system's).
    public var caFile: String?
    public var agent = AgentConfig()

    public init() {}

    enum Key: String, ConfigKey {
        case `type`, url, publicUrl, realm, application, timeoutMs, sessionCacheMs, caFile, agent
    }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        if let t: String = o.optional(.type) {
            if let k = Kind(rawValue: t) { type = k } else { o.invalid(.type, "'\(t)' is not a PDP type (embedded or am)") }
        }
        url = Self.url(o, .url)
        publicUrl = Self.url(o, .publicUrl)
        realm = o.value(.realm, default: realm)
        if !realm.hasPrefix("/") { o.invalid(.realm, "'\(realm)' must start with '/'") }
        application = o.value(.application, default: application)
        timeoutMs = o.int(.timeoutMs, default: timeoutMs, atLeast: 1)
        sessionCacheMs = o.int(.sessionCacheMs, default: sessionCacheMs, atLeast: 0)
        caFile = o.optional(.caFile)
        agent = o.value(.agent, default: agent)
        if type == .am {
            if !o.has(.url) { o.invalid(.url, "pdp.type am needs the AM's url") }
            if !o.has(.agent) { o.invalid(.agent, "pdp.type am needs the agent's username and passwordFile") }
        }
    }

    private static func url(_ o: StrictObject<Key>, _ key: Key) -> HTTPURL? {
        guard let s: String = o.optional(key) else { return nil }
        guard let u = HTTPURL(parsing: s) else { o.invalid(key, "'\(s)' is not an http:// or https:// URL"); return nil }
        return u
    }

    /// `am_uri`: where clients run journeys, with a trailing `/`.
    public var amURI: String? { (publicUrl ?? url).map { $0.description + "/" } }
}

/// `pdp.agent`: the gateway's own account on the AM.
public struct AgentConfig: ConfigObject, Sendable, Equatable {
    public var username = ""
    public var passwordFile = ""
    /// The journey the agent logs in with (Name and Password callbacks only).
    public var journey = "Login"

    public init() {}

    enum Key: String, ConfigKey {
        case username, passwordFile, journey
    }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        username = o.required(.username) ?? ""
        passwordFile = o.required(.passwordFile) ?? ""
        journey = o.value(.journey, default: journey)
    }
}

/// `forwardAuth`: `GET /-/authz` for nginx `auth_request`, Traefik `forwardAuth`, Envoy
/// `ext_authz` (WIRE.md §10).
public struct ForwardAuthConfig: ConfigObject, Sendable, Equatable {
    /// Who may ask (the proxies); empty: the endpoint is off.
    public var trustedProxies = TrustedProxies()
    /// The proxy forwards request bodies (Traefik `forwardBody`, Envoy `with_request_body`);
    /// without it, policies that bind body fields cannot be decided here.
    public var bodiesForwarded = false

    public init() {}

    enum Key: String, ConfigKey {
        case trustedProxies, bodiesForwarded
    }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        trustedProxies = TrustedProxies(o.cidrs(.trustedProxies) ?? [])
        bodiesForwarded = o.value(.bodiesForwarded, default: bodiesForwarded)
    }

    public var enabled: Bool { !trustedProxies.isEmpty }
}

extension ConfigLoader {
    /// What `pdp` and `forwardAuth` need from the rest of the configuration.
    static func checkPDP(_ config: inout GatewayConfig, folder: String, files: any ConfigFileReader, issues: ConfigIssues) {
        if config.pdp.type == .am {
            if config.policies != nil {
                issues.errors.append(ConfigError(path: "policies", message: "with pdp.type am the AM decides: remove policies"))
            }
            if !config.journeys.isEmpty {
                issues.errors.append(ConfigError(path: "journeys", message: "with pdp.type am users log in at the AM: remove journeys"))
            }
            config.pdp.caFile = config.pdp.caFile.map { resolveReadable($0, "pdp.caFile", folder: folder, files: files, issues: issues) }
            let pw = config.pdp.agent.passwordFile
            if !pw.isEmpty {
                config.pdp.agent.passwordFile = resolveReadable(pw, "pdp.agent.passwordFile", folder: folder, files: files, issues: issues)
            }
        }
        guard config.forwardAuth.enabled, !config.forwardAuth.bodiesForwarded else { return }
        for (i, p) in (config.policies ?? []).enumerated() {
            guard case .transaction(let rule) = p.requirement, !rule.bindFields.isEmpty || rule.bindWholeBody else { continue }
            issues.errors.append(ConfigError(path: "policies[\(i)]", message: "binds body fields, but forward-auth proxies such as "
                + "nginx auth_request never send the body: set forwardAuth.bodiesForwarded if the proxy forwards it"))
        }
    }
}
