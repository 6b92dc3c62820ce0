import Foundation

// The sections of gateway.json about serving: upstream, limits, paths, TLS, logs, readiness.

public struct UpstreamConfig: ConfigObject, Sendable, Equatable {
    public var url: HTTPURL
    public var connectTimeoutMs = 2_000
    public var responseTimeoutMs = 30_000
    /// Idle keep-alive connections kept per worker; 0 disables reuse.
    public var keepAlive = 64
    /// A connection idle longer than this is not reused; below the upstream's own keep-alive
    /// timeout, the upstream never closes one just as a request goes out on it.
    public var idleTimeoutMs = 4_000
    public var caFile: String?

    public init(url: HTTPURL) { self.url = url }

    enum Key: String, ConfigKey {
        case url, connectTimeoutMs, responseTimeoutMs, keepAlive, idleTimeoutMs, caFile
    }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        url = HTTPURL(parsing: "http://127.0.0.1:9000")!
        if let s: String = o.required(.url) {
            if let u = HTTPURL(parsing: s) { url = u } else { o.invalid(.url, "'\(s)' is not an http:// or https:// URL") }
        }
        connectTimeoutMs = o.int(.connectTimeoutMs, default: connectTimeoutMs, atLeast: 1)
        responseTimeoutMs = o.int(.responseTimeoutMs, default: responseTimeoutMs, atLeast: 1)
        keepAlive = o.int(.keepAlive, default: keepAlive, atLeast: 0)
        idleTimeoutMs = o.int(.idleTimeoutMs, default: idleTimeoutMs, atLeast: 1)
        caFile = o.optional(.caFile)
    }
}

public struct LimitsConfig: ConfigObject, Sendable, Equatable {
    public var maxHeaderBytes = 16_384
    public var maxBodyBytes = 10 << 20
    /// The whole request head must arrive within this (from the accept, or from its first
    /// byte on a kept-alive connection); else 408 and close.
    public var headerTimeoutMs = 10_000
    /// The longest pause between two reads of a request body, and the grace period before
    /// `minBodyRate` applies; else 408 and close.
    public var bodyTimeoutMs = 10_000
    /// Bytes per second a body must average from its start once it has been arriving for
    /// `bodyTimeoutMs`; 0: no minimum.
    public var minBodyRate = 1024
    /// Connections one client address may hold open at once, across all workers; 0: no limit.
    public var maxConnectionsPerClient = 256
    /// The largest body of a browser request kept while its user approves it (WIRE-EXTENSIONS
    /// §3b); a larger one is refused with 413.
    public var maxParkedBodyBytes = 64 << 10

    public init() {}

    enum Key: String, ConfigKey {
        case maxHeaderBytes, maxBodyBytes, headerTimeoutMs, bodyTimeoutMs, minBodyRate, maxConnectionsPerClient
        case maxParkedBodyBytes
    }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        maxHeaderBytes = o.int(.maxHeaderBytes, default: maxHeaderBytes, atLeast: 512)
        maxBodyBytes = o.int(.maxBodyBytes, default: maxBodyBytes, atLeast: 0)
        headerTimeoutMs = o.int(.headerTimeoutMs, default: headerTimeoutMs, atLeast: 100)
        bodyTimeoutMs = o.int(.bodyTimeoutMs, default: bodyTimeoutMs, atLeast: 100)
        minBodyRate = o.int(.minBodyRate, default: minBodyRate, atLeast: 0)
        // 0: no limit.
        maxConnectionsPerClient = o.int(.maxConnectionsPerClient, default: maxConnectionsPerClient, atLeast: 0)
        maxParkedBodyBytes = o.int(.maxParkedBodyBytes, default: maxParkedBodyBytes, atLeast: 0)
    }
}

/// `paths`: how request paths are normalized before policies see them (`PathNormalizer`).
public struct PathsConfig: ConfigObject, Sendable, Equatable {
    /// What a `%2F` in a request path gets: 400 (`reject`, the default) or kept opaque (`keep`).
    public var encodedSlash = EncodedSlashAction.reject
    /// What `;` (path parameters) means: stripped from each segment (`strip`, the default),
    /// 400 (`reject`), or an ordinary character (`keep`). A `.`/`..` segment with parameters
    /// is refused in every mode.
    public var semicolon = SemicolonAction.strip

