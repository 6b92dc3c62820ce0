/// Runs a completion on the thread that asked (a worker's event loop), so that store
/// results arrive where the request lives.
public protocol CallbackExecutor: AnyObject, Sendable {
    func execute(_ work: @escaping () -> Void)
}

public enum StoreError: Error, Equatable, CustomStringConvertible, Sendable {
    /// The store cannot be reached (disk, Redis down). Requests that need state fail closed.
    case unavailable(String)
    case failed(String)

    public var description: String {
        switch self {
        case .unavailable(let s): return "store unavailable: \(s)"
        case .failed(let s): return "store error: \(s)"
        }
    }
}

public typealias StoreResult<T> = Result<T, StoreError>

extension Store {
    /// `decrement` for a store without a step of its own for it: a compare-and-swap over what
    /// was read, retried if another caller changed the counter in between.
    public func decrement(_ key: String, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Bool>) -> Void) {
        decrementByCompareAndSwap(key, on: executor, attempts: 5, done)
    }

    /// `raise` for a store without a step of its own for it (see `raiseByCompareAndSwap`).
    public func raise(_ key: String, to value: UInt64, on executor: CallbackExecutor,
                      _ done: @escaping (StoreResult<Bool>) -> Void) {
        raiseByCompareAndSwap(key, to: value, on: executor, attempts: 5, done)
    }

    /// `decrement` built from `get` and `compareAndSwap`.
    public func decrementByCompareAndSwap(_ key: String, on executor: CallbackExecutor, attempts: Int,
                                          _ done: @escaping (StoreResult<Bool>) -> Void) {
        get(key, on: executor) { [self] r in
            switch r {
            case .failure(let e): done(.failure(e))
            case .success(nil): done(.success(false))
            case .success(let bytes?):
                guard let n = Int(String(decoding: bytes, as: UTF8.self)), n > 0 else { done(.success(false)); return }
                compareAndSwap(key, expected: bytes, new: Array(String(n - 1).utf8), ttlMs: nil, on: executor) { [self] r in
                    switch r {
                    case .success(false) where attempts > 1: decrementByCompareAndSwap(key, on: executor, attempts: attempts - 1, done)
                    default: done(r)
                    }
                }
            }
        }
    }
}

/// Expiries a store understands beyond a number of milliseconds.
public enum StoreExpiry {
    /// A time to live meaning "never expires", accepted by `create` and `put`: for records that
    /// no purge and no clock step may undo (a user's last accepted TOTP time step). Only a
    /// `delete` removes such a key.
    public static let never = Int.max
}

extension Store {
    /// `raise` built from `create` and `compareAndSwap` over what was read, so that of concurrent
    /// callers raising to the same value exactly one sees true (the loser's swap fails, it reads
    /// again and finds the winner's value); retried while other callers keep changing the key.
    public func raiseByCompareAndSwap(_ key: String, to value: UInt64, on executor: CallbackExecutor, attempts: Int,
                                      _ done: @escaping (StoreResult<Bool>) -> Void) {
        let new = Array(String(value).utf8)
        let retry: (StoreResult<Bool>) -> Void = { [self] r in
            switch r {
            case .success(false) where attempts > 1: raiseByCompareAndSwap(key, to: value, on: executor, attempts: attempts - 1, done)
            case .success(false): done(.failure(.failed("raise '\(key)': other callers kept changing the value; nothing was raised")))
            default: done(r)
            }
        }
        get(key, on: executor) { [self] r in
            switch r {
            case .failure(let e): done(.failure(e))
            case .success(nil):
                create(key, value: new, ttlMs: StoreExpiry.never, on: executor, retry)
            case .success(let bytes?):
                guard let kept = UInt64(String(decoding: bytes, as: UTF8.self)) else {
                    done(.failure(.failed("raise '\(key)': the value kept there is not a number")))
                    return
                }
                guard kept < value else { done(.success(false)); return }
                compareAndSwap(key, expected: bytes, new: new, ttlMs: nil, on: executor, retry)
            }
        }
    }
}

extension Store {
    /// `compareAndSwap` with no audit record.
    public func compareAndSwap(_ key: String, expected: [UInt8], new: [UInt8]?, ttlMs: Int?, on executor: CallbackExecutor,
                               _ done: @escaping (StoreResult<Bool>) -> Void) {
        compareAndSwap(key, expected: expected, new: new, ttlMs: ttlMs, audit: nil, on: executor, done)
    }

    /// `takeIf` with no audit record.
    public func takeIf(_ key: String, fields: [String: String], on executor: CallbackExecutor,
                       _ done: @escaping (StoreResult<ConditionalTake>) -> Void) {
        takeIf(key, fields: fields, audit: nil, on: executor, done)
    }
}

/// What `Store.takeIf` found.
public enum ConditionalTake: Equatable, Sendable {
    /// No such key (or it expired).
    case absent
    /// The value matched and is gone: of concurrent callers, exactly one sees this.
    case taken([UInt8])
    /// The value did not match and is unchanged.
    case kept([UInt8])

    /// The condition every store applies: the value is a JSON object in which each of
    /// `fields` is a top-level member holding exactly that string.
    public static func matches(_ value: [UInt8], _ fields: [String: String]) -> Bool {
        guard case .object(let members)? = JSONValue.parse(value) else { return false }
        return fields.allSatisfy { members[$0.key]?.stringValue == $0.value }
    }
}

