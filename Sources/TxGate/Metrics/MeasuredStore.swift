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

    /// `done`, wrapped to record the time since now and whether the answer is a failure. The
    /// answer comes on `executor`: on a worker's loop, that worker's share of the metrics
    /// (`WorkerStats`) records it, with no lock or atomic shared with other workers.
    private func measured<T>(_ op: StoreOperation, on executor: CallbackExecutor,
                             _ done: @escaping (StoreResult<T>) -> Void) -> (StoreResult<T>) -> Void {
        let start = EventLoop.nowNanos()
        let metrics = metrics
        return { r in
            let failed = if case .failure = r { true } else { false }
            let nanos = EventLoop.nowNanos() &- start
            if let loop = executor as? EventLoop, loop.inEventLoop,
               let stats = loop.local(WorkerStats.loopKey) as? WorkerStats {
                stats.storeOperation(op, nanos: nanos, failed: failed)
            } else {
                metrics.storeOperationOffLoop(op, nanos: nanos, failed: failed)
            }
            done(r)
        }
    }

    func create(_ key: String, value: [UInt8], ttlMs: Int, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Bool>) -> Void) {
        inner.create(key, value: value, ttlMs: ttlMs, on: executor, measured(.create, on: executor, done))
    }

    func writeAll(_ writes: [ConditionalWrite], moving counter: CounterMove, on executor: CallbackExecutor,
                  _ done: @escaping (StoreResult<WriteOutcome>) -> Void) {
        inner.writeAll(writes, moving: counter, on: executor, measured(.writeAll, on: executor, done))
    }

    func put(_ key: String, value: [UInt8], ttlMs: Int, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Void>) -> Void) {
        inner.put(key, value: value, ttlMs: ttlMs, on: executor, measured(.put, on: executor, done))
    }

    func get(_ key: String, on executor: CallbackExecutor, _ done: @escaping (StoreResult<[UInt8]?>) -> Void) {
        inner.get(key, on: executor, measured(.get, on: executor, done))
    }

    func touch(_ key: String, ttlMs: Int, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Bool>) -> Void) {
        inner.touch(key, ttlMs: ttlMs, on: executor, measured(.touch, on: executor, done))
    }

    func delete(_ key: String, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Bool>) -> Void) {
        inner.delete(key, on: executor, measured(.delete, on: executor, done))
    }

    func take(_ key: String, on executor: CallbackExecutor, _ done: @escaping (StoreResult<[UInt8]?>) -> Void) {
        inner.take(key, on: executor, measured(.take, on: executor, done))
    }

    func increment(_ key: String, ttlMs: Int, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Int>) -> Void) {
        inner.increment(key, ttlMs: ttlMs, on: executor, measured(.increment, on: executor, done))
    }

    func compareAndSwap(_ key: String, expected: [UInt8], new: [UInt8]?, ttlMs: Int?, audit: AuditAppend?,
                        on executor: CallbackExecutor, _ done: @escaping (StoreResult<Bool>) -> Void) {
        inner.compareAndSwap(key, expected: expected, new: new, ttlMs: ttlMs, audit: audit, on: executor, measured(.compareAndSwap, on: executor, done))
    }

    func compareAndSwap(_ key: String, expected: [UInt8], new: [UInt8]?, ttlMs: Int?, audit: AuditAppend?, moving counter: CounterMove,
                        on executor: CallbackExecutor, _ done: @escaping (StoreResult<Int?>) -> Void) {
        inner.compareAndSwap(key, expected: expected, new: new, ttlMs: ttlMs, audit: audit, moving: counter, on: executor,
                             measured(.compareAndSwap, on: executor, done))
    }

    func takeIf(_ key: String, fields: [String: String], audit: AuditAppend?, on executor: CallbackExecutor,
                _ done: @escaping (StoreResult<ConditionalTake>) -> Void) {
        inner.takeIf(key, fields: fields, audit: audit, on: executor, measured(.takeIf, on: executor, done))
    }

    func appendAudit(_ entry: [UInt8], foundKey: String?, retentionMs: Int, on executor: CallbackExecutor,
                     _ done: @escaping (StoreResult<Void>) -> Void) {
        inner.appendAudit(entry, foundKey: foundKey, retentionMs: retentionMs, on: executor, measured(.appendAudit, on: executor, done))
    }

    func ping(on executor: CallbackExecutor, _ done: @escaping (StoreResult<Void>) -> Void) {
        inner.ping(on: executor, measured(.ping, on: executor, done))
    }

    func decrement(_ key: String, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Bool>) -> Void) {
        inner.decrement(key, on: executor, measured(.decrement, on: executor, done))
    }

    func raise(_ key: String, to value: UInt64, on executor: CallbackExecutor, _ done: @escaping (StoreResult<Bool>) -> Void) {
        inner.raise(key, to: value, on: executor, measured(.raise, on: executor, done))
    }

    func raise(_ key: String, to value: UInt64, unlessPresent guards: [String], on executor: CallbackExecutor,
               _ done: @escaping (StoreResult<GuardedRaise>) -> Void) {
        inner.raise(key, to: value, unlessPresent: guards, on: executor, measured(.raise, on: executor, done))
    }
}