    public init(encodedSlash: EncodedSlashAction = .reject, semicolon: SemicolonAction = .strip) {
        self.encodedSlash = encodedSlash
        self.semicolon = semicolon
    }

    enum Key: String, ConfigKey {
        case encodedSlash, semicolon
    }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        if let s: String = o.optional(.encodedSlash) {
            if let a = EncodedSlashAction(rawValue: s) { encodedSlash = a } else {
                o.invalid(.encodedSlash, "'\(s)' is not one of \(EncodedSlashAction.allCases.map(\.rawValue).joined(separator: ", "))")
            }
        }
        if let s: String = o.optional(.semicolon) {
            if let a = SemicolonAction(rawValue: s) { semicolon = a } else {
                o.invalid(.semicolon, "'\(s)' is not one of \(SemicolonAction.allCases.map(\.rawValue).joined(separator: ", "))")
            }
        }
    }
}

public struct TLSConfig: ConfigObject, Sendable, Equatable {
    public var certificate: String
    public var privateKey: String
    /// `Strict-Transport-Security` on every response sent over TLS; nil: none.
    public var hsts: HSTSConfig?

    public init(certificate: String, privateKey: String, hsts: HSTSConfig? = nil) {
        self.certificate = certificate
        self.privateKey = privateKey
        self.hsts = hsts
    }

    enum Key: String, ConfigKey {
        case certificate, privateKey, hsts
    }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        certificate = o.required(.certificate) ?? ""
        privateKey = o.required(.privateKey) ?? ""
        // A number is the max-age alone; an object says more.
        if let maxAge = o.attempt(.hsts, as: Int.self) {
            if maxAge < 0 { o.invalid(.hsts, "must be 0 or more (seconds)") } else { hsts = HSTSConfig(maxAgeS: maxAge) }
        } else {
            hsts = o.optional(.hsts)
        }
    }
}

/// `tls.hsts`: `31536000`, or `{"maxAgeS": 31536000, "includeSubDomains": true, "preload": false}`.
public struct HSTSConfig: ConfigObject, Sendable, Equatable {
    public var maxAgeS: Int
    public var includeSubDomains = false
    public var preload = false

    public init(maxAgeS: Int, includeSubDomains: Bool = false, preload: Bool = false) {
        self.maxAgeS = maxAgeS
        self.includeSubDomains = includeSubDomains
        self.preload = preload
    }

    enum Key: String, ConfigKey {
        case maxAgeS, includeSubDomains, preload
    }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        maxAgeS = o.required(.maxAgeS, as: Int.self) ?? 0
        if maxAgeS < 0 { o.invalid(.maxAgeS, "must be 0 or more (seconds)") }
        includeSubDomains = o.value(.includeSubDomains, default: false)
        preload = o.value(.preload, default: false)
        if preload && (!includeSubDomains || maxAgeS < 31_536_000) {
            o.invalid(.preload, "needs includeSubDomains and a maxAgeS of at least 31536000 (one year), as browsers' preload lists require")
        }
    }

    /// The header's value.
    public var headerValue: String {
        "max-age=\(maxAgeS)" + (includeSubDomains ? "; includeSubDomains" : "") + (preload ? "; preload" : "")
    }
}

public struct LogConfig: ConfigObject, Sendable, Equatable {
    public static let levels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]
    public var level = "info"
    /// One line per request.
    public var access = true

    public init() {}

    enum Key: String, ConfigKey {
        case level, access
    }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        level = o.value(.level, default: level)
        access = o.value(.access, default: access)
        if !Self.levels.contains(level) {
            o.invalid(.level, "'\(level)' is not one of \(Self.levels.joined(separator: ", "))")
        }
    }
}

/// `readiness`: how often each worker checks what `/-/ready` reports.
public struct ReadinessConfig: ConfigObject, Sendable, Equatable {
    /// Between two checks (a TCP connect to the upstream, a store ping).
    public var intervalMs = 2_000

    public init() {}

    enum Key: String, ConfigKey {
        case intervalMs
    }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        intervalMs = o.int(.intervalMs, default: intervalMs, atLeast: 100)
    }
}
