import EventHTTP
import TxGateCore

/// A `Store` that times each operation and counts its failures, then hands the answer on
/// unchanged. The gateway wraps its SQLite or Redis store in it once, at start-up.
final class MeasuredStore: Store {
    let inner: Store
    let metrics: GatewayMetrics

    init(_ inner: Store, metrics: GatewayMetrics) {
        self.inner = inner
        self.metrics = metrics
    }

    /// `done`, wrapped to record the time since now and whether the answer is a failure.
    private func measured<T>(_ op: StoreOperation, _ done: @escaping (StoreResult<T>) -> Void) -> (StoreResult<T>) -> Void {
        let start = EventLoop.nowNanos()
        let metrics = metrics
        return { r in
            if case .failure = r {
                metrics.storeOperation(op, nanos: EventLoop.nowNanos() - start, failed: true)
            } else {
                metrics.storeOperation(op, nanos: EventLoop.nowNanos() - start, failed: false)
            }
            done(r)
        }
    }

    func create(_ key: String, value: [UInt8], ttlMs: Int, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Bool>) -> Void) {
        inner.create(key, value: value, ttlMs: ttlMs, on: executor, measured(.create, done))
    }

    func put(_ key: String, value: [UInt8], ttlMs: Int, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Void>) -> Void) {
        inner.put(key, value: value, ttlMs: ttlMs, on: executor, measured(.put, done))
    }

    func get(_ key: String, on executor: CallbackExecutor, _ done: @escaping (StoreResult<[UInt8]?>) -> Void) {
        inner.get(key, on: executor, measured(.get, done))
    }

    func touch(_ key: String, ttlMs: Int, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Bool>) -> Void) {
        inner.touch(key, ttlMs: ttlMs, on: executor, measured(.touch, done))
    }

    func delete(_ key: String, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Bool>) -> Void) {
        inner.delete(key, on: executor, measured(.delete, done))
    }

    func take(_ key: String, on executor: CallbackExecutor, _ done: @escaping (StoreResult<[UInt8]?>) -> Void) {
        inner.take(key, on: executor, measured(.take, done))
    }

    func increment(_ key: String, ttlMs: Int, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Int>) -> Void) {
        inner.increment(key, ttlMs: ttlMs, on: executor, measured(.increment, done))
    }

    func compareAndSwap(_ key: String, expected: [UInt8], new: [UInt8]?, ttlMs: Int?, audit: AuditAppend?,
                        on executor: CallbackExecutor, _ done: @escaping (StoreResult<Bool>) -> Void) {
        inner.compareAndSwap(key, expected: expected, new: new, ttlMs: ttlMs, audit: audit, on: executor, measured(.compareAndSwap, done))
    }

    func takeIf(_ key: String, fields: [String: String], audit: AuditAppend?, on executor: CallbackExecutor,
                _ done: @escaping (StoreResult<ConditionalTake>) -> Void) {
        inner.takeIf(key, fields: fields, audit: audit, on: executor, measured(.takeIf, done))
    }

    func appendAudit(_ entry: [UInt8], foundKey: String?, retentionMs: Int, on executor: CallbackExecutor,
                     _ done: @escaping (StoreResult<Void>) -> Void) {
        inner.appendAudit(entry, foundKey: foundKey, retentionMs: retentionMs, on: executor, measured(.appendAudit, done))
    }

    func ping(on executor: CallbackExecutor, _ done: @escaping (StoreResult<Void>) -> Void) {
        inner.ping(on: executor, measured(.ping, done))
    }

    func decrement(_ key: String, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Bool>) -> Void) {
        inner.decrement(key, on: executor, measured(.decrement, done))
    }

    func raise(_ key: String, to value: UInt64, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Bool>) -> Void) {
        inner.raise(key, to: value, on: executor, measured(.raise, done))
    }
}
