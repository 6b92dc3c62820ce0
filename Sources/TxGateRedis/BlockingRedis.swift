import CHiredis
import Foundation
import TxGateCore

/// A few commands on one blocking connection, for the start-up check only (never on a loop).
enum BlockingRedis {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The server's maxmemory-policy (CONFIG GET, else INFO memory), or nil if neither says.
    static func evictionPolicy(_ url: RedisURL, timeoutMs: Int) throws(Failure) -> String? {
        var tv = timeval(tv_sec: timeoutMs / 1000, tv_usec: Int((timeoutMs % 1000) * 1000))
        guard let c = redisConnectWithTimeout(url.host, Int32(url.port), tv) else { throw Failure(description: "out of memory") }
        defer { redisFree(c) }
        if c.pointee.err != 0 { throw Failure(description: errorString(c)) }
        _ = redisSetTimeout(c, tv)
        if let password = url.password {
            var auth = ["AUTH"]
            if let user = url.username { auth.append(user) }
            auth.append(password)
            if case .error = try command(c, auth) { throw Failure(description: "AUTH refused") }
        }
        if url.database != 0, case .error(let e) = try command(c, ["SELECT", String(url.database)]) {
            throw Failure(description: "SELECT refused: \(e)")
        }
        if case .array(let items) = try command(c, ["CONFIG", "GET", "maxmemory-policy"]), items.count == 2,
           case .string(let value) = items[1] {
            return String(decoding: value, as: UTF8.self)
        }
        if case .string(let text) = try command(c, ["INFO", "memory"]) {
            return RedisFence.field("maxmemory_policy", in: text)
        }
        return nil
    }

    static func command(_ c: UnsafeMutablePointer<redisContext>, _ arguments: [String]) throws(Failure) -> RedisReply {
        var cStrings = arguments.map { strdup($0) }
        defer { cStrings.forEach { free($0) } }
        let lengths = arguments.map { $0.utf8.count }
        let raw: UnsafeMutableRawPointer? = cStrings.withUnsafeMutableBufferPointer { argv in
            argv.withMemoryRebound(to: UnsafePointer<CChar>?.self) { argv in
                redisCommandArgv(c, Int32(arguments.count), argv.baseAddress, lengths)
            }
        }
        guard let raw else { throw Failure(description: errorString(c)) }
        defer { freeReplyObject(raw) }
        return RedisReply(raw.assumingMemoryBound(to: redisReply.self).pointee)
    }

    static func errorString(_ c: UnsafeMutablePointer<redisContext>) -> String {
        let message = withUnsafeBytes(of: c.pointee.errstr) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        return message.isEmpty ? "connection error \(c.pointee.err)" : message
    }
}
