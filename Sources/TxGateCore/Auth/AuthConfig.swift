import Foundation

/// One node of a journey as configured: its type and its own settings.
public struct NodeConfig: Decodable, Sendable {
    public var type: String
    public var settings: [String: JSONValue]
    /// Where it sits in the file (`journeys.Login[0]`), for errors.
    public var path: String

    public init(type: String, settings: [String: JSONValue] = [:], path: String = "") {
        self.type = type
        self.settings = settings
        self.path = path
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: AnyKey.self)
        path = jsonPath(decoder.codingPath)
        type = (try? c.decode(String.self, forKey: AnyKey("type"))) ?? ""
        var s: [String: JSONValue] = [:]
        for k in c.allKeys where k.stringValue != "type" { s[k.stringValue] = try c.decode(JSONValue.self, forKey: k) }
        settings = s
    }
}

public struct SessionConfig: ConfigObject, Sendable, Equatable {
    public var cookieName = "iPlanetDirectoryPro"
    public var idleTimeoutS = 1_800
    public var maxLifetimeS = 28_800
    /// The cookie's `SameSite`: `Lax`, `Strict`, or `None` (for a single-page app on another
    /// site that sends the cookie; needs https, since browsers keep such a cookie only if Secure).
    public var sameSite = "Lax"
    public static let sameSiteValues = ["Lax", "Strict", "None"]

    public init() {}

    enum Key: String, ConfigKey {
        case cookieName, idleTimeoutS, maxLifetimeS, sameSite
    }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        sameSite = o.value(.sameSite, default: sameSite)
        if !Self.sameSiteValues.contains(sameSite) {
            o.invalid(.sameSite, "'\(sameSite)' is not one of \(Self.sameSiteValues.joined(separator: ", "))")
        }
        cookieName = o.value(.cookieName, default: cookieName)
        idleTimeoutS = o.int(.idleTimeoutS, default: idleTimeoutS, atLeast: 1)
        maxLifetimeS = o.value(.maxLifetimeS, default: maxLifetimeS)
        if cookieName.isEmpty || !cookieName.allSatisfy({ $0.isLetter || $0.isNumber || "-_.".contains($0) }) {
            o.invalid(.cookieName, "must be letters, digits, '-', '_' or '.'")
        }
        if maxLifetimeS < idleTimeoutS { o.invalid(.maxLifetimeS, "must be at least idleTimeoutS") }
    }
}

public struct SecurityConfig: ConfigObject, Sendable, Equatable {
    public var maxFailedAttempts = 5
    /// Failures on one account, from any sources, before the account is locked (outside a session).
    public var maxFailedAttemptsPerUser = 20
    public var lockoutWindowS = 300
    public var lockoutDurationS = 900
    /// How long a journey step (an authId) stays valid.
    public var authIdTtlS = 300
    /// Transactions a subject may have waiting at once.
    public var maxPendingTransactions = 20
    /// Emails (links, codes) one user may be sent per `emailWindowS`.
    public var maxEmailsPerWindow = 5
    public var emailWindowS = 3_600
    /// Users who may ask `policies?_action=evaluate` about another subject (a gateway's agent
    /// account); everyone else gets decisions about themselves only.
    public var policyEvaluators: [String] = []

    public init() {}

    enum Key: String, ConfigKey {
        case maxFailedAttempts, maxFailedAttemptsPerUser, lockoutWindowS, lockoutDurationS, authIdTtlS, maxPendingTransactions
        case maxEmailsPerWindow, emailWindowS, policyEvaluators
    }

    /// The settings that are whole numbers greater than 0.
    static var positive: [(Key, WritableKeyPath<SecurityConfig, Int>)] { [
        (.maxFailedAttempts, \.maxFailedAttempts), (.maxFailedAttemptsPerUser, \.maxFailedAttemptsPerUser), (.lockoutWindowS, \.lockoutWindowS), (.lockoutDurationS, \.lockoutDurationS),
        (.authIdTtlS, \.authIdTtlS), (.maxPendingTransactions, \.maxPendingTransactions),
        (.maxEmailsPerWindow, \.maxEmailsPerWindow), (.emailWindowS, \.emailWindowS),
    ] }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        for (key, field) in Self.positive {
            self[keyPath: field] = o.int(key, default: self[keyPath: field], atLeast: 1)
        }
        policyEvaluators = o.value(.policyEvaluators, default: policyEvaluators)
    }
}

