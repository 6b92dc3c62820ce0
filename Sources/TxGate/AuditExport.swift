import TxGateCore
import TxGateRedis
import TxGateStore

/// `txgate audit`: the audit trail the configuration's store holds (SQLite file or Redis),
/// as JSON lines, oldest first. Reads only; starts nothing.
public enum AuditExport {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Writes one line per record written in [sinceMs, untilMs) to `write`; returns how many.
    /// A record that does not read as an event is an error naming it, not a line left out.
    @discardableResult
    public static func run(_ config: GatewayConfig, sinceMs: Int64, untilMs: Int64, write: (String) -> Void) throws(Failure) -> Int {
        var count = 0
        let each: (StoredAuditRecord) throws -> Void = { record in
            guard let event = AuditEvent(stored: record) else {
                throw Failure(description: "audit record \(record.id) is not an audit event")
            }
            write(event.jsonLine)
            count += 1
        }
        do {
            if let url = config.store.redis {
                try RedisStore.auditRecords(url: url, keyPrefix: config.store.keyPrefix, timeoutMs: config.store.timeoutMs,
                                            sinceMs: sinceMs, untilMs: untilMs, each)
            } else {
                try SQLiteStore.auditRecords(path: config.store.path, sinceMs: sinceMs, untilMs: untilMs, each)
            }
        } catch let f as Failure {
            throw f
        } catch {
            let store = config.store.redis.map { "redis \($0)" } ?? "sqlite '\(config.store.path)'"
            throw Failure(description: "store (\(store)): \(error)")
        }
        return count
    }
}
