import Dispatch
import Foundation
import TxGateCore
import TestSupport
@testable import TxGateStore

/// Awaits one store call: `await call { store.get("k", on: $0, $1) }`.
func call<T: Sendable>(on executor: CallbackExecutor = TestExecutor(),
             _ operation: (CallbackExecutor, @escaping (StoreResult<T>) -> Void) -> Void) async -> StoreResult<T> {
    await withCheckedContinuation { continuation in
        operation(executor) { continuation.resume(returning: $0) }
    }
}

/// Starts `count` calls at once from several threads, each with one of `executors`, and
/// returns every result once all have completed.
func concurrently<T: Sendable>(_ count: Int, executors: [CallbackExecutor],
                               _ operation: @escaping @Sendable (Int, CallbackExecutor, @escaping (StoreResult<T>) -> Void) -> Void) async -> [StoreResult<T>] {
    await withCheckedContinuation { continuation in
        let results = Collected<StoreResult<T>>()
        let group = DispatchGroup()
        for _ in 0..<count { group.enter() }
        group.notify(queue: .global()) { continuation.resume(returning: results.items) }
        DispatchQueue.global().async {
            DispatchQueue.concurrentPerform(iterations: count) { i in
                operation(i, executors[i % executors.count]) { result in
                    results.append(result)
                    group.leave()
                }
            }
        }
    }
}

/// A clock that moves only when the test says so, for `SQLiteStore(path:clock:)`: expiry
/// tests advance it instead of sleeping, so a slow machine cannot change what they see.
/// The store reads it on its own queue, hence the lock.
final class TestClock: @unchecked Sendable {
    // @unchecked: `ms` is only touched under `lock`.
    private let lock = NSLock()
    private var ms: Int64

    /// Starts at a realistic epoch time (2023-11-14), not at 0.
    init(startMs: Int64 = 1_700_000_000_000) { ms = startMs }

    /// The current time in epoch milliseconds.
    var now: Int64 { lock.withLock { ms } }

    /// Moves the clock forward by `ms` milliseconds.
    func advance(ms delta: Int64) {
        precondition(delta >= 0, "a clock does not go back")
        lock.withLock { ms += delta }
    }

    /// Steps the clock back by `ms` milliseconds, as an operator or NTP stepping a clock that ran
    /// ahead does: for the tests of what a clock step must not undo.
    func stepBack(ms delta: Int64) {
        precondition(delta >= 0)
        lock.withLock { ms -= delta }
    }

    /// The clock as a store reads it.
    var read: @Sendable () -> Int64 { { [self] in now } }
}

func sleep(ms: Int) async throws { try await Task.sleep(nanoseconds: UInt64(ms) * 1_000_000) }
