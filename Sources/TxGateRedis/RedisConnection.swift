import CHiredis
import EventHTTP
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
    var bytes: [UInt8] = []
    var lengths: [Int] = []
    /// The command name, for error messages (arguments may be secrets and are never shown).
    let name: String

    init(_ name: String) {
        self.name = name
        add(name)
    }

    mutating func add(_ s: String) {
        bytes.append(contentsOf: s.utf8)
        lengths.append(s.utf8.count)
    }

    mutating func add(_ b: [UInt8]) {
        bytes.append(contentsOf: b)
        lengths.append(b.count)
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

    init(loop: EventLoop, url: RedisURL, timeoutMs: Int, logger: Logger) {
        self.loop = loop
        self.url = url
        self.timeoutMs = timeoutMs
        self.logger = logger
        watchdog = LoopTimer(loop: loop) { [unowned self] in
            drop(state == .connecting ? "connecting to \(url) timed out after \(timeoutMs) ms"
                                      : "\(url) did not answer within \(timeoutMs) ms", free: true)
        }
        retry = LoopTimer(loop: loop) { [unowned self] in connect() }
    }

    /// The server's address, without credentials.
    var urlDescription: String { url.description }

    /// Why commands fail now, for errors and the health endpoint.
    var unavailableReason: String {
        "redis \(url) is down (\(lastError)); reconnecting"
    }

    // MARK: connecting

    /// Starts connecting (on the loop thread). Host names are resolved off the loop.
    func connect() {
        loop.preconditionInEventLoop()
        guard !closed, state == .waiting else { return }
        state = .connecting
        if Self.isNumericAddress(url.host) {
            open(ip: url.host)
            return
        }
        let (host, port) = (url.host, url.port)
        let connection = LoopBound(self, loop: loop)
        DispatchQueue.global().async {
            let resolved = Result { try SocketAddress(host: host, port: port).numericHost }
            connection.execute { connection in
                switch resolved {
                case .success(let ip): connection.open(ip: ip)
                case .failure(let e): connection.drop("\(e)", free: false)
                }
            }
        }
    }

    private func open(ip: String) {
        guard !closed else { state = .waiting; return }
        guard let ac = redisAsyncConnect(ip, Int32(url.port)) else { drop("out of memory", free: false); return }
        if ac.pointee.err != 0 {
            let why = Self.errorString(ac)
            redisAsyncFree(ac)
            drop(why, free: false)
            return
        }
        ac.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        _ = redisLibeventAttach(ac, loop.base)
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
                "redis": .string(url.description), "down_ms": .stringConvertible((EventLoop.nowNanos() &- since) / 1_000_000),
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
                "redis": .string(url.description), "error": .string(why),
            ])
        } else {
            logger.debug("redis still unavailable", metadata: ["redis": .string(url.description), "error": .string(why)])
        }
        guard !closed else { return }
        retry.schedule(afterMs: backoffMs)
        backoffMs = min(backoffMs * 2, Self.maxBackoffMs)
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
        let rc: Int32 = command.bytes.withUnsafeBufferPointer { buffer in
            var argv: [UnsafePointer<CChar>?] = []
            argv.reserveCapacity(command.lengths.count)
            var offset = 0
            let base = UnsafeRawPointer(buffer.baseAddress!)
            for length in command.lengths {
                argv.append((base + offset).assumingMemoryBound(to: CChar.self))
                offset += length
            }
            return redisAsyncCommandArgv(ac, { _, reply, privdata in
                let p = Unmanaged<PendingReply>.fromOpaque(privdata!).takeRetainedValue()
                p.connection.replied()
                p.done(reply.map { RedisReply($0.assumingMemoryBound(to: redisReply.self).pointee) })
            }, pending, Int32(argv.count), &argv, command.lengths)
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
