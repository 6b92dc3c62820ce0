import EventHTTP
import Logging
import TxGateCore

/// Store completions run on the worker loop that asked.
extension EventLoop: CallbackExecutor {}

/// The store on Redis, shared by every TxGate instance that points at the same database.
///
/// Each worker loop has its own connection (`attach(to:)`), and every operation is one
/// server-side step: `SET NX PX`, `GETDEL`, or a Lua script for increment-with-expiry,
/// compare-and-swap and check-then-take. Nothing is read and then written from the gateway,
/// so of concurrent callers across the whole cluster exactly one takes a value or wins a swap.
///
/// Needs Redis >= 6.2 (GETDEL, KEEPTTL), a single primary (not Redis Cluster's sharding).
public final class RedisStore: Store, Sendable {
    public let url: RedisURL
    public let keyPrefix: String
    public let timeoutMs: Int
    /// Replicas that must acknowledge a one-shot step (`WAIT`), and for how long to wait.
    public let waitReplicas: Int
    public let waitTimeoutMs: Int
    private let logger: Logger

    public init(url: RedisURL, keyPrefix: String, timeoutMs: Int, waitReplicas: Int = 0, waitTimeoutMs: Int = 200, logger: Logger) {
        self.url = url
        self.keyPrefix = keyPrefix
        self.timeoutMs = timeoutMs
        self.waitReplicas = waitReplicas
        self.waitTimeoutMs = waitTimeoutMs
        self.logger = logger
    }

    /// Gives `loop` its own connection, which starts connecting once the loop runs. From any
    /// thread: the connection is made on the loop's thread, when the loop runs.
    public func attach(to loop: EventLoop, worker: Int? = nil) {
        var logger = logger
        if let worker { logger[metadataKey: "worker"] = .stringConvertible(worker) }
        let (url, timeoutMs, key) = (url, timeoutMs, ObjectIdentifier(self))
        // Always on the loop's own thread, also before it runs (the work waits for `run()`):
        // deciding by `inEventLoop` here raced with a loop thread just starting.
        loop.execute { [logger] in
            let connection = RedisConnection(loop: loop, url: url, timeoutMs: timeoutMs, logger: logger)
            loop.setLocal(connection, for: key)
            connection.connect()
        }
    }

    /// Closes `loop`'s connection (on its thread); commands still waiting fail as unavailable.
    public func detach(from loop: EventLoop) {
        (loop.setLocal(nil, for: ObjectIdentifier(self)) as? RedisConnection)?.close()
    }

    // MARK: Store

    public func create(_ key: String, value: [UInt8], ttlMs: Int, on executor: CallbackExecutor,
                       _ done: @escaping (StoreResult<Bool>) -> Void) {
        var c = set(key, value, ttlMs: ttlMs)
        c.add("NX")
        run(c, on: executor, oneShot: true, done) { reply in
            switch reply {
            case .status("OK"): return true
            case .null: return false
            default: return nil
            }
        }
    }

    public func put(_ key: String, value: [UInt8], ttlMs: Int, on executor: CallbackExecutor,
                    _ done: @escaping (StoreResult<Void>) -> Void) {
        run(set(key, value, ttlMs: ttlMs), on: executor, done) { reply in reply == .status("OK") ? () : nil }
    }

    public func get(_ key: String, on executor: CallbackExecutor, _ done: @escaping (StoreResult<[UInt8]?>) -> Void) {
        run(command("GET", key), on: executor, done, Self.optionalValue)
    }

