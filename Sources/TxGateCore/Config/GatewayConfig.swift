import Foundation

/// `HOST:PORT`, `[v6]:PORT` or `:PORT` (all interfaces).
public struct HostPort: Equatable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) { self.host = host; self.port = port }

    public init?(parsing s: String) {
        var hostPart: Substring, portPart: Substring
        if s.hasPrefix("[") {
            guard let close = s.firstIndex(of: "]"), s[s.index(after: close)...].hasPrefix(":") else { return nil }
            hostPart = s[s.index(after: s.startIndex)..<close]
            portPart = s[s.index(close, offsetBy: 2)...]
        } else {
            guard let colon = s.lastIndex(of: ":") else { return nil }
            hostPart = s[..<colon]
            portPart = s[s.index(after: colon)...]
            if hostPart.contains(":") { return nil }
        }
        guard let p = Int(portPart), (0...65535).contains(p) else { return nil }
        host = hostPart.isEmpty ? "0.0.0.0" : String(hostPart)
        port = p
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// An absolute http(s) URL split into what a proxy needs.
public struct HTTPURL: Equatable, Sendable, CustomStringConvertible {
    public var scheme: String
    public var host: String
    public var port: Int
    /// The path prefix, without a trailing slash ("" for the root).
    public var basePath: String

    public init?(parsing s: String) {
        guard let c = URLComponents(string: s), let scheme = c.scheme?.lowercased(),
              scheme == "http" || scheme == "https", let host = c.host, !host.isEmpty,
              c.query == nil, c.fragment == nil, c.user == nil else { return nil }
        self.scheme = scheme
        self.host = host
        self.port = c.port ?? (scheme == "https" ? 443 : 80)
        var p = c.percentEncodedPath
        while p.hasSuffix("/") { p.removeLast() }
        basePath = p
    }

    public var isTLS: Bool { scheme == "https" }
    public var defaultPort: Bool { port == (isTLS ? 443 : 80) }
    /// `host[:port]`, as a Host header names it.
    public var authority: String {
        let h = host.contains(":") ? "[\(host)]" : host
        return defaultPort ? h : "\(h):\(port)"
    }
    public var origin: String { "\(scheme)://\(authority)" }
    public var description: String { origin + basePath }
}

/// The whole of gateway.json.
public struct GatewayConfig: ConfigObject, Sendable {
    public var listen = HostPort(host: "127.0.0.1", port: 8080)
    /// The CPUs the process may use (`CPUs.available`), by default, up to the most allowed.
    public var workers = min(CPUs.available, GatewayConfig.maxWorkers)
    /// The most workers a gateway runs (`workers`, `--workers`).
    public static let maxWorkers = 256
    /// Whether each worker's thread is pinned to a CPU.
    public var cpuAffinity = CPUAffinity.none
    /// The gateway's external base URL, for the links it builds.
    public var publicUrl: HTTPURL?
    public var upstream: UpstreamConfig
    public var limits = LimitsConfig()
    public var paths = PathsConfig()
    public var tls: TLSConfig?
    public var log = LogConfig()
    public var shutdownTimeoutMs = 10_000
    public var users: [UserRecord] = []
    public var usersFile: String?
    /// Journey name → its nodes, in order.
    public var journeys: [String: [NodeConfig]] = [:]
    public var loginJourney = "Login"
    /// Sub-realms served besides the root realm ("/").
    public var realms: [String] = []
    public var session = SessionConfig()
    public var secrets = SecretsConfig()
    public var store = StoreConfig()
    public var security = SecurityConfig()
    /// nil: no `policies` key, a plain proxy.
    public var policies: [Policy]?
    public var cache = CacheConfig()
    public var challenges = ChallengeConfig()
    public var email: EmailConfig?
    /// Peers whose `X-Forwarded-For` names the client (a load balancer, nginx).
    public var trustedProxies = TrustedProxies()
    public var readiness = ReadinessConfig()
    public var metrics = MetricsConfig()
    public var loginPage = LoginPageConfig()
    public var cors = CORSConfig()
    /// The OAuth 2.0 / OpenID Connect provider; nil: not served.
    public var oauth2: OAuth2Config?
    public var txnTokens = TxnTokenConfig()
    public var pdp = PDPConfig()
    public var forwardAuth = ForwardAuthConfig()
    /// Other OpenID providers whose access tokens are subjects.
    public var bearer = BearerConfig()
    public var audit = AuditConfig()
    /// Passkeys: the relying party; nil: the passkey nodes cannot be used.
    public var webauthn: WebAuthnConfig?
    /// How approval requests reach people (`ApproveElsewhere`).
    public var approvals = ApprovalsConfig()

    /// The top-level keys. A new one is a case here, read in `init(from:)` (ConfigDeclarationTests
    /// fails until it is) and named in `reload(_:)` (which does not compile until it is). The
    /// order is the one in which a reload's restart warning names them.
    public enum Key: String, CaseIterable, Sendable, ConfigKey {
        case listen, workers, cpuAffinity, publicUrl, upstream, store, limits, paths, tls, log, shutdownTimeoutMs, users, usersFile
        case journeys, loginJourney, realms, session, secrets, security, policies, cache, challenges, email
        case trustedProxies, readiness, metrics, loginPage, cors, oauth2, txnTokens, pdp, forwardAuth, bearer, audit, webauthn, approvals
    }

    /// What a reload (SIGHUP) does with a change to `key`: applies it, or keeps the running
    /// value of what was bound at start-up and names it in the restart warning (`ConfigReload`
    /// derives the warning, what it applies and what it reports as changed from this alone).
    public static func reload(_ key: Key) -> ReloadRule {
        switch key {
        // The listener, the worker threads, the upstream pools, the store, the server's limits
        // and the signing key are made once, at start-up.
        case .listen: .restart(\.listen)
        case .workers: .restart(\.workers)
        case .cpuAffinity: .restart(\.cpuAffinity)
        case .upstream: .restart(\.upstream)
        case .store: .restart(\.store)
        case .limits: .restart(\.limits)
        case .secrets: .restart(\.secrets)
        // Kept across reloads: the metrics registry, which holds `allowFrom`, and each worker's
        // readiness checker, which holds `intervalMs`.
        case .metrics: .restart(\.metrics)
        case .readiness: .restart(\.readiness)
        // A reload reads the certificate and key again; turning TLS on or off changes the listener.
        case .tls: .partly(\.tls, restart: "tls (turning it on or off)", \.self, differs: { ($0 == nil) != ($1 == nil) })
        // The log handler's level is set at start-up; `log.access` is read per request.
        case .log: .partly(\.log, restart: "log.level", \.level)
        case .publicUrl, .paths, .shutdownTimeoutMs, .users, .usersFile, .journeys, .loginJourney, .realms, .session,
             .security, .policies, .cache, .challenges, .email, .trustedProxies, .loginPage, .cors, .oauth2, .txnTokens,
             .pdp, .forwardAuth, .bearer, .audit, .webauthn, .approvals:
            .live
        }
    }

    public init(upstream: UpstreamConfig) { self.upstream = upstream }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        if let s: String = o.optional(.listen) {
            if let hp = HostPort(parsing: s) { listen = hp } else { o.invalid(.listen, "'\(s)' is not HOST:PORT") }
        }
        workers = o.value(.workers, default: workers)
        if workers < 1 || workers > Self.maxWorkers { o.invalid(.workers, "must be between 1 and \(Self.maxWorkers)") }
        cpuAffinity = Self.cpuAffinity(o, allowed: CPUs.allowed)
        if let s: String = o.optional(.publicUrl) {
            if let u = HTTPURL(parsing: s) { publicUrl = u } else { o.invalid(.publicUrl, "'\(s)' is not an http:// or https:// URL") }
        }
        upstream = o.required(.upstream) ?? UpstreamConfig(url: HTTPURL(parsing: "http://127.0.0.1:9000")!)
        limits = o.value(.limits, default: limits)
        paths = o.value(.paths, default: paths)
        tls = o.optional(.tls)
        log = o.value(.log, default: log)
        shutdownTimeoutMs = o.int(.shutdownTimeoutMs, default: shutdownTimeoutMs, atLeast: 0)
        users = o.value(.users, default: users)
        usersFile = o.optional(.usersFile)
        journeys = o.value(.journeys, default: journeys)
        loginJourney = o.value(.loginJourney, default: loginJourney)
        realms = o.value(.realms, default: realms)
        for (i, r) in realms.enumerated() where r.isEmpty || !r.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }) {
            o.invalid(.realms, index: i, "'\(r)' is not a realm name (letters, digits, '-', '_')")
        }
        session = o.value(.session, default: session)
        secrets = o.value(.secrets, default: secrets)
        store = o.value(.store, default: store)
        security = o.value(.security, default: security)
        policies = o.optional(.policies, as: [PolicyConfig].self)?.map(\.policy)
        cache = o.value(.cache, default: cache)
        challenges = o.value(.challenges, default: challenges)
        email = o.optional(.email)
        trustedProxies = TrustedProxies(o.cidrs(.trustedProxies) ?? [])
        readiness = o.value(.readiness, default: readiness)
        metrics = o.value(.metrics, default: metrics)
        loginPage = o.value(.loginPage, default: loginPage)
        cors = o.value(.cors, default: cors)
        oauth2 = o.optional(.oauth2)
        txnTokens = o.value(.txnTokens, default: txnTokens)
        pdp = o.value(.pdp, default: pdp)
        forwardAuth = o.value(.forwardAuth, default: forwardAuth)
        bearer = o.value(.bearer, default: bearer)
        audit = o.value(.audit, default: audit)
        webauthn = o.optional(.webauthn)
        approvals = o.value(.approvals, default: approvals)
    }

    /// `cpuAffinity`: "none", "auto" or a list of CPU numbers, each one the process may run on.
    static func cpuAffinity(_ o: StrictObject<Key>, allowed: [Int]?) -> CPUAffinity {
        guard o.has(.cpuAffinity) else { return .none }
        if let word = o.attempt(.cpuAffinity, as: String.self) {
            switch word {
            case "none": return .none
            case "auto" where allowed?.isEmpty == false: return .auto
            case "auto": o.invalid(.cpuAffinity, "'auto' needs the CPUs this process may run on, which the kernel did not give: list them")
            default: o.invalid(.cpuAffinity, "'\(word)' is not \"none\", \"auto\" or a list of CPU numbers")
            }
            return .none
        }
        guard let cpus = o.attempt(.cpuAffinity, as: [Int].self), !cpus.isEmpty else {
            o.invalid(.cpuAffinity, "must be \"none\", \"auto\" or a non-empty list of CPU numbers")
            return .none
        }
        let problems = CPUAffinity.problems(in: cpus, allowed: allowed)
        for p in problems { o.invalid(.cpuAffinity, index: p.index, p.message) }
        return problems.isEmpty ? .cpus(cpus) : .none
    }

    /// Things that are valid but probably wrong, for `txgate check` and the start-up log.
    public func warnings(environment: [String: String] = ProcessInfo.processInfo.environment) -> [String] {
        var out: [String] = []
        if policies == nil && pdp.type == .embedded {
            out.append("no policies: the gateway runs as a plain proxy and forwards every request")
        }
        if store.type == "redis" && !journeys.isEmpty && environment["TXGATE_SIGNING_KEY"] == nil && !secrets.signingKeyFileGiven {
            out.append("store.type is redis but no shared signing key is set: set TXGATE_SIGNING_KEY (or secrets.signingKeyFile "
                + "to a file every instance shares), or journeys started on one instance fail on another")
        }
        if store.type == "redis" && !journeys.isEmpty && publicUrl == nil {
            out.append("store.type is redis but publicUrl is not set: give every instance the address clients use "
                + "(the load balancer's), or transactions approved through one instance do not match on another")
        }
        if let w = publicUrlMissesListener { out.append(w) }
        if let w = cpusShared(allowed: CPUs.allowed) { out.append(w) }
        if store.type == "redis" && store.allowEviction {
            out.append("store.allowEviction is set: if Redis's maxmemory-policy evicts keys, a used one-time code can work again, "
                + "a lockout can vanish and sessions and approvals can disappear; prefer maxmemory-policy noeviction")
        }
        if case .sentinel(let master, let sentinels)? = store.redis?.server, sentinels.count < 3 {
            out.append("store.url lists \(sentinels.count) sentinel\(sentinels.count == 1 ? "" : "s") for '\(master)': list every sentinel "
                + "(at least three, on separate machines, with a quorum of two), or the gateway cannot find the primary while "
                + "the one it knows of is down")
        }
        return out
    }

    /// `cpuAffinity` pinning more workers than it has CPUs for: some then take turns on one CPU.
    func cpusShared(allowed: [Int]?) -> String? {
        let cpus: Int
        switch cpuAffinity {
        case .none: return nil
        case .auto: cpus = allowed?.count ?? workers
        case .cpus(let list): cpus = list.count
        }
        guard workers > cpus else { return nil }
        return "cpuAffinity pins \(workers) workers to \(cpus) CPU\(cpus == 1 ? "" : "s"): some take turns on one CPU; "
            + "set workers to \(cpus)" + (cpuAffinity == .auto ? "" : ", or list more CPUs")
    }

    /// A `publicUrl` on this machine (a loopback host, or `listen`'s own) whose port is not the
    /// one the gateway listens on: the links the gateway builds (the login page's, an
    /// approval's, OAuth redirects) then lead browsers to another port, typically the file's
    /// after `serve --listen` moved the gateway. Said only where no proxy can be meant: a
    /// remote host, or https in front of an http listener (a local TLS terminator), is left
    /// alone.
    var publicUrlMissesListener: String? {
        guard let publicUrl, listen.port != 0, publicUrl.port != listen.port, publicUrl.isTLS == (tls != nil) else { return nil }
        let bare = publicUrl.host.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        let host = bare.lowercased()
        let loopback = host == "localhost" || host.hasSuffix(".localhost") || host == "::1" || host.hasPrefix("127.")
        guard loopback || host == listen.host.lowercased() else { return nil }
        return "publicUrl \(publicUrl) names port \(publicUrl.port) on this machine, but the gateway listens on \(listen): "
            + "links to the login page and back lead browsers to port \(publicUrl.port), not to the gateway; set publicUrl to "
            + "\(publicUrl.scheme)://\(HostPort(host: bare, port: listen.port))\(publicUrl.basePath) "
            + "(unless a proxy on this machine forwards port \(publicUrl.port) to the gateway)"
    }

    /// The base URL links point at: `publicUrl`, or one derived from `listen`. Always there in a
    /// configuration the loader accepted (it refuses a `listen` host no URL can name).
    public var effectivePublicURL: HTTPURL { derivedPublicURL! }

    /// `effectivePublicURL`, or nil while `listen`'s host cannot be put in a URL.
    var derivedPublicURL: HTTPURL? {
        if let publicUrl { return publicUrl }
        let host = listen.host == "0.0.0.0" ? "127.0.0.1" : listen.host
        return HTTPURL(parsing: "\(tls == nil ? "http" : "https")://\(HostPort(host: host, port: listen.port))")
    }
}
