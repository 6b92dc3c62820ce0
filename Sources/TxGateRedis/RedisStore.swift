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
/// Keys of the `fenced` classes (transactions, one-time markers, ...) carry the epoch they were
/// written in and are only touched by scripts that refuse an older epoch: see `RedisFence` for
/// why (a Redis restored behind what the gateway saw) and how. Each connection checks the fence
/// and the `maxmemory-policy` before it serves (`RedisEviction`).
///
/// Needs Redis >= 6.2 (GETDEL, KEEPTTL), a single primary (not Redis Cluster's sharding):
/// named in the URL, or found through Redis Sentinel (`redis+sentinel://`, see `RedisConnection`).
public final class RedisStore: Store, Sendable {
    public let url: RedisURL
    public let keyPrefix: String
    public let timeoutMs: Int
    /// Replicas that must acknowledge a one-shot step (`WAIT`), and for how long to wait.
    public let waitReplicas: Int
    public let waitTimeoutMs: Int
    /// The key classes whose older epochs are refused.
    public let fenced: FencedKeys
    private let fence: RedisFence
    private let eviction: EvictionWatch
    private let logger: Logger

    /// `onEvictionPolicy` gets, after every (re)connect, whether the server's maxmemory-policy
    /// is `noeviction` (for a gauge).
    public init(url: RedisURL, keyPrefix: String, timeoutMs: Int, waitReplicas: Int = 0, waitTimeoutMs: Int = 200,
                fenced: FencedKeys = .oneShot, allowEviction: Bool = false,
                onEvictionPolicy: (@Sendable (Bool) -> Void)? = nil, logger: Logger) {
        self.url = url
        self.keyPrefix = keyPrefix
        auditKey = keyPrefix + "audit"
        self.timeoutMs = timeoutMs
        self.waitReplicas = waitReplicas
        self.waitTimeoutMs = waitTimeoutMs
        self.fenced = fenced
        fence = RedisFence(keyPrefix: keyPrefix)
        eviction = EvictionWatch(allowed: allowEviction, onPolicy: onEvictionPolicy)
        self.logger = logger
    }

    /// The highest fence epoch a connection of this store has seen (0 before the first connect).
    public var epoch: Int { fence.lastSeenEpoch }

    /// What every new connection does before it serves: move the fence on if the server is not
    /// the one recorded, then read the eviction policy (a warning, not a refusal, once running:
    /// the start-up check is `checkEvictionPolicyAtStart`).
    private func handshake(_ connection: RedisConnection, logger: Logger, _ done: @escaping (String?) -> Void) {
        fence.check(connection, logger: logger) { [eviction] r in
            if case .failure(let e) = r { done(e.description); return }
            EvictionWatch.read(connection) { policy in
                eviction.observed(policy, redis: connection.urlDescription, logger: logger)
                done(nil)
            }
        }
    }