    public func touch(_ key: String, ttlMs: Int, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Bool>) -> Void) {
        var c = command("PEXPIRE", key)
        c.add(String(ttlMs))
        run(c, on: executor, done, Self.flag)
    }

    public func delete(_ key: String, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Bool>) -> Void) {
        run(command("DEL", key), on: executor, done, Self.flag)
    }

    public func take(_ key: String, on executor: CallbackExecutor, _ done: @escaping (StoreResult<[UInt8]?>) -> Void) {
        run(command("GETDEL", key), on: executor, oneShot: true, done, Self.optionalValue)
    }

    public func increment(_ key: String, ttlMs: Int, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Int>) -> Void) {
        var c = eval(Self.incrementScript, key)
        c.add(String(ttlMs))
        run(c, on: executor, done) { reply in
            if case .integer(let n) = reply { return n }
            return nil
        }
    }

    public func compareAndSwap(_ key: String, expected: [UInt8], new: [UInt8]?, ttlMs: Int?, on executor: CallbackExecutor,
                               _ done: @escaping (StoreResult<Bool>) -> Void) {
        var c = eval(Self.compareAndSwapScript, key)
        c.add(expected)
        if let new {
            c.add("set")
            c.add(new)
            c.add(ttlMs.map { String($0) } ?? "")
        } else {
            c.add("del")
        }
        run(c, on: executor, done, Self.flag)
    }

    public func takeIf(_ key: String, fields: [String: String], on executor: CallbackExecutor,
                       _ done: @escaping (StoreResult<ConditionalTake>) -> Void) {
        var c = eval(Self.takeIfScript, key)
        for (name, value) in fields {
            c.add(name)
            c.add(value)
        }
        run(c, on: executor, oneShot: true, done) { reply in
            guard case .array(let items) = reply, case .integer(let outcome)? = items.first else { return nil }
            if outcome == 0 { return .absent }
            guard items.count == 2, case .string(let value) = items[1] else { return nil }
            return outcome == 1 ? .taken(value) : .kept(value)
        }
    }

    public func ping(on executor: CallbackExecutor, _ done: @escaping (StoreResult<Void>) -> Void) {
        run(RedisCommand("PING"), on: executor, done) { reply in reply == .status("PONG") ? () : nil }
    }

    /// Wraps `done` so that a success completes only once `waitReplicas` replicas have it.
    /// Fewer in time is a failure: the step happened on the primary, but a failover could
    /// undo it, so the caller fails closed (the user approves again) rather than relying on it.
    private func replicated<T>(on connection: RedisConnection, _ done: @escaping (StoreResult<T>) -> Void) -> (StoreResult<T>) -> Void {
        { [self, connection] result in
            guard case .success = result else { done(result); return }
            var wait = RedisCommand("WAIT")
            wait.add(String(waitReplicas))
            wait.add(String(waitTimeoutMs))
            let sent = connection.send(wait) { [self, connection] reply in
                switch reply {
                case .integer(let acknowledged)? where acknowledged >= waitReplicas:
                    done(result)
                case .integer(let acknowledged)?:
                    done(.failure(.unavailable("only \(acknowledged) of \(waitReplicas) redis replicas acknowledged within \(waitTimeoutMs) ms")))
                case .error(let message)?:
                    done(.failure(.failed("redis refused WAIT: \(message)")))
                default:
                    done(.failure(.unavailable(connection.unavailableReason)))
                }
            }
            if !sent { done(.failure(.unavailable(connection.unavailableReason))) }
        }
    }

    // MARK: scripts

    /// INCR, and the expiry only when the counter was just created: a window that does not slide.
    static let incrementScript = """
        local n = redis.call('INCR', KEYS[1])
        if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
        return n
        """

    /// Compare and swap (or delete) in one step. ARGV: expected, 'set'|'del', new value,
    /// ttl in ms ('' keeps the current expiry).
    static let compareAndSwapScript = """
        if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
        if ARGV[2] == 'del' then
          redis.call('DEL', KEYS[1])
        elseif ARGV[4] == '' then
          redis.call('SET', KEYS[1], ARGV[3], 'KEEPTTL')
        else
          redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])
        end
        return 1
        """

    /// Deletes the value only if it is a JSON object whose members ARGV[1] = ARGV[2], ... hold
    /// exactly those strings (the same rule as `ConditionalTake.matches`).
    /// Returns {0} absent, {1, value} taken, {2, value} kept.
    static let takeIfScript = """
        local v = redis.call('GET', KEYS[1])
        if not v then return {0} end
        local ok, doc = pcall(cjson.decode, v)
        if not ok or type(doc) ~= 'table' then return {2, v} end
        for i = 1, #ARGV, 2 do
          if doc[ARGV[i]] ~= ARGV[i + 1] then return {2, v} end
        end
        redis.call('DEL', KEYS[1])
        return {1, v}
        """

    // MARK: running commands

    /// `NAME <prefixed key>`, for more arguments to be added.
    private func command(_ name: String, _ key: String) -> RedisCommand {
        var c = RedisCommand(name)
        c.add(keyPrefix + key)
        return c
    }

    /// `SET <prefixed key> <value> PX <ttl>`, without `PX` for `StoreExpiry.never`.
    private func set(_ key: String, _ value: [UInt8], ttlMs: Int) -> RedisCommand {
        var c = command("SET", key)
        c.add(value)
        if ttlMs != StoreExpiry.never {
            c.add("PX")
            c.add(String(ttlMs))
        }
        return c
    }

    /// `EVAL <script> 1 <prefixed key>`, for the script's ARGV to be added.
    private func eval(_ script: String, _ key: String) -> RedisCommand {
        var c = RedisCommand("EVAL")
        c.add(script)
        c.add("1")
        c.add(keyPrefix + key)
        return c
    }

    private static func optionalValue(_ reply: RedisReply) -> [UInt8]?? {
        switch reply {
        case .string(let bytes): return .some(bytes)
        case .null: return .some(nil)
        default: return nil
        }
    }

    private static func flag(_ reply: RedisReply) -> Bool? {
        if case .integer(let n) = reply { return n > 0 }
        return nil
    }

    /// Sends `command` on the executor's loop connection and maps the reply; a reply `map`
    /// does not expect is an error. Completions run on the executor's loop: from the reply's
    /// read event, or through `execute` when the command could not be sent. A `oneShot` step
    /// is followed by `WAIT` when replicas must acknowledge it.
    private func run<T>(_ command: RedisCommand, on executor: CallbackExecutor, oneShot: Bool = false,
                        _ done: @escaping (StoreResult<T>) -> Void, _ map: @escaping (RedisReply) -> T?) {
        guard let loop = executor as? EventLoop else {
            executor.execute { done(.failure(.failed("redis store completions must run on an EventLoop"))) }
            return
        }
        guard loop.inEventLoop else {
            loop.execute { [self] in run(command, on: executor, oneShot: oneShot, done, map) }
            return
        }
        guard let connection = loop.local(ObjectIdentifier(self)) as? RedisConnection else {
            loop.execute { done(.failure(.failed("no redis connection for this executor: call attach(to:) for each loop"))) }
            return
        }
        let done = oneShot && waitReplicas > 0 ? replicated(on: connection, done) : done
        let sent = connection.send(command) { [connection] reply in
            switch reply {
            case nil:
                done(.failure(.unavailable(connection.unavailableReason)))
            case .error(let message)?:
                done(.failure(.failed("redis refused \(command.name): \(message)")))
            case let reply?:
                if let value = map(reply) {
                    done(.success(value))
                } else {
                    done(.failure(.failed("unexpected redis reply to \(command.name): \(reply.kind)")))
                }
            }
        }
        if !sent {
            let reason = connection.unavailableReason
            loop.execute { done(.failure(.unavailable(reason))) }
        }
    }
}
