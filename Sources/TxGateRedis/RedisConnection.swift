import CHiredis
import TxGateCrypto
import EventHTTP
import HTTPCore
import Foundation
import Logging
import TxGateCore

/// A reply from Redis, copied out of hiredis's buffers.
enum RedisReply: Equatable {
    case string([UInt8])
    case integer(Int)
    case null
    case status(String)
    case error(String)
    case array([RedisReply])

    /// The reply's type, for errors (a value may be a secret and is never shown).
    var kind: String {
        switch self {
        case .string: return "string"
        case .integer(let n): return "integer \(n)"
        case .null: return "nil"
        case .status(let s): return "status \(s)"
        case .error(let e): return "error \(e)"
        case .array(let a): return "array of \(a.count)"
        }
    }

    init(_ r: redisReply) {
        switch r.type {
        case REDIS_REPLY_STRING:
            self = .string(r.str.map { Array(UnsafeRawBufferPointer(start: $0, count: r.len)) } ?? [])
        case REDIS_REPLY_INTEGER:
            self = .integer(Int(r.integer))
        case REDIS_REPLY_NIL:
            self = .null
        case REDIS_REPLY_STATUS:
            self = .status(r.str.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: r.len), as: UTF8.self) } ?? "")
        case REDIS_REPLY_ERROR:
            self = .error(r.str.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: r.len), as: UTF8.self) } ?? "")
        case REDIS_REPLY_ARRAY:
            self = .array((0..<r.elements).map { i in r.element[i].map { RedisReply($0.pointee) } ?? .null })
        default:
            self = .error("unknown reply type \(r.type)")
        }
    }
}

/// One command's arguments, packed in one buffer (hiredis copies them when the command is queued).
struct RedisCommand {
    /// Room at the start of `body` for the command's `*<count>\r\n`, rewritten as arguments are
    /// added, so that the whole command is one run of bytes sent from where it was written.
    private static let headerRoom = 24
    /// `*<count>\r\n` (in `body[start..<headerRoom]`), then the arguments in RESP
    /// (`$<length>\r\n<bytes>\r\n` each) up to `used`, written as they are added: hiredis's own
    /// formatting (`redisAsyncCommandArgv`) cost ~5k instructions a command. The buffer is
    /// allocated at its size and written in place, one argument at a time: appended piece by
    /// piece (header, bytes, CR, LF), an argument cost four of the array's generic appends.
    private var body: [UInt8]
    private var used = headerRoom
    private var start = headerRoom
    private(set) var count = 0
    /// The command name, for error messages (arguments may be secrets and are never shown).
    let name: String
    /// For `EVALSHA`: the script, to send it whole if Redis answers NOSCRIPT, and where the
    /// arguments after the SHA-1 start in `body`.
    private var script: (script: RedisScript, rest: Int)?

    /// `room`: the bytes of the large arguments to come (records, audit entries), so that the
    /// buffer is allocated once at its size instead of growing as they are added.
    init(_ name: String, room: Int = 0) {
        self.name = name
        body = [UInt8](repeating: 0, count: Self.headerRoom + 256 + room)
        add(name)
    }

    /// `EVALSHA <sha1>`, the arguments to follow. Redis runs the script from its cache;
    /// `withScriptText` is the same command as `EVAL <script>`, for a server that does not have
    /// it (restarted, flushed, failed over), which NOSCRIPT says has run nothing.
    init(_ script: RedisScript, room: Int = 0) {
        self.init("EVALSHA", room: room)
        add(script.sha1)
        self.script = (script, used)
    }

    /// This `EVALSHA` as `EVAL` with the script's text.
    func withScriptText() -> RedisCommand? {
        guard let script else { return nil }
        var c = RedisCommand("EVAL", room: script.script.text.count + used)
        c.add(script.script.text)
        body.withUnsafeBufferPointer { c.write(UnsafeBufferPointer(rebasing: $0[script.rest..<used])) }
        c.count += count - 2
        c.writeCountHeader()
        return c
    }

    /// Calls `send` with the whole command in RESP, `*<count>\r\n` then the arguments (valid
    /// only during the call).
    func withRESP<R>(_ send: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        body.withUnsafeBufferPointer { send(UnsafeBufferPointer(rebasing: $0[start..<used])) }
    }

