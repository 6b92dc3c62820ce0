import CHiredis
import Foundation
import TxGateCore

/// A few commands on short-lived blocking connections (hiredis's synchronous API): the
/// start-up check, and asking the sentinels for the primary. Never on an event loop: the
/// start-up check runs before any worker, a sentinel lookup on a dispatch queue.
enum BlockingRedis {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The server's maxmemory-policy (CONFIG GET, else INFO memory), or nil if neither says.
    /// For a sentinel URL, on the primary the sentinels name.
    static func evictionPolicy(_ url: RedisURL, timeoutMs: Int) throws(Failure) -> String? {
        let c = try connect(url, timeoutMs: timeoutMs)
        defer { redisFree(c) }
        if case .array(let items) = try command(c, ["CONFIG", "GET", "maxmemory-policy"]), items.count == 2,
           case .string(let value) = items[1] {
            return String(decoding: value, as: UTF8.self)
        }
        if case .string(let text) = try command(c, ["INFO", "memory"]) {
            return RedisFence.field("maxmemory_policy", in: text)
        }
        return nil
    }

    /// The primary's address: the URL's own, or the one a sentinel names (and which sentinel).
    static func primaryAddress(_ url: RedisURL, timeoutMs: Int) throws(Failure) -> (address: RedisURL.Address, sentinel: RedisURL.Address?) {
        switch url.server {
        case .direct(let address):
            return (address, nil)
        case .sentinel(let master, let sentinels):
            let answer = try askSentinels(master: master, sentinels: sentinels, username: url.username, password: url.password,
                                          timeoutMs: timeoutMs)
            return (answer.primary, answer.sentinel)
        }
    }

    /// `SENTINEL get-master-addr-by-name <master>`, asked of each sentinel in turn until one
    /// names an address (Redis's sentinel client protocol). A sentinel that answers NOAUTH is
    /// asked again after AUTH with the URL's credentials. The error names every sentinel's
    /// failure. The caller verifies that the address really is a primary (`ROLE`): a
    /// sentinel cut off from the others may name an old one.
    static func askSentinels(master: String, sentinels: [RedisURL.Address], username: String?, password: String?,
                             timeoutMs: Int) throws(Failure) -> (primary: RedisURL.Address, sentinel: RedisURL.Address) {
        var failures: [String] = []
        for sentinel in sentinels {
            do {
                let c = try open(sentinel, timeoutMs: timeoutMs)
                defer { redisFree(c) }
                let question = ["SENTINEL", "get-master-addr-by-name", master]
                var reply = try command(c, question)
                if case .error(let e) = reply, e.hasPrefix("NOAUTH"), let password {
                    if case .error(let refused) = try command(c, ["AUTH"] + (username.map { [$0] } ?? []) + [password]) {
                        failures.append("\(sentinel): AUTH refused (\(refused))")
                        continue
                    }
                    reply = try command(c, question)
                }
                switch reply {
                case .array(let items) where items.count == 2:
                    guard case .string(let host) = items[0], case .string(let portText) = items[1],
                          let port = Int(String(decoding: portText, as: UTF8.self)), (1...65535).contains(port) else {
                        failures.append("\(sentinel): unexpected answer \(reply.kind)")
                        continue
                    }
                    return (RedisURL.Address(host: String(decoding: host, as: UTF8.self), port: port), sentinel)
                case .null, .array:
                    failures.append("\(sentinel): does not monitor a master named '\(master)'")
                case .error(let e):
                    failures.append("\(sentinel): refused SENTINEL get-master-addr-by-name (\(e))")
                default:
                    failures.append("\(sentinel): unexpected answer \(reply.kind)")
                }
            } catch {
                failures.append("\(sentinel): \(error.description)")
            }
        }
        throw Failure(description: "no sentinel named the primary of '\(master)': " + failures.joined(separator: "; "))
    }

    /// A blocking connection to `address`, with `timeoutMs` for the connect and every reply.
    static func open(_ address: RedisURL.Address, timeoutMs: Int) throws(Failure) -> UnsafeMutablePointer<redisContext> {
        let tv = timeval(tv_sec: timeoutMs / 1000, tv_usec: Int((timeoutMs % 1000) * 1000))
        guard let c = redisConnectWithTimeout(address.host, Int32(address.port), tv) else { throw Failure(description: "out of memory") }
        if c.pointee.err != 0 {
            let why = errorString(c)
            redisFree(c)
            throw Failure(description: why)
        }
        _ = redisSetTimeout(c, tv)
        return c
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
