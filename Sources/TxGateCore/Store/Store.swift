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
    /// Lowers a counter made by `increment` by one, never below 0 and keeping its expiry; an
    /// absent counter stays absent. A compare-and-swap over what was read, retried if another
    /// caller changed the counter in between. `done` gets false if nothing was lowered.
    public func decrement(_ key: String, on executor: CallbackExecutor, attempts: Int = 5,
                          _ done: @escaping (StoreResult<Bool>) -> Void) {
        get(key, on: executor) { [self] r in
            switch r {
            case .failure(let e): done(.failure(e))
            case .success(nil): done(.success(false))
            case .success(let bytes?):
                guard let n = Int(String(decoding: bytes, as: UTF8.self)), n > 0 else { done(.success(false)); return }
                compareAndSwap(key, expected: bytes, new: Array(String(n - 1).utf8), ttlMs: nil, on: executor) { [self] r in
                    switch r {
                    case .success(false) where attempts > 1: decrement(key, on: executor, attempts: attempts - 1, done)
                    default: done(r)
                    }
                }
            }
        }
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
/// Keys are strings, values opaque bytes, and every key has a time to live (`ttlMs`, > 0).
/// Each operation is atomic on its own, so that a Redis implementation can do each in one
/// server-side step. Every completion runs on `executor`, never on the caller's stack.
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
    /// equals `expected`. True if replaced. `ttlMs` nil keeps the current expiry.
    func compareAndSwap(_ key: String, expected: [UInt8], new: [UInt8]?, ttlMs: Int?, on executor: CallbackExecutor,
                        _ done: @escaping (StoreResult<Bool>) -> Void)
    /// Checks the value and removes it in one step (see `ConditionalTake.matches`), so that a
    /// record is consumed exactly once and only in the state the caller names.
    func takeIf(_ key: String, fields: [String: String], on executor: CallbackExecutor,
                _ done: @escaping (StoreResult<ConditionalTake>) -> Void)
    /// Whether the store answers (for the health endpoint).
    func ping(on executor: CallbackExecutor, _ done: @escaping (StoreResult<Void>) -> Void)
}