    mutating func add(_ s: String) {
        s.withUTF8Bytes { add($0) }
    }

    /// One argument written from two strings (a key prefix and a key) without joining them first.
    mutating func add(_ prefix: String, _ s: String) {
        prefix.withUTF8Bytes { p in s.withUTF8Bytes { add(p, $0) } }
    }

    mutating func add(_ b: [UInt8]) {
        b.withUnsafeBufferPointer { add($0) }
    }

    mutating func add(_ b: UnsafeBufferPointer<UInt8>) {
        add(UnsafeBufferPointer(start: nil, count: 0), b)
    }

    /// `head` and `tail` as one argument: its header, its bytes and CR LF written in place, and
    /// the command's count rewritten.
    private mutating func add(_ head: UnsafeBufferPointer<UInt8>, _ tail: UnsafeBufferPointer<UInt8>) {
        let length = head.count + tail.count
        var digits = 1
        var bound = 10
        while length >= bound { digits += 1; bound *= 10 }
        let headerEnd = used + digits + 3  // `$`, the digits, CR LF
        reserve(headerEnd + length + 2 - used)
        count += 1
        let count = count
        used = body.withUnsafeMutableBufferPointer { b in
            _ = Self.writeHeader(UInt8(ascii: "$"), length, endingAt: headerEnd, in: b)
            var i = headerEnd
            if let h = head.baseAddress, head.count > 0 {
                UnsafeMutableRawPointer(b.baseAddress! + i).copyMemory(from: h, byteCount: head.count)
                i += head.count
            }
            if let t = tail.baseAddress, tail.count > 0 {
                UnsafeMutableRawPointer(b.baseAddress! + i).copyMemory(from: t, byteCount: tail.count)
                i += tail.count
            }
            b[i] = 13
            b[i + 1] = 10
            start = Self.writeHeader(UInt8(ascii: "*"), count, endingAt: Self.headerRoom, in: b)
            return i + 2
        }
    }

    /// Bytes already in RESP, copied after the arguments written (the counts are the caller's).
    private mutating func write(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let src = bytes.baseAddress, bytes.count > 0 else { return }
        reserve(bytes.count)
        used = body.withUnsafeMutableBufferPointer { b in
            UnsafeMutableRawPointer(b.baseAddress! + used).copyMemory(from: src, byteCount: bytes.count)
            return used + bytes.count
        }
    }

    /// Room for `extra` more bytes after `used`: a record or an audit entry (hundreds of bytes)
    /// larger than the room asked for grows the buffer once to at least twice its size.
    private mutating func reserve(_ extra: Int) {
        let needed = used + extra
        guard needed > body.count else { return }
        body.append(contentsOf: repeatElement(0, count: Swift.max(needed, body.count * 2) - body.count))
    }

    /// `*<count>\r\n`, right-aligned in the room before the arguments.
    private mutating func writeCountHeader() {
        let count = count
        start = body.withUnsafeMutableBufferPointer { Self.writeHeader(UInt8(ascii: "*"), count, endingAt: Self.headerRoom, in: $0) }
    }

    /// Writes `<sigil><n>\r\n` (`*` and a count, `$` and a length) to end just before `end`
    /// in `h` (which has room for 22 digits before it); returns where it starts.
    private static func writeHeader(_ sigil: UInt8, _ n: Int, endingAt end: Int, in h: UnsafeMutableBufferPointer<UInt8>) -> Int {
        var i = end - 2
        h[i] = 13
        h[i + 1] = 10
        var rest = n
        repeat {
            i -= 1
            h[i] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest % 10)
            rest /= 10
        } while rest > 0
        i -= 1
        h[i] = sigil
        return i
    }
}

/// A Lua script the store runs with `EVALSHA`: its text and the SHA-1 Redis names it by.
/// Sending the text with every `EVAL` cost the gateway a copy and Redis a SHA-1 of 1 to 2 KiB
/// per store operation (nine a step-up cycle).
///
/// The scripts are static: their text and SHA-1 are copied once into memory that lives as long
/// as the process, and a script is two plain pointers. A command built on any worker holds them
/// without retaining anything: as `String`s, every worker retained the same two heap objects
/// each time it built or copied a command (about 40 times a step-up cycle), and a retain is an
/// atomic write to a cache line that every core then has to fetch back.
struct RedisScript: @unchecked Sendable {
    let text: UnsafeBufferPointer<UInt8>
    let sha1: UnsafeBufferPointer<UInt8>

