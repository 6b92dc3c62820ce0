import CHiredis
import Foundation
import TxGateCore

extension RedisStore {
    /// The audit records written in [sinceMs, untilMs) by Redis's clock, oldest first
    /// (`txgate audit`): `XRANGE <prefix>audit` on one blocking connection (never on a loop),
    /// a thousand records per round.
    public static func auditRecords(url: RedisURL, keyPrefix: String, timeoutMs: Int, sinceMs: Int64, untilMs: Int64,
                                    _ each: (StoredAuditRecord) throws -> Void) throws {
        let c = try BlockingRedis.connect(url, timeoutMs: timeoutMs)
        defer { redisFree(c) }
        let key = keyPrefix + "audit"
        var start = String(max(0, sinceMs))
        let end = String(untilMs - 1)
        while untilMs > sinceMs {
            let reply = try BlockingRedis.command(c, ["XRANGE", key, start, end, "COUNT", "1000"])
            guard case .array(let entries) = reply else {
                if case .error(let e) = reply { throw StoreError.failed("redis \(url): XRANGE \(key): \(e)") }
                throw StoreError.failed("redis \(url): XRANGE \(key): unexpected reply \(reply.kind)")
            }
            for entry in entries {
                guard case .array(let parts) = entry, parts.count == 2, case .string(let rawId) = parts[0],
                      case .array(let fields) = parts[1] else {
                    throw StoreError.failed("redis \(url): \(key) holds an entry that is not a stream entry")
                }
                let id = String(decoding: rawId, as: UTF8.self)
                var values: [String: [UInt8]] = [:]
                var i = 0
                while i + 1 < fields.count {
                    if case .string(let name) = fields[i], case .string(let value) = fields[i + 1] {
                        values[String(decoding: name, as: UTF8.self)] = value
                    }
                    i += 2
                }
                guard let ms = Int64(id.prefix { $0 != "-" }), let entry = values["e"] else {
                    throw StoreError.failed("redis \(url): \(key) entry \(id) has no audit entry ('e')")
                }
                try each(StoredAuditRecord(timeMs: ms, id: id, entry: entry, found: values["f"]))
                start = "(" + id
            }
            if entries.count < 1000 { break }
        }
    }
}

extension BlockingRedis {
    /// A blocking connection to the primary (for a sentinel URL: the one the sentinels name),
    /// authenticated and on the URL's database.
    static func connect(_ url: RedisURL, timeoutMs: Int) throws(Failure) -> UnsafeMutablePointer<redisContext> {
        let c = try open(try primaryAddress(url, timeoutMs: timeoutMs).address, timeoutMs: timeoutMs)
        do throws(Failure) {
            if let password = url.password {
                var auth = ["AUTH"]
                if let user = url.username { auth.append(user) }
                auth.append(password)
                if case .error = try command(c, auth) { throw Failure(description: "AUTH refused") }
            }
            if url.database != 0, case .error(let e) = try command(c, ["SELECT", String(url.database)]) {
                throw Failure(description: "SELECT refused: \(e)")
            }
            return c
        } catch {
            redisFree(c)
            throw error
        }
    }
}