public struct SecretsConfig: ConfigObject, Sendable, Equatable {
    /// HS256 key for authIds; generated (0600) on first start if missing. `TXGATE_SIGNING_KEY` wins.
    public var signingKeyFile = "var/signing.key"
    /// Whether the file was named in the configuration (not the default).
    public var signingKeyFileGiven = false
    /// ES256 keys of the tokens the gateway signs (OAuth 2.0, Transaction Tokens): PEM files
    /// (0600), the newest signs, every one is published; created on first start.
    public var tokenKeysFolder = "var/token-keys"

    public init() {}

    enum Key: String, ConfigKey {
        case signingKeyFile, tokenKeysFolder
    }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        signingKeyFile = o.value(.signingKeyFile, default: signingKeyFile)
        signingKeyFileGiven = o.has(.signingKeyFile)
        tokenKeysFolder = o.value(.tokenKeysFolder, default: tokenKeysFolder)
    }
}

public struct StoreConfig: ConfigObject, Sendable, Equatable {
    /// "sqlite" (embedded, one instance) or "redis" (shared by several instances).
    public var type = "sqlite"
    public var path = "var/txgate.db"
    /// redis://[user:password@]host:port[/db], or
    /// redis+sentinel://[user:password@]host:port[,host:port...]/master[/db]
    public var url = ""
    /// Parsed `url` (type redis).
    public var redis: RedisURL?
    /// Prepended to every key, so that several deployments can share one Redis database.
    public var keyPrefix = "txgate:"
    /// How long a Redis command (or a connect) may take before the connection counts as down.
    public var timeoutMs = 1000
    /// Replicas that must acknowledge a one-shot step (taking a link, consuming a transaction,
    /// marking a code used) before it counts: Redis `WAIT`. 0 (default) does not wait.
    public var waitReplicas = 0
    /// How long `WAIT` may take; fewer acknowledgements in time fail the step closed.
    public var waitTimeoutMs = 200
    /// Accept a Redis whose `maxmemory-policy` may evict keys. Off by default: an evicted
    /// one-time marker, lockout or fence record silently re-enables what it enforced, so a
    /// policy other than `noeviction` refuses the start unless this says the operator knows.
    public var allowEviction = false

    public init() {}

    enum Key: String, ConfigKey {
        case `type`, path, url, keyPrefix, timeoutMs, waitReplicas, waitTimeoutMs, allowEviction, tls
    }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        type = o.value(.type, default: type)
        path = o.value(.path, default: path)
        url = o.value(.url, default: url)
        keyPrefix = o.value(.keyPrefix, default: keyPrefix)
        timeoutMs = o.value(.timeoutMs, default: timeoutMs)
        waitReplicas = o.value(.waitReplicas, default: waitReplicas)
        waitTimeoutMs = o.value(.waitTimeoutMs, default: waitTimeoutMs)
        allowEviction = o.value(.allowEviction, default: allowEviction)
        switch type {
        case "sqlite":
            if path.isEmpty { o.invalid(.path, "must not be empty") }
            for k in [Key.url, .keyPrefix, .timeoutMs, .waitReplicas, .waitTimeoutMs, .allowEviction, .tls] where o.has(k) {
                o.invalid(k, "only for type redis")
            }
        case "redis":
            if o.has(.path) { o.invalid(.path, "only for type sqlite") }
            if url.isEmpty {
                o.invalid(.url, "required for type redis (redis://host:port/db, or redis+sentinel://host:26379,host:26379/master/db)")
            } else {
                do { redis = try RedisURL(parsing: url) } catch { o.invalid(.url, "\(error)") }
            }
            if !(10...60_000).contains(timeoutMs) { o.invalid(.timeoutMs, "must be between 10 and 60000") }
            if waitReplicas < 0 { o.invalid(.waitReplicas, "must be 0 or more") }
            if waitTimeoutMs < 1 || waitTimeoutMs >= timeoutMs {
                o.invalid(.waitTimeoutMs, "must be at least 1 and less than timeoutMs (\(timeoutMs)), or the connection is dropped while it waits")
            }
            if o.has(.tls) {
                o.invalid(.tls, "not supported: Debian's hiredis 0.14 has no TLS; reach Redis over a private network or a TLS tunnel")
            }
        default:
            o.invalid(.type, "'\(type)' is not a known store (sqlite, redis)")
        }
    }
}