    /// For `static let`s only: the bytes are never freed.
    init(_ text: String) {
        let bytes = Array(text.utf8)
        self.text = Self.permanent(bytes)
        sha1 = Self.permanent(Array(Crypto.hex(Crypto.sha1(bytes)).utf8))
    }

    private static func permanent(_ bytes: [UInt8]) -> UnsafeBufferPointer<UInt8> {
        let p = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: bytes.count)
        _ = p.initialize(from: bytes)
        return UnsafeBufferPointer(p)
    }
}

/// A command waiting for its reply; hiredis holds it (retained) as the callback's privdata.
private final class PendingReply {
    let connection: RedisConnection
    let done: (RedisReply?) -> Void
    init(_ connection: RedisConnection, _ done: @escaping (RedisReply?) -> Void) {
        self.connection = connection
        self.done = done
    }
}

/// The one Redis connection of one event loop: hiredis's async context on the loop's
/// `event_base`, so that commands never block and never leave the loop's thread.
///
/// A connection is ready only once its `handshake` (the store's fence and eviction checks)
/// has succeeded. Commands asked for while it connects wait in `held`, not in hiredis's
/// pipeline: pipelined behind the handshake they would reach Redis before the fence had moved
/// on to a new epoch, and a restored record would still count as current for them.
///
/// With a `redis+sentinel://` URL every connect first asks the sentinels which server is the
/// primary (off the loop: `BlockingRedis.askSentinels`, one short blocking connection per
/// sentinel on a dispatch queue, as host names are resolved), then checks with `ROLE` that the
/// server named really is a primary before the handshake (a sentinel cut off from the others
/// may still name the old one). A failover is followed by reconnecting: the old primary's
/// connection breaks, or a command is refused with READONLY once it has been demoted
/// (`reconnect(because:)`), and the next connect asks the sentinels again. The fence handshake
/// runs on the new primary as on any reconnect: another server, another `run_id`, a new epoch.
///
/// hiredis 0.14 has no command timeout, so a watchdog timer runs while replies are due: when
/// Redis (or the connect) makes no progress for `timeoutMs`, the connection is dropped and every
/// waiting command fails as unavailable. A dropped connection is retried with backoff
/// (100 ms doubling to 5 s); meanwhile commands fail at once, so requests fail closed quickly.
final class RedisConnection {
    private enum State { case waiting, connecting, ready }

    let loop: EventLoop
    private let url: RedisURL
    private let timeoutMs: Int
    private let logger: Logger
    private var context: UnsafeMutablePointer<redisAsyncContext>?
    private var state = State.waiting
    private var inFlight = 0
    private var backoffMs = RedisConnection.minBackoffMs
    /// With sentinels, asking again is cheap and a failover takes a second or two: the backoff
    /// stops at 1 s rather than 5 s, so that the new primary is found soon after it is promoted.
    private let maxBackoffMs: Int
    /// The server this connection is (or was last) connected to, and the sentinel that named it.
    private var primary: RedisURL.Address?
    /// Monotonic (`EventLoop.nowNanos`): a clock step must not make an outage look longer or negative.
    private var downSinceNanos: UInt64? = EventLoop.nowNanos()
    private var reportedDown = false
    private var closed = false
    private(set) var lastError = "not connected yet"
    private var watchdog: LoopTimer!
    private var retry: LoopTimer!
    /// Commands asked for while connecting, sent once the handshake is done.
    private var held: [(command: RedisCommand, done: (RedisReply?) -> Void)] = []
    /// Runs after Redis first answered on a new connection, before anything else is sent;
    /// calls back nil when the connection may serve, or why not (the connection is dropped and
    /// retried). Set before `connect()`.
    var handshake: ((RedisConnection, @escaping (String?) -> Void) -> Void)?

    static let minBackoffMs = 100
    static let maxBackoffMs = 5000
    static let maxSentinelBackoffMs = 1000