    /// Gives `loop` its own connection, which starts connecting once the loop runs. From any
    /// thread: the connection is made on the loop's thread, when the loop runs.
    public func attach(to loop: EventLoop, worker: Int? = nil) {
        var logger = logger
        if let worker { logger[metadataKey: "worker"] = .stringConvertible(worker) }
        let (url, timeoutMs, key) = (url, timeoutMs, ObjectIdentifier(self))
        let handshake: (RedisConnection, @escaping (String?) -> Void) -> Void = { [self, logger] connection, done in
            self.handshake(connection, logger: logger, done)
        }
        // Always on the loop's own thread, also before it runs (the work waits for `run()`):
        // deciding by `inEventLoop` here raced with a loop thread just starting.
        loop.execute { [logger] in
            let connection = RedisConnection(loop: loop, url: url, timeoutMs: timeoutMs, logger: logger)
            connection.handshake = handshake
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
        if let kind = fenced.kind(of: key) {
            var c = fencedEval(RedisFence.create, key, room: value.count)
            c.add(value)
            c.add(ttlMs == StoreExpiry.never ? "0" : String(ttlMs))
            c.add(kind == .marker ? "1" : "0")
            c.add(String(fenced.quarantine(of: key, ttlMs: ttlMs)))
            run(c, on: executor, oneShot: true, writes: true, done, Self.flag)
            return
        }
        var c = set(key, value, ttlMs: ttlMs)
        c.add("NX")
        run(c, on: executor, oneShot: true, writes: true, done) { reply in
            switch reply {
            case .status("OK"): return true
            case .null: return false
            default: return nil
            }
        }
    }

    /// One script (`writeAllBody`): every condition read, then every write and the move.
    public func writeAll(_ writes: [ConditionalWrite], moving counter: CounterMove, on executor: CallbackExecutor,
                         _ done: @escaping (StoreResult<WriteOutcome>) -> Void) {
        let keys = writes.map(\.key)
        let kinds = keys.map(fenced.kind(of:))
        if let refused = refusal(of: counter) ?? refusal(of: writes, kinds: kinds) {
            executor.execute { done(.failure(refused)) }
            return
        }
        let anyFenced = kinds.contains { $0 != nil }
        let room = writes.reduce(0) { room, write in
            switch write {
            case .create(_, let value, _): room + value.count
            case .swap(_, let expected, let new, _): room + expected.count + new.count
            }
        }
        var c = anyFenced ? fencedEval(RedisFence.writeAll, counter.key, more: keys, room: room)
            : eval(Self.writeAllScript, counter.key, more: keys, room: room)
        for (write, kind) in zip(writes, kinds) {
            let ttlMs: Int?
            switch write {
            case .create(_, let value, let ttl):
                c.add("c")
                c.add(kind != nil ? "1" : "0")
                c.add("")
                c.add(value)
                ttlMs = ttl
            case .swap(_, let expected, let new, let ttl):
                c.add("s")
                c.add(kind != nil ? "1" : "0")
                c.add(expected)
                c.add(new)
                ttlMs = ttl
            }
            c.add(ttlMs.map { $0 == StoreExpiry.never ? "0" : String($0) } ?? "")
        }
        addMove(counter, to: &c)
        run(c, on: executor, oneShot: true, writes: true, done) { reply in
            switch reply {
            case .integer(let count) where count >= 0:
                return .written(count: count)
            case .array(let items):
                guard case .integer(let i)? = items.first, writes.indices.contains(i - 1) else { return nil }
                switch items.dropFirst().first {
                case nil: return .refused(key: writes[i - 1].key, found: nil)
                case .string(let found)?: return .refused(key: writes[i - 1].key, found: found)
                default: return nil
                }
            default:
                return nil
            }
        }
    }

    public func put(_ key: String, value: [UInt8], ttlMs: Int, on executor: CallbackExecutor,
                    _ done: @escaping (StoreResult<Void>) -> Void) {
        if fenced.kind(of: key) != nil {
            var c = fencedEval(RedisFence.put, key, room: value.count)
            c.add(value)
            c.add(String(ttlMs))
            run(c, on: executor, writes: true, done) { reply in reply == .integer(1) ? () : nil }
            return
        }
        run(set(key, value, ttlMs: ttlMs), on: executor, writes: true, done) { reply in reply == .status("OK") ? () : nil }
    }

    public func get(_ key: String, on executor: CallbackExecutor, _ done: @escaping (StoreResult<[UInt8]?>) -> Void) {
        if fenced.kind(of: key) != nil {
            run(fencedEval(RedisFence.get, key), on: executor, done, Self.optionalValue)
            return
        }
        run(command("GET", key), on: executor, done, Self.optionalValue)
    }

    public func touch(_ key: String, ttlMs: Int, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Bool>) -> Void) {
        var c = fenced.kind(of: key) != nil ? fencedEval(RedisFence.touch, key) : command("PEXPIRE", key)
        c.add(String(ttlMs))
        run(c, on: executor, writes: true, done, Self.flag)
    }

