import Dispatch
import Foundation
import TxGateCore
@testable import TxGateStore

/// Stands in for a worker's event loop: runs completions on its own serial queue, and lets a
/// test check that a completion really arrived there.
final class TestExecutor: CallbackExecutor, @unchecked Sendable {
    private let queue: DispatchQueue
    private let key = DispatchSpecificKey<Int>()
    private let id: Int

    init(_ id: Int = 0) {
        self.id = id
        queue = DispatchQueue(label: "txgate.test.executor.\(id)")
        queue.setSpecific(key: key, value: id)
    }

    func execute(_ work: @escaping () -> Void) {
        nonisolated(unsafe) let work = work
        queue.async { work() }
    }

    /// Whether the calling code runs on this executor's queue.
    var isCurrent: Bool { DispatchQueue.getSpecific(key: key) == id }
}

/// A fresh folder under the system temp folder, removed by `remove()`.
struct TemporaryFolder {
    let url: URL
    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("txgate-store-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    func path(_ name: String) -> String { url.appendingPathComponent(name).path }
    func remove() { try? FileManager.default.removeItem(at: url) }
}

/// Awaits one store call: `await call { store.get("k", on: $0, $1) }`.
func call<T>(on executor: CallbackExecutor = TestExecutor(),
             _ operation: (CallbackExecutor, @escaping (StoreResult<T>) -> Void) -> Void) async -> StoreResult<T> {
    await withCheckedContinuation { continuation in
        operation(executor) { continuation.resume(returning: $0) }
    }
}

/// Starts `count` calls at once from several threads, each with one of `executors`, and
/// returns every result once all have completed.
func concurrently<T>(_ count: Int, executors: [CallbackExecutor],
                     _ operation: @escaping (Int, CallbackExecutor, @escaping (StoreResult<T>) -> Void) -> Void) async -> [StoreResult<T>] {
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

/// Results arriving on several threads.
final class Collected<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [T] = []
    func append(_ item: T) { lock.withLock { stored.append(item) } }
    var items: [T] { lock.withLock { stored } }
}

func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

/// A clock that moves only when the test says so, for `SQLiteStore(path:clock:)`: expiry
/// tests advance it instead of sleeping, so a slow machine cannot change what they see.
/// The store reads it on its own queue, hence the lock.
final class TestClock: @unchecked Sendable {
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

    /// The clock as a store reads it.
    var read: @Sendable () -> Int64 { { [self] in now } }
}

func sleep(ms: Int) async throws { try await Task.sleep(nanoseconds: UInt64(ms) * 1_000_000) }