    init(loop: EventLoop, url: RedisURL, timeoutMs: Int, logger: Logger) {
        self.loop = loop
        self.url = url
        self.timeoutMs = timeoutMs
        self.logger = logger
        maxBackoffMs = url.directAddress == nil ? Self.maxSentinelBackoffMs : Self.maxBackoffMs
        watchdog = LoopTimer(loop: loop) { [unowned self] in
            drop(state == .connecting ? "connecting to \(url) timed out after \(timeoutMs) ms"
                                      : "\(url) did not answer within \(timeoutMs) ms", free: true)
        }
        retry = LoopTimer(loop: loop) { [unowned self] in connect() }
    }

    /// The server's address, without credentials (with sentinels: and the primary they named).
    var urlDescription: String {
        guard url.directAddress == nil, let primary else { return url.description }
        return "\(url) (primary \(primary))"
    }

    /// Why commands fail now, for errors and the health endpoint.
    var unavailableReason: String {
        "redis \(url) is down (\(lastError)); reconnecting"
    }

    // MARK: connecting

    /// Starts connecting (on the loop thread). Host names are resolved, and sentinels asked,
    /// off the loop.
    func connect() {
        loop.preconditionInEventLoop()
        guard !closed, state == .waiting else { return }
        state = .connecting
        if let address = url.directAddress, Self.isNumericAddress(address.host) {
            open(address, ip: address.host, namedBy: nil)
            return
        }
        let (url, timeoutMs) = (url, timeoutMs)
        let connection = LoopBound(self, loop: loop)
        DispatchQueue.global().async {
            CurrentThread.unpin()
            let found = Result { () throws -> (RedisURL.Address, String, RedisURL.Address?) in
                let (address, sentinel) = try BlockingRedis.primaryAddress(url, timeoutMs: timeoutMs)
                let ip = Self.isNumericAddress(address.host) ? address.host
                    : try SocketAddress(host: address.host, port: address.port).numericHost
                return (address, ip, sentinel)
            }
            connection.execute { connection in
                switch found {
                case .success(let (address, ip, sentinel)): connection.open(address, ip: ip, namedBy: sentinel)
                case .failure(let e): connection.drop("\(e)", free: false)
                }
            }
        }
    }

    /// Connects to `address` (at `ip`); `namedBy`: the sentinel that named it as the primary.
    private func open(_ address: RedisURL.Address, ip: String, namedBy sentinel: RedisURL.Address?) {
        guard !closed else { state = .waiting; return }
        if let sentinel, primary != address {
            logger.notice(primary == nil ? "redis primary found through sentinel" : "redis primary changed (failover): connecting to the new one", metadata: [
                "redis": .string(url.description), "sentinel": .string(sentinel.description),
                "primary": .string(address.description), "previous": .string(primary?.description ?? "none"),
            ])
        }
        primary = address
        guard let ac = redisAsyncConnect(ip, Int32(address.port)) else { drop("out of memory", free: false); return }
        if ac.pointee.err != 0 {
            let why = Self.errorString(ac)
            redisAsyncFree(ac)
            drop(why, free: false)
            return
        }
        guard txgate_redis_attach(ac, loop.base) == REDIS_OK else {
            redisAsyncFree(ac)
            drop("could not attach the redis connection to the event loop (out of memory)", free: false)
            return
        }
        ac.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        _ = redisAsyncSetConnectCallback(ac) { ac, status in
            guard let ac, let c = RedisConnection.owner(of: ac) else { return }
            c.connected(status == REDIS_OK ? nil : RedisConnection.errorString(ac))
        }
        _ = redisAsyncSetDisconnectCallback(ac) { ac, status in
            guard let ac, let c = RedisConnection.owner(of: ac) else { return }
            c.disconnected(status == REDIS_OK ? "connection closed" : RedisConnection.errorString(ac))
        }
        context = ac
        watchdog.schedule(afterMs: timeoutMs)
        // Queued ahead of everything else, so that no command runs unauthenticated or on db 0.
        if let password = url.password {
            var auth = RedisCommand("AUTH")
            if let user = url.username { auth.add(user) }
            auth.add(password)
            setup(auth)
        }
        if url.database != 0 {
            var select = RedisCommand("SELECT")
            select.add(String(url.database))
            setup(select)
        }
        // A TCP connect alone proves little (a frozen Redis still completes the handshake in
        // the kernel): the connection is ready once Redis has answered.
        setup(RedisCommand("PING")) { [self] in
            guard sentinel != nil else { handshake(on: ac); return }
            verifyPrimary(address, on: ac)
        }
    }

