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
    /// Whether the store answers (for the health endpoint).
    func ping(on executor: CallbackExecutor, _ done: @escaping (StoreResult<Void>) -> Void)
}
