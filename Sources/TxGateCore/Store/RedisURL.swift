/// `redis://[[user]:password@]host[:port][/db]`, parsed without any I/O.
///
/// The password may be percent-encoded (`%40` for `@`). `description` never shows it.
public struct RedisURL: Equatable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var username: String?
    public var password: String?
    public var database: Int

    public init(host: String, port: Int = 6379, username: String? = nil, password: String? = nil, database: Int = 0) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.database = database
    }

    /// Parses the URL, or throws an error that says what is wrong with it.
    public init(parsing text: String) throws {
        let scheme = "redis://"
        guard text.hasPrefix(scheme) else {
            throw RedisURLError("'\(Self.masked(text))' is not redis://[user:password@]host:port[/db]")
        }
        var rest = Substring(text.dropFirst(scheme.count))
        var database = 0
        if let slash = rest.firstIndex(of: "/") {
            let db = rest[rest.index(after: slash)...]
            rest = rest[..<slash]
            if !db.isEmpty {
                guard let n = Int(db), n >= 0 else { throw RedisURLError("database '\(db)' is not a number >= 0") }
                database = n
            }
        }
        var username: String?
        var password: String?
        if let at = rest.lastIndex(of: "@") {
            let credentials = rest[..<at]
            rest = rest[rest.index(after: at)...]
            if let colon = credentials.firstIndex(of: ":") {
                let user = credentials[..<colon]
                username = user.isEmpty ? nil : try Self.percentDecoded(user)
                password = try Self.percentDecoded(credentials[credentials.index(after: colon)...])
            } else if !credentials.isEmpty {
                // redis://secret@host is the classic form: a password without a user.
                password = try Self.percentDecoded(credentials)
            }
        }
        var host = String(rest)
        var port = 6379
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
        guard !host.isEmpty else { throw RedisURLError("no host in '\(Self.masked(text))'") }
        guard (1...65535).contains(port) else { throw RedisURLError("port \(port) is out of range 1-65535") }
        self.init(host: host, port: port, username: username, password: password, database: database)
    }

    /// host:port/db, with the credentials left out.
    public var description: String {
        let h = host.contains(":") ? "[\(host)]" : host
        return "redis://\(h):\(port)/\(database)"
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