public struct CacheConfig: ConfigObject, Sendable, Equatable {
    public var defaultTtlS = 60
    public var maxEntries = 10_000

    public init() {}

    enum Key: String, ConfigKey {
        case defaultTtlS, maxEntries
    }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        defaultTtlS = o.int(.defaultTtlS, default: defaultTtlS, atLeast: 0)
        maxEntries = o.int(.maxEntries, default: maxEntries, atLeast: 0)
    }
}

public struct ChallengeConfig: ConfigObject, Sendable, Equatable {
    /// For `Authorization: Bearer` requests: "rfc9470", "ssoadvice", or "both" (two headers).
    public var bearer = "rfc9470"

    public init() {}

    enum Key: String, ConfigKey {
        case bearer
    }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        bearer = o.value(.bearer, default: bearer)
        if !["rfc9470", "ssoadvice", "both"].contains(bearer) { o.invalid(.bearer, "'\(bearer)' is not rfc9470, ssoadvice or both") }
    }
}

/// `email`: where the email nodes' messages go. Exactly one of `outbox` (a folder of .eml
/// files, for development) or `smtp`.
public struct EmailConfig: ConfigObject, Sendable, Equatable {
    public enum Delivery: Sendable, Equatable {
        case outbox(folder: String)
        case smtp(SMTPConfig)
    }
    public var delivery: Delivery

    public init(delivery: Delivery) { self.delivery = delivery }

    enum Key: String, ConfigKey {
        case outbox, smtp
    }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        delivery = .outbox(folder: "var/outbox")
        switch (o.has(.outbox), o.has(.smtp)) {
        case (true, true): o.invalid(.smtp, "give either outbox or smtp, not both")
        case (false, false): o.invalid(.smtp, "give either outbox (a folder) or smtp")
        case (true, false): if let f: String = o.optional(.outbox) { delivery = .outbox(folder: f) }
        case (false, true): if let s: SMTPConfig = o.optional(.smtp) { delivery = .smtp(s) }
        }
    }
}

public struct SMTPConfig: ConfigObject, Sendable, Equatable {
    /// `smtp://host:port` or `smtps://host:port`.
    public var url: String
    public var username: String?
    /// A file holding the password (kept out of gateway.json).
    public var passwordFile: String?
    public var from: String
    /// Require STARTTLS on smtp:// (always TLS on smtps://).
    public var startTls = true
    public var caFile: String?

    enum Key: String, ConfigKey {
        case url, username, passwordFile, from, startTls, caFile
    }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        url = o.required(.url) ?? ""
        username = o.optional(.username)
        passwordFile = o.optional(.passwordFile)
        from = o.required(.from) ?? ""
        startTls = o.value(.startTls, default: startTls)
        caFile = o.optional(.caFile)
        if !url.isEmpty, !(url.hasPrefix("smtp://") || url.hasPrefix("smtps://")) {
            o.invalid(.url, "'\(url)' is not smtp://host:port or smtps://host:port")
        }
        if !from.isEmpty, from.filter({ $0 == "@" }).count != 1 || from.contains(where: \.isWhitespace) {
            o.invalid(.from, "'\(from)' is not an email address")
        }
        if username != nil && passwordFile == nil { o.invalid(.passwordFile, "required with username") }
    }
}
