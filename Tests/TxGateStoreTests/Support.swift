import Dispatch
import Foundation
import TxGateCore
import TestSupport
@testable import TxGateStore

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

func sleep(ms: Int) async throws { try await Task.sleep(nanoseconds: UInt64(ms) * 1_000_000) }