    public func delete(_ key: String, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Bool>) -> Void) {
        let c = fenced.kind(of: key) != nil ? fencedEval(RedisFence.delete, key) : command("DEL", key)
        run(c, on: executor, writes: true, done, Self.flag)
    }

    public func take(_ key: String, on executor: CallbackExecutor, _ done: @escaping (StoreResult<[UInt8]?>) -> Void) {
        let c = fenced.kind(of: key) != nil ? fencedEval(RedisFence.take, key) : command("GETDEL", key)
        run(c, on: executor, oneShot: true, writes: true, done, Self.optionalValue)
    }

    public func increment(_ key: String, ttlMs: Int, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Int>) -> Void) {
        if let refused = refusal(of: .up(key, ttlMs: ttlMs)) {
            executor.execute { done(.failure(refused)) }
            return
        }
        var c = eval(Self.incrementScript, key)
        c.add(String(ttlMs))
        run(c, on: executor, writes: true, done) { reply in
            if case .integer(let n) = reply { return n }
            return nil
        }
    }

    /// One script instead of a read and a compare-and-swap; a fenced key (which holds records,
    /// not counters) takes the generic way.
    public func decrement(_ key: String, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Bool>) -> Void) {
        guard fenced.kind(of: key) == nil else {
            decrementByCompareAndSwap(key, on: executor, attempts: 5, done)
            return
        }
        run(eval(Self.decrementScript, key), on: executor, writes: true, done, Self.flag)
    }

    /// One script instead of a read and a create or compare-and-swap (a user's last TOTP step,
    /// at every one-time code).
    public func raise(_ key: String, to value: UInt64, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Bool>) -> Void) {
        raise(key, to: value, unlessPresent: [], on: executor) { r in done(r.map { $0 == .raised }) }
    }

    /// One script: the guards checked (`EXISTS`), then the raise (no guard: the same script).
    public func raise(_ key: String, to value: UInt64, unlessPresent guards: [String], on executor: CallbackExecutor,
                      _ done: @escaping (StoreResult<GuardedRaise>) -> Void) {
        if let fencedGuard = guards.first(where: { fenced.kind(of: $0) != nil }) {
            let refused = StoreError.failed("raise '\(key)' unless '\(fencedGuard.prefix { $0 != ":" })' keys: that key class is fenced and holds records, not guards")
            executor.execute { done(.failure(refused)) }
            return
        }
        let kind = fenced.kind(of: key)
        var c = kind != nil ? fencedEval(RedisFence.raise, key, more: guards) : eval(Self.raiseScript, key, more: guards)
        c.add(String(value))
        c.add(kind == .marker ? "1" : "0")
        c.add(String(fenced.quarantine(of: key, ttlMs: StoreExpiry.never)))
        run(c, on: executor, oneShot: true, writes: true, { (r: StoreResult<Int>) in
            switch r {
            case .success(-1): done(.failure(.failed("raise '\(key)': the value kept there is not a number")))
            case .success(-2): done(.success(.blocked))
            case .success(let n): done(.success(n == 1 ? .raised : .notHigher))
            case .failure(let e): done(.failure(e))
            }
        }) { reply in
            if case .integer(let n) = reply, (-2...1).contains(n) { return n }
            return nil
        }
    }

    public func compareAndSwap(_ key: String, expected: [UInt8], new: [UInt8]?, ttlMs: Int?, audit: AuditAppend?,
                               on executor: CallbackExecutor, _ done: @escaping (StoreResult<Bool>) -> Void) {
        let c = swapCommand(key, expected: expected, new: new, ttlMs: ttlMs, audit: audit, moving: nil)
        run(c, on: executor, writes: true, done, Self.flag)
    }

    /// One script: the swap, its audit entry and the counter's move (`movesCounter`).
    public func compareAndSwap(_ key: String, expected: [UInt8], new: [UInt8]?, ttlMs: Int?, audit: AuditAppend?,
                               moving counter: CounterMove, on executor: CallbackExecutor,
                               _ done: @escaping (StoreResult<Int?>) -> Void) {
        if let refused = refusal(of: counter) {
            executor.execute { done(.failure(refused)) }
            return
        }
        let c = swapCommand(key, expected: expected, new: new, ttlMs: ttlMs, audit: audit, moving: counter)
        run(c, on: executor, writes: true, done, Self.moved)
    }

    /// A compare-and-swap's script (fenced or not, moving `counter` or not) with its keys and
    /// ARGV: the audit (`addAudit`), expected, then 'set', the new value and its ttl ms ('' keeps
    /// the expiry), or 'del'; then the counter's move (`addMove`).
    private func swapCommand(_ key: String, expected: [UInt8], new: [UInt8]?, ttlMs: Int?, audit: AuditAppend?,
                             moving counter: CounterMove?) -> RedisCommand {
        let room = expected.count + (new?.count ?? 0) + audit.byteCount
        let more = counter.map { [$0.key] } ?? []
        var c = switch (fenced.kind(of: key) != nil, counter != nil) {
        case (true, false): fencedEval(RedisFence.compareAndSwap, key, audited: true, room: room)
        case (true, true): fencedEval(RedisFence.compareAndSwapMoving, key, more: more, audited: true, room: room)
        case (false, false): eval(Self.compareAndSwapScript, key, audited: true, room: room)
        case (false, true): eval(Self.compareAndSwapMovingScript, key, more: more, audited: true, room: room)
        }
        addAudit(audit, to: &c)
        c.add(expected)
        if let new {
            c.add("set")
            c.add(new)
            c.add(ttlMs.map { String($0) } ?? "")
        } else {
            c.add("del")
        }
        if let counter { addMove(counter, to: &c) }
        return c
    }

    /// The last two ARGV of a script that moves a counter (`movesCounter`).
    private func addMove(_ counter: CounterMove, to c: inout RedisCommand) {
        switch counter {
        case .up(_, let ttlMs):
            c.add("+")
            c.add(String(ttlMs))
        case .down:
            c.add("-")
            c.add("0")
        }
    }

    /// Why `writes` (their keys' classes `kinds`) cannot be sent, if they cannot: the shared
    /// checks (`ConditionalWrite.problem`), and no one-time marker among them (their claims need
    /// the quarantine `create` and `raise` apply).
    private func refusal(of writes: [ConditionalWrite], kinds: [FencedKeys.Kind?]) -> StoreError? {
        if let problem = ConditionalWrite.problem(in: writes) { return .failed(problem) }
        if let marker = kinds.firstIndex(of: .marker) {
            return .failed("writeAll '\(writes[marker].key.prefix { $0 != ":" })' keys: one-time markers are written by create or raise, alone")
        }
        return nil
    }

    /// Why `counter` cannot be moved, if it cannot: a counter's digits would be read as a fenced
    /// key's epoch stamp (fenced classes hold records), and a counter `up` starts needs a time to live.
    private func refusal(of counter: CounterMove) -> StoreError? {
        let key = counter.key
        if fenced.kind(of: key) != nil {
            return .failed("counter '\(key.prefix { $0 != ":" })' keys: that key class is fenced and holds records, not counters")
        }
        if case .up(_, let ttlMs) = counter, ttlMs <= 0 {
            return .failed("counter '\(key.prefix { $0 != ":" })': ttlMs must be more than 0, got \(ttlMs)")
        }
        return nil
    }

    public func takeIf(_ key: String, fields: [String: String], audit: AuditAppend?, on executor: CallbackExecutor,
                       _ done: @escaping (StoreResult<ConditionalTake>) -> Void) {
        let room = audit.byteCount
        var c = fenced.kind(of: key) != nil ? fencedEval(RedisFence.takeIf, key, audited: true, room: room)
            : eval(Self.takeIfScript, key, audited: true, room: room)
        addAudit(audit, to: &c)
        for (name, value) in fields {
            c.add(name)
            c.add(value)
        }
        run(c, on: executor, oneShot: true, writes: true, done) { reply in
            guard case .array(let items) = reply, case .integer(let outcome)? = items.first else { return nil }
            if outcome == 0 { return .absent }
            guard items.count == 2, case .string(let value) = items[1] else { return nil }
            return outcome == 1 ? .taken(value) : .kept(value)
        }
    }

    public func appendAudit(_ entry: [UInt8], foundKey: String?, retentionMs: Int, on executor: CallbackExecutor,
                            _ done: @escaping (StoreResult<Void>) -> Void) {
        // The found key is read as the fenced scripts read it: a value of an older epoch is none.
        var c = fencedEval(RedisFence.appendAudit, foundKey ?? "audit:none", audited: true, room: entry.count)
        addAudit(AuditAppend(ifChanged: entry, retentionMs: retentionMs), to: &c)
        run(c, on: executor, oneShot: true, writes: true, done) { reply in reply == .integer(1) ? () : nil }
    }

    /// The audit trail's stream: `<keyPrefix>audit`.
    public let auditKey: String

    /// ARGV[1] the entry if changed, ARGV[2] if unchanged ('' for none), ARGV[3] the retention ms.
    private func addAudit(_ audit: AuditAppend?, to c: inout RedisCommand) {
        c.add(audit?.ifChanged ?? [])
        c.add(audit?.ifUnchanged ?? [])
        c.add(String(audit?.retentionMs ?? 0))
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

    /// Lua: `up(counter, ttl)` adds 1 and gives the new value, the expiry (ttl ms) set only when
    /// the counter was just created: a window that does not slide. `down(counter)` lowers it by
    /// one, keeping its expiry, and gives the new value, or nil (nothing lowered) if it is
    /// absent, at 0 or not a number.
    static let counters = """
        local function up(counter, ttl)
          local n = redis.call('INCR', counter)
          if n == 1 then redis.call('PEXPIRE', counter, ttl) end
          return n
        end
        local function down(counter)
          local v = redis.call('GET', counter)
          if not v or not string.match(v, '^%d+$') then return nil end
          local n = tonumber(v)
          if n <= 0 then return nil end
          redis.call('SET', counter, string.format('%d', n - 1), 'KEEPTTL')
          return n - 1
        end

        """

    /// `Store.increment` in one step. ARGV[1] the ttl ms of a new counter.
    static let incrementScript = RedisScript(counters + "return up(KEYS[1], ARGV[1])")

    /// `Store.decrement` in one step: 1 lowered, 0 not.
    static let decrementScript = RedisScript(counters + "if down(KEYS[1]) then return 1 end\nreturn 0")

    /// `Store.raise` in one step. ARGV[1] the value (decimal digits, no leading zero). Returns
    /// 1 raised, 0 already as high, -1 the value kept is not a number (left as it is).
    static let raiseScript = RedisScript(unfenced + raiseBody(quarantine: "", firstGuard: 2))

    /// `current` and `stamped` of a key no fence guards: the value as it is.
    static let unfenced = """
        local function current(raw) return raw end
        local function stamped(v) return v end

        """

    /// For a write that moves no counter: `made()` gives 1, and the write not made answers 0.
    static let movesNothing = """
        local notMade = 0
        local function made() return 1 end

        """

    /// For a write that moves a counter (`CounterMove`) when it is made: `made()` moves the
    /// counter at `key` (a Lua expression) and gives its value after the move; the write not
    /// made answers -1. The move's arguments are the script's last two: '+' or '-', and the
    /// time to live in ms of a counter '+' starts. A write calls `made()` before it writes
    /// anything, so that a move Redis refuses (INCR of something other than a number) leaves
    /// nothing written: a script that fails keeps what it wrote before the failure.
    static func movesCounter(key: String) -> String {
        counters + """
        local notMade = -1
        local function made()
          if ARGV[#ARGV - 1] == '+' then return up(\(key), ARGV[#ARGV]) end
          return down(\(key)) or 0
        end

        """
    }

    /// `Store.writeAll` of keys no fence guards: KEYS[1] the counter, the written keys from KEYS[2].
    static let writeAllScript = RedisScript(unfenced + movesCounter(key: "KEYS[1]") + writeAllBody(firstKey: 2))

    /// The body of a `Store.writeAll`, shared with the fenced one (`RedisFence.writeAll`): the
    /// written keys from KEYS[firstKey] on; ARGV five per write (`c` create or `s` swap; `1` if
    /// its key is fenced; the value expected, '' for a create; the value to write; its ttl ms,
    /// '' keeping the expiry, '0' never expiring), then the counter's move (`movesCounter`).
    /// Every condition is read before anything is written, and the move (which Redis may
    /// refuse) comes before the writes. Returns the counter's value after the move, or, for
    /// the first write whose condition failed, {its index, the value found (none if absent)}.
    static func writeAllBody(firstKey: Int) -> String {
        """
        local writes = (#ARGV - 2) / 5
        local function arg(i, j) return ARGV[(i - 1) * 5 + j] end
        for i = 1, writes do
          local v = redis.call('GET', KEYS[\(firstKey - 1) + i])
          if arg(i, 2) == '1' then v = current(v) end
          local holds
          if arg(i, 1) == 'c' then holds = not v else holds = v == arg(i, 3) end
          if not holds then
            if v then return {i, v} end
            return {i}
          end
        end
        local answer = made()
        for i = 1, writes do
          local key, value, ttl = KEYS[\(firstKey - 1) + i], arg(i, 4), arg(i, 5)
          if arg(i, 2) == '1' then value = stamped(value) end
          if ttl == '' then
            redis.call('SET', key, value, 'KEEPTTL')
          elseif ttl == '0' then
            redis.call('SET', key, value)
          else
            redis.call('SET', key, value, 'PX', ttl)
          end
        end
        return answer
        """
    }

    /// The body of a raise, shared with the fenced one (`RedisFence.raise`); `quarantine` runs
    /// before a first value is written. Numbers are compared as digit strings (a Lua number
    /// has 53 bits; these have 64). The keys from KEYS[firstGuard] on are guards
    /// (`Store.raise(unlessPresent:)`): any of them there, nothing is raised and the answer is -2.
    static func raiseBody(quarantine: String, firstGuard: Int) -> String {
        """
        for i = \(firstGuard), #KEYS do
          if redis.call('EXISTS', KEYS[i]) == 1 then return -2 end
        end
        local v = current(redis.call('GET', KEYS[1]))
        if v then
          if not string.match(v, '^%d+$') then return -1 end
          v = string.gsub(v, '^0+(%d)', '%1')
          if #ARGV[1] < #v or (#ARGV[1] == #v and ARGV[1] <= v) then return 0 end
          redis.call('SET', KEYS[1], stamped(ARGV[1]), 'KEEPTTL')
          return 1
        end
        """ + "\n" + quarantine + "\n" + """
        redis.call('SET', KEYS[1], stamped(ARGV[1]))
        return 1
        """
    }

    /// The audit trail inside a script (issue 22 item 7): `audit(entry, found)` adds the entry
    /// to the stream KEYS[#KEYS] in the same script as the change it records, so that the two
    /// cannot disagree, and trims records older than the retention (ARGV[3] ms, by Redis's
    /// clock; exact, so that the retention is what the configuration says: the first entry's ID
    /// is compared on every add, and only expired entries are ever removed).
    /// An empty entry writes nothing.
    static let auditPrelude = """
        local function audit(entry, found)
          if entry == '' then return end
          local t = redis.call('TIME')
          local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
          local minid = string.format('%d', math.max(0, now - tonumber(ARGV[3])))
          if found then
            redis.call('XADD', KEYS[#KEYS], 'MINID', minid, '*', 'e', entry, 'f', found)
          else
            redis.call('XADD', KEYS[#KEYS], 'MINID', minid, '*', 'e', entry)
          end
        end

        """

    /// Compare and swap (or delete) in one step. ARGV[1..3] the audit (`auditPrelude`), then:
    /// expected, 'set'|'del', new value, ttl in ms ('' keeps the current expiry).
    static let compareAndSwapScript = RedisScript(auditPrelude + unfenced + movesNothing + compareAndSwapBody)

    /// `compareAndSwapScript` with a counter moved (`movesCounter`): KEYS[2] the counter (the
    /// audit stream last), and the move's two arguments last.
    static let compareAndSwapMovingScript = RedisScript(auditPrelude + unfenced + movesCounter(key: "KEYS[2]") + compareAndSwapBody)

    /// The body of a compareAndSwap, shared with the fenced one (`RedisFence.compareAndSwap`):
    /// `current(raw)` reads a stored value and `stamped(v)` makes one to store (the identity
    /// here; the fence's epoch check and stamp there). `made()` (`movesNothing`,
    /// `movesCounter`) runs once the swap is known to be made, before anything is written.
    static let compareAndSwapBody = """
        if current(redis.call('GET', KEYS[1])) ~= ARGV[4] then
          audit(ARGV[2], nil)
          return notMade
        end
        local answer = made()
        if ARGV[5] == 'del' then
          redis.call('DEL', KEYS[1])
        elseif ARGV[7] == '' then
          redis.call('SET', KEYS[1], stamped(ARGV[6]), 'KEEPTTL')
        else
          redis.call('SET', KEYS[1], stamped(ARGV[6]), 'PX', ARGV[7])
        end
        audit(ARGV[1], nil)
        return answer
        """

    /// Deletes the value only if it is a JSON object whose members ARGV[4] = ARGV[5], ... hold
    /// exactly those strings (the same rule as `ConditionalTake.matches`); ARGV[1..3] the
    /// audit (`auditPrelude`), written with the value found.
    /// Returns {0} absent, {1, value} taken, {2, value} kept.
    static let takeIfScript = RedisScript(
        auditPrelude + """
        local v = redis.call('GET', KEYS[1])
        if not v then
          audit(ARGV[2], nil)
          return {0}
        end
        """ + "\n" + takeIfPresent
    )

    /// The end of a takeIf, shared with the fenced one (`RedisFence.takeIf`), once the value
    /// `v` is known to be there: kept unless it matches, else deleted; audited either way.
    static let takeIfPresent = """
        local ok, doc = pcall(cjson.decode, v)
        if not ok or type(doc) ~= 'table' then
          audit(ARGV[2], v)
          return {2, v}
        end
        for i = 4, #ARGV, 2 do
          if doc[ARGV[i]] ~= ARGV[i + 1] then
            audit(ARGV[2], v)
            return {2, v}
          end
        end
        redis.call('DEL', KEYS[1])
        audit(ARGV[1], v)
        return {1, v}
        """

    // MARK: running commands

    /// What an error reply means for the caller, and for the connection.
    private func refused(_ command: RedisCommand, _ message: String, on connection: RedisConnection) -> StoreError {
        if message.hasPrefix("TXGATEFENCE") {
            // The fence record is gone (FLUSHALL, eviction): reconnecting fences the store again.
            connection.reconnect(because: "the store's fence record \(fence.key) is missing; fencing again")
            return .unavailable("redis \(url) lost the store's fence record (flushed or evicted); fencing again before serving")
        }
        if message.hasPrefix("READONLY") {
            // The server was demoted (a failover, or a replica behind a name that moved): the
            // write happened nowhere. Reconnecting asks the sentinels (or DNS) for the primary.
            let why = "\(connection.urlDescription) is a replica now (READONLY); reconnecting to the primary"
            connection.reconnect(because: why)
            return .unavailable("redis \(why)")
        }
        if message.hasPrefix("TXGATEQUARANTINE") {
            let ms = Int(message.split(separator: " ").last ?? "") ?? 0
            return .unavailable("redis \(url) was restarted, restored or failed over moments ago: a one-time code used just "
                + "before may have been forgotten with it, so one-time codes are refused for \(ms) ms more, until every code that "
                + "could have been used before has expired")
        }
        if message.hasPrefix("OOM") {
            eviction.refusedForMemory(command.name, message: message, redis: url.description, logger: logger)
            return .unavailable("redis \(url) is out of memory and refuses writes: \(command.name): \(message)")
        }
        return .failed("redis refused \(command.name): \(message)")
    }

    /// `NAME <prefixed key>`, for more arguments to be added.
    private func command(_ name: String, _ key: String, room: Int = 0) -> RedisCommand {
        var c = RedisCommand(name, room: room)
        c.add(keyPrefix, key)
        return c
    }

    /// `SET <prefixed key> <value> PX <ttl>`, without `PX` for `StoreExpiry.never`.
    private func set(_ key: String, _ value: [UInt8], ttlMs: Int) -> RedisCommand {
        var c = command("SET", key, room: value.count)
        c.add(value)
        if ttlMs != StoreExpiry.never {
            c.add("PX")
            c.add(String(ttlMs))
        }
        return c
    }

    /// `EVALSHA <script> <numkeys> <prefixed key>`, for the script's ARGV to be added; `more`
    /// (a counter the script moves, the keys that block it) are the next keys, and `audited`
    /// adds the audit stream as the last.
    private func eval(_ script: RedisScript, _ key: String, more: [String] = [], audited: Bool = false,
                      room: Int = 0) -> RedisCommand {
        var c = RedisCommand(script, room: room)
        c.add(Self.keyCount(1 + more.count + (audited ? 1 : 0)))
        c.add(keyPrefix, key)
        for k in more { c.add(keyPrefix, k) }
        if audited { c.add(auditKey) }
        return c
    }

    /// `EVALSHA <script> <numkeys> <prefixed key> <fence record>`: a fenced operation reads the
    /// epoch itself. Then `more` and the audit stream, as `eval` adds them.
    private func fencedEval(_ script: RedisScript, _ key: String, more: [String] = [], audited: Bool = false,
                            room: Int = 0) -> RedisCommand {
        var c = RedisCommand(script, room: room)
        c.add(Self.keyCount(2 + more.count + (audited ? 1 : 0)))
        c.add(keyPrefix, key)
        c.add(fence.key)
        for k in more { c.add(keyPrefix, k) }
        if audited { c.add(auditKey) }
        return c
    }

    /// `numkeys` of an EVALSHA: a literal for the usual counts, no number formatted per command.
    private static func keyCount(_ n: Int) -> String { n < keyCounts.count ? keyCounts[n] : String(n) }
    private static let keyCounts = ["0", "1", "2", "3", "4", "5"]

    /// The answer of a script that moves a counter (`movesCounter`): -1 not made (nil), else the
    /// counter's value after the move.
    private static func moved(_ reply: RedisReply) -> Int?? {
        guard case .integer(let n) = reply else { return nil }
        return .some(n < 0 ? nil : n)
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
    /// is followed by `WAIT` when replicas must acknowledge it. A command that `writes` ends an
    /// out-of-memory episode when it succeeds.
    private func run<T>(_ command: RedisCommand, on executor: CallbackExecutor, oneShot: Bool = false, writes: Bool = false,
                        _ done: @escaping (StoreResult<T>) -> Void, _ map: @escaping (RedisReply) -> T?) {
        guard let loop = executor as? EventLoop else {
            executor.execute { done(.failure(.failed("redis store completions must run on an EventLoop"))) }
            return
        }
        guard loop.inEventLoop else {
            loop.execute { [self] in run(command, on: executor, oneShot: oneShot, writes: writes, done, map) }
            return
        }
        guard let connection = loop.local(ObjectIdentifier(self)) as? RedisConnection else {
            loop.execute { done(.failure(.failed("no redis connection for this executor: call attach(to:) for each loop"))) }
            return
        }
        let done = oneShot && waitReplicas > 0 ? replicated(on: connection, done) : done
        let sent = connection.send(command) { [self, connection] reply in
            switch reply {
            case nil:
                done(.failure(.unavailable(connection.unavailableReason)))
            case .error(let message)? where message.hasPrefix("NOSCRIPT"):
                // The server does not have the script (restarted, flushed, another primary):
                // it ran nothing, so the same operation is sent with the script's text.
                guard let whole = command.withScriptText() else {
                    done(.failure(refused(command, message, on: connection)))
                    return
                }
                loop.execute { [self] in run(whole, on: executor, oneShot: false, writes: writes, done, map) }
            case .error(let message)?:
                done(.failure(refused(command, message, on: connection)))
            case let reply?:
                if writes { eviction.wroteSuccessfully(redis: url.description, logger: logger) }
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

/// Why `txgate serve` must not start on this Redis.
public struct RedisStartError: Error, CustomStringConvertible, Sendable {
    public let description: String
}

extension RedisStore {
    /// At start, before any worker runs: refuses a Redis whose `maxmemory-policy` may evict
    /// keys, unless `allowEviction`. One blocking connection (hiredis's synchronous API, off
    /// every loop). A Redis that cannot be reached now is not an error (the gateway fails closed
    /// until it can, and each connection checks the policy when it gets there): the answer is
    /// then a warning to log.
    public func checkEvictionPolicyAtStart() throws(RedisStartError) -> String? {
        let policy: String?
        do {
            policy = try BlockingRedis.evictionPolicy(url, timeoutMs: timeoutMs)
        } catch {
            return "redis \(url) not reachable at start (\(error)); its maxmemory-policy is checked when it is"
        }
        guard let policy else {
            return "redis \(url) does not say its maxmemory-policy (CONFIG GET and INFO memory refused): eviction cannot be ruled out"
        }
        if EvictionWatch.isSafe(policy) { return nil }
        let problem = EvictionWatch.problem(policy, redis: "redis \(url)")
        if eviction.allowed { return "store.allowEviction is set: \(problem)" }
        throw RedisStartError(description: "store.url: \(problem)")
    }
}

private extension Optional where Wrapped == AuditAppend {
    /// The bytes of the entries `addAudit` writes, to size a command for them.
    var byteCount: Int { (self?.ifChanged?.count ?? 0) + (self?.ifUnchanged?.count ?? 0) }
}