    /// The connection's handshake (the store's fence), then ready.
    private func handshake(on ac: UnsafeMutablePointer<redisAsyncContext>) {
        guard let handshake else { ready(); return }
        handshake(self) { [self] failure in
            guard context == ac, state == .connecting else { return }
            if let failure {
                loop.execute { [self] in if context == ac { drop(failure, free: true) } }
            } else {
                ready()
            }
        }
    }

    /// A server a sentinel named must say it is a primary (`ROLE`, or `INFO replication` where
    /// ROLE is renamed) before anything else: during a failover, or from a sentinel on the
    /// wrong side of a partition, the answer can be a server that is, or is now, a replica.
    private func verifyPrimary(_ address: RedisURL.Address, on ac: UnsafeMutablePointer<redisAsyncContext>) {
        sendSetup(RedisCommand("ROLE")) { [self] reply in
            guard context == ac, state == .connecting else { return }
            switch reply {
            case .array(let items)? where !items.isEmpty:
                if case .string(let role) = items[0], String(decoding: role, as: UTF8.self) == "master" {
                    handshake(on: ac)
                } else {
                    let role = if case .string(let r) = items[0] { String(decoding: r, as: UTF8.self) } else { items[0].kind }
                    notPrimary(address, role: role, on: ac)
                }
            case .error?:
                var info = RedisCommand("INFO")
                info.add("replication")
                sendSetup(info) { [self] reply in
                    guard context == ac, state == .connecting else { return }
                    guard case .string(let text)? = reply, let role = RedisFence.field("role", in: text) else {
                        loop.execute { [self] in if context == ac { drop("\(address) does not say its role (ROLE and INFO replication refused)", free: true) } }
                        return
                    }
                    if role == "master" { handshake(on: ac) } else { notPrimary(address, role: role, on: ac) }
                }
            default:
                break
            }
        }
    }

    private func notPrimary(_ address: RedisURL.Address, role: String, on ac: UnsafeMutablePointer<redisAsyncContext>) {
        let why = "\(address), named by the sentinels as the primary, is not one (role \(role)); asking the sentinels again"
        loop.execute { [self] in if context == ac { drop(why, free: true) } }
    }

    /// Sends one handshake command (only while connecting): `done` gets the reply, or nil
    /// when the connection failed first.
    func sendSetup(_ command: RedisCommand, _ done: @escaping (RedisReply?) -> Void) {
        if !send(command, setup: true, done) { done(nil) }
    }

    /// Drops this connection (on the next loop turn) and connects again, which runs the
    /// handshake again: for a reply that says the fence record is gone.
    func reconnect(because why: String) {
        let ac = context
        loop.execute { [self] in if ac != nil, context == ac { drop(why, free: true) } }
    }

    private func setup(_ command: RedisCommand, then: (() -> Void)? = nil) {
        let ac = context
        send(command, setup: true) { [self] reply in
            switch reply {
            case .error(let message)?:
                // Dropping from inside hiredis's callback is deferred to the next loop turn.
                loop.execute { [self] in
                    if context == ac { drop("redis refused \(command.name): \(message)", free: true) }
                }
            case .some:
                then?()
            case nil:
                break
            }
        }
    }

    private func connected(_ failure: String?) {
        guard let failure else { return }
        // hiredis frees a context whose connect failed, after this callback.
        forget()
        drop(failure, free: false)
    }

    private func ready() {
        guard state == .connecting else { return }
        state = .ready
        backoffMs = Self.minBackoffMs
        if inFlight == 0 { watchdog.cancel() } else { watchdog.schedule(afterMs: timeoutMs) }
        let waiting = held
        held = []
        for (command, done) in waiting where !send(command, done) { done(nil) }
        if reportedDown, let since = downSinceNanos {
            logger.notice("redis connection restored", metadata: [
                "redis": .string(urlDescription), "down_ms": .stringConvertible((EventLoop.nowNanos() &- since) / 1_000_000),
            ])
        }
        reportedDown = false
        downSinceNanos = nil
    }

