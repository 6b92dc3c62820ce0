/// Where the store's Redis is, parsed without any I/O:
///
/// - `redis://[[user]:password@]host[:port][/db]`: one server, the primary;
/// - `redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/master[/db]`: the
///   primary of the set `master` monitored by these Redis Sentinels (port 26379 by default),
///   asked again on every (re)connect so that a failover is followed.
///
/// The credentials are the data nodes' (the primary and its replicas); a sentinel is asked
/// without them unless it answers NOAUTH (a sentinel with the same `requirepass`). The
/// password may be percent-encoded (`%40` for `@`). `description` never shows it.
public struct RedisURL: Equatable, Sendable, CustomStringConvertible {
    /// A host (a name, an IPv4 or an IPv6 address) and a port.
    public struct Address: Equatable, Hashable, Sendable, CustomStringConvertible {
        public var host: String
        public var port: Int

        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }

    /// How the primary is found.
    public enum Server: Equatable, Sendable {
        /// This address is the primary.
        case direct(Address)
        /// The sentinels, asked in turn, name the primary of the set `master`.
        case sentinel(master: String, sentinels: [Address])
    }

    public var server: Server
    public var username: String?
    public var password: String?
    public var database: Int

    public static let defaultPort = 6379
    public static let defaultSentinelPort = 26379

    public init(host: String, port: Int = RedisURL.defaultPort, username: String? = nil, password: String? = nil, database: Int = 0) {
        self.init(server: .direct(Address(host: host, port: port)), username: username, password: password, database: database)
    }

    public init(server: Server, username: String? = nil, password: String? = nil, database: Int = 0) {
        self.server = server
        self.username = username
        self.password = password
        self.database = database
    }

    /// The primary's address when the URL names it (`redis://`); nil for `redis+sentinel://`.
    public var directAddress: Address? {
        if case .direct(let a) = server { return a }
        return nil
    }

    /// Parses the URL, or throws an error that says what is wrong with it, and in which part.
    public init(parsing text: String) throws {
        if text.hasPrefix(Self.sentinelScheme) {
            try self.init(sentinel: text)
            return
        }
        guard text.hasPrefix(Self.scheme) else {
            throw RedisURLError("'\(Self.masked(text))' is not redis://[user:password@]host:port[/db] "
                + "or redis+sentinel://[user:password@]host:port[,host:port...]/master[/db]")
        }
        var rest = Substring(text.dropFirst(Self.scheme.count))
        var database = 0
        if let slash = rest.firstIndex(of: "/") {
            database = try Self.database(rest[rest.index(after: slash)...])
            rest = rest[..<slash]
        }
        let (username, password) = try Self.credentials(&rest)
        let address = try Self.address(rest, defaultPort: Self.defaultPort, whole: text)
        self.init(server: .direct(address), username: username, password: password, database: database)
    }

    private init(sentinel text: String) throws {
        let form = "redis+sentinel://[user:password@]host:port[,host:port...]/master[/db]"
        var rest = Substring(text.dropFirst(Self.sentinelScheme.count))
        guard let slash = rest.firstIndex(of: "/") else {
            throw RedisURLError("no master name in '\(Self.masked(text))': expected \(form)")
        }
        let path = rest[rest.index(after: slash)...]
        rest = rest[..<slash]
        let parts = path.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        let master = parts.first.map(String.init) ?? ""
        guard !master.isEmpty else { throw RedisURLError("no master name in '\(Self.masked(text))': expected \(form)") }
        guard master.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7f }) else {
            throw RedisURLError("master name '\(master)' has a space or a character that is not printable ASCII")
        }
        let database = parts.count == 2 ? try Self.database(parts[1]) : 0
        let (username, password) = try Self.credentials(&rest)
        let entries = rest.split(separator: ",", omittingEmptySubsequences: false)
        guard !(entries.count == 1 && entries[0].isEmpty) else {
            throw RedisURLError("no sentinel in '\(Self.masked(text))': expected \(form)")
        }
        var sentinels: [Address] = []
        for (i, entry) in entries.enumerated() {
            let which = "sentinel \(i + 1) of \(entries.count)"
            guard !entry.isEmpty else { throw RedisURLError("\(which) is empty (two commas, or a comma at an end)") }
            let address: Address
            do {
                address = try Self.address(entry, defaultPort: Self.defaultSentinelPort, whole: text)
            } catch let e as RedisURLError {
                throw RedisURLError("\(which) ('\(entry)'): \(e.description)")
            }
            guard !sentinels.contains(address) else { throw RedisURLError("\(which): \(address) is listed twice") }
            sentinels.append(address)
        }
        self.init(server: .sentinel(master: master, sentinels: sentinels), username: username, password: password, database: database)
    }

    /// `redis://host:port/db` or `redis+sentinel://host:port,.../master/db`, with the
    /// credentials left out.
    public var description: String {
        switch server {
        case .direct(let a):
            return "redis://\(a)/\(database)"
        case .sentinel(let master, let sentinels):
            return "redis+sentinel://\(sentinels.map(\.description).joined(separator: ","))/\(master)/\(database)"
        }
    }

    private static let scheme = "redis://"
    private static let sentinelScheme = "redis+sentinel://"

    private static func database(_ text: Substring) throws -> Int {
        guard !text.isEmpty else { return 0 }
        guard let n = Int(text), n >= 0 else { throw RedisURLError("database '\(text)' is not a number >= 0") }
        return n
    }

    /// Takes `[user]:password@` or `password@` off the front of `rest`.
    private static func credentials(_ rest: inout Substring) throws -> (String?, String?) {
        guard let at = rest.lastIndex(of: "@") else { return (nil, nil) }
        let credentials = rest[..<at]
        rest = rest[rest.index(after: at)...]
        if let colon = credentials.firstIndex(of: ":") {
            let user = credentials[..<colon]
            return (user.isEmpty ? nil : try percentDecoded(user), try percentDecoded(credentials[credentials.index(after: colon)...]))
        }
        // redis://secret@host is the classic form: a password without a user.
        return (nil, credentials.isEmpty ? nil : try percentDecoded(credentials))
    }

    private static func address(_ rest: Substring, defaultPort: Int, whole: String) throws -> Address {
        var host = String(rest)
        var port = defaultPort
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw RedisURLError("unterminated IPv6 address '\(rest)'") }
            host = String(rest[rest.index(after: rest.startIndex)..<close])
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":"), let p = Int(after.dropFirst()) else { throw RedisURLError("bad port in '\(rest)'") }
                port = p
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = String(rest[..<colon])
            guard let p = Int(rest[rest.index(after: colon)...]) else {
                throw RedisURLError("port '\(rest[rest.index(after: colon)...])' is not a number")
            }
            port = p
        }
        guard !host.isEmpty else { throw RedisURLError("no host in '\(masked(whole))'") }
        guard (1...65535).contains(port) else { throw RedisURLError("port \(port) is out of range 1-65535") }
        return Address(host: host, port: port)
    }

    private static func masked(_ text: String) -> String {
        guard let at = text.lastIndex(of: "@"), let start = text.range(of: "://")?.upperBound, start <= at else { return text }
        return String(text[..<start]) + "***" + String(text[at...])
    }

    private static func percentDecoded(_ s: Substring) throws -> String {
        guard let decoded = PercentEncoding.decode(s, plusIsSpace: false) else { throw RedisURLError("bad percent-encoding in the credentials") }
        return decoded
    }
}

/// What is wrong with a Redis URL.
public struct RedisURLError: Error, Equatable, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}