/// Shared state: sessions, transactions, suspended journeys, used one-time codes, counters.
///
/// Keys are strings, values opaque bytes, and every key has a time to live (`ttlMs`, > 0), or
/// `StoreExpiry.never` for the few records no clock may expire.
/// Each operation is atomic on its own, so that a Redis implementation can do each in one
/// server-side step. Every completion runs on `executor`, never on the caller's stack.
/// Operations one caller sends from its executor's thread take effect in the order sent, even
/// when it sends the next before the last has answered (Redis: one connection per loop,
/// pipelined; SQLite: one serial queue, where those queued together share a commit). Callers
/// may count on it for tidiness, never for safety or for anything another caller reads: a
/// script Redis no longer has is sent again whole, after whatever was sent behind it. Writes
/// that must not be seen one without the other are one step (`writeAll`).
public protocol Store: AnyObject, Sendable {
    /// Sets `key` only if it does not exist (or has expired). True if it was created.
    func create(_ key: String, value: [UInt8], ttlMs: Int, on executor: CallbackExecutor,
                _ done: @escaping (StoreResult<Bool>) -> Void)
    /// Sets `key`, replacing any value.
    func put(_ key: String, value: [UInt8], ttlMs: Int, on executor: CallbackExecutor,
             _ done: @escaping (StoreResult<Void>) -> Void)
    /// The value, or nil if absent or expired.
    func get(_ key: String, on executor: CallbackExecutor, _ done: @escaping (StoreResult<[UInt8]?>) -> Void)
    /// Sets a new time to live. False if the key is absent.
    func touch(_ key: String, ttlMs: Int, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Bool>) -> Void)
    /// Removes `key`. True if it existed.
    func delete(_ key: String, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Bool>) -> Void)
    /// Returns and removes the value in one step: of concurrent callers, exactly one gets it.
    func take(_ key: String, on executor: CallbackExecutor, _ done: @escaping (StoreResult<[UInt8]?>) -> Void)
    /// Adds 1 to a counter (created at 0 with `ttlMs` if absent; the TTL is not extended) and
    /// returns the new value.
    func increment(_ key: String, ttlMs: Int, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Int>) -> Void)
    /// Replaces the value with `new` (or deletes it when `new` is nil) only if it currently
    /// equals `expected`. True if replaced. `ttlMs` nil keeps the current expiry. With `audit`,
    /// its entry for the outcome is appended to the audit trail in the same step.
    func compareAndSwap(_ key: String, expected: [UInt8], new: [UInt8]?, ttlMs: Int?, audit: AuditAppend?,
                        on executor: CallbackExecutor, _ done: @escaping (StoreResult<Bool>) -> Void)
    /// Every write of `writes` (keys all different), and `counter` moved, in one step, only if
    /// the condition of every write holds: all or nothing (`WriteOutcome`: the counter's value
    /// after the move, or the first write whose condition failed and what it found there). A
    /// counter that holds something other than a number fails an `up` move, and nothing is
    /// written. Keys of a fenced class must be records, not markers (`FencedKeys`).
    func writeAll(_ writes: [ConditionalWrite], moving counter: CounterMove, on executor: CallbackExecutor,
                  _ done: @escaping (StoreResult<WriteOutcome>) -> Void)
    /// `compareAndSwap`, and, only if the value was swapped, `counter` moved in the same step
    /// (`CounterMove`). `done` gets the counter's value after the move, or nil if nothing was
    /// swapped (and nothing moved). A counter that holds something other than a number fails an
    /// `up` move, and nothing is swapped.
    func compareAndSwap(_ key: String, expected: [UInt8], new: [UInt8]?, ttlMs: Int?, audit: AuditAppend?,
                        moving counter: CounterMove, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Int?>) -> Void)
    /// Checks the value and removes it in one step (see `ConditionalTake.matches`), so that a
    /// record is consumed exactly once and only in the state the caller names. With `audit`,
    /// its entry for the outcome (taken, or absent/kept) is appended to the audit trail in the
    /// same step, with the value found.
    func takeIf(_ key: String, fields: [String: String], audit: AuditAppend?, on executor: CallbackExecutor,
                _ done: @escaping (StoreResult<ConditionalTake>) -> Void)
    /// Appends `entry` to the audit trail, kept `retentionMs`, with the value under
    /// `foundKey` (if any, and live) read in the same step: for what changes no state (a
    /// declined approval).
    func appendAudit(_ entry: [UInt8], foundKey: String?, retentionMs: Int, on executor: CallbackExecutor,
                     _ done: @escaping (StoreResult<Void>) -> Void)
    /// Whether the store answers (for the health endpoint).
    func ping(on executor: CallbackExecutor, _ done: @escaping (StoreResult<Void>) -> Void)
    /// Lowers a counter made by `increment` by one, never below 0 and keeping its expiry; an
    /// absent counter stays absent. `done` gets false if nothing was lowered. (A default built
    /// from `get` and `compareAndSwap` is provided; a store may do it in one step.)
    func decrement(_ key: String, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Bool>) -> Void)
    /// Raises the number kept at `key` (decimal ASCII, never expiring) to `value`, if the key is
    /// absent or holds a smaller number. `done` gets true if raised, false if the number kept is
    /// already `value` or more; of concurrent callers raising to the same value, exactly one sees
    /// true. A value that is not a number fails rather than being overwritten. (A default built
    /// from `get`, `create` and `compareAndSwap` is provided; a store may do it in one step.)
    func raise(_ key: String, to value: UInt64, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Bool>) -> Void)
    /// `raise`, unless one of `guards` is there (live) in the same step: then nothing is raised
    /// and `done` gets `.blocked` (a user's TOTP step, accepted only while no lockout of theirs
    /// is set, without a read of its own for the lockout). Guards are plain keys, never of a
    /// fenced class.
    func raise(_ key: String, to value: UInt64, unlessPresent guards: [String], on executor: CallbackExecutor,
               _ done: @escaping (StoreResult<GuardedRaise>) -> Void)
}