    private func disconnected(_ why: String) {
        // hiredis frees the context after this callback, and fails what was waiting.
        forget()
        drop(why, free: false)
    }

    /// Detaches from the current context (whose owner pointer hiredis still holds).
    private func forget() {
        context?.pointee.data = nil
        context = nil
    }

    /// Marks the connection down, fails what is waiting (when `free`, by freeing the context
    /// here; otherwise hiredis is about to), and schedules the next attempt.
    private func drop(_ why: String, free: Bool) {
        lastError = why
        state = .waiting
        watchdog.cancel()
        if let ac = context {
            forget()
            if free { redisAsyncFree(ac) }
        }
        if downSinceNanos == nil { downSinceNanos = EventLoop.nowNanos() }
        failHeld()
        if !reportedDown {
            reportedDown = true
            logger.error("redis unavailable: requests that need state fail with 503 until it is back", metadata: [
                "redis": .string(urlDescription), "error": .string(why),
            ])
        } else {
            logger.debug("redis still unavailable", metadata: ["redis": .string(urlDescription), "error": .string(why)])
        }
        guard !closed else { return }
        retry.schedule(afterMs: backoffMs)
        backoffMs = min(backoffMs * 2, maxBackoffMs)
    }

    /// Fails every held command, on the next loop turn (never on a caller's stack).
    private func failHeld() {
        let waiting = held
        held = []
        if !waiting.isEmpty { loop.execute { for (_, done) in waiting { done(nil) } } }
    }

    /// Closes for good (on the loop thread), failing what is waiting.
    func close() {
        loop.preconditionInEventLoop()
        closed = true
        failHeld()
        retry.cancel()
        watchdog.cancel()
        if let ac = context {
            forget()
            state = .waiting
            redisAsyncFree(ac)
        }
    }

    // MARK: commands

    /// Sends a command; `done` gets the reply, or nil when the connection failed first.
    /// Returns false (and does not call `done`) when there is no connection to send on.
    /// While the first connection is being made, commands queue behind its handshake; while
    /// Redis is known to be down, they fail at once instead of waiting for a retry.
    @discardableResult
    func send(_ command: RedisCommand, setup: Bool = false, _ done: @escaping (RedisReply?) -> Void) -> Bool {
        loop.preconditionInEventLoop()
        if !setup && state == .connecting && !reportedDown && !closed {
            held.append((command, done))
            return true
        }
        guard let ac = context, state == .ready || setup else { return false }
        let pending = Unmanaged.passRetained(PendingReply(self, done)).toOpaque()
        let rc: Int32 = command.withRESP { resp in
            resp.withMemoryRebound(to: CChar.self) { cmd in
                redisAsyncFormattedCommand(ac, { _, reply, privdata in
                    let p = Unmanaged<PendingReply>.fromOpaque(privdata!).takeRetainedValue()
                    p.connection.replied()
                    p.done(reply.map { RedisReply($0.assumingMemoryBound(to: redisReply.self).pointee) })
                }, pending, cmd.baseAddress, cmd.count)
            }
        }
        guard rc == REDIS_OK else {
            Unmanaged<PendingReply>.fromOpaque(pending).release()
            return false
        }
        inFlight += 1
        if inFlight == 1 && state == .ready { watchdog.schedule(afterMs: timeoutMs) }
        return true
    }

    private func replied() {
        inFlight -= 1
        guard state == .ready else { return }
        // Progress: the watchdog waits a full timeout again for the next reply, if any is due.
        if inFlight == 0 { watchdog.cancel() } else { watchdog.schedule(afterMs: timeoutMs) }
    }

    // MARK: helpers

    private static func isNumericAddress(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }

    private static func owner(of ac: UnsafePointer<redisAsyncContext>) -> RedisConnection? {
        ac.pointee.data.map { Unmanaged<RedisConnection>.fromOpaque($0).takeUnretainedValue() }
    }

    private static func errorString(_ ac: UnsafePointer<redisAsyncContext>) -> String {
        let message = ac.pointee.errstr.map { String(cString: $0) } ?? ""
        return message.isEmpty ? "connection error \(ac.pointee.err)" : message
    }
}
