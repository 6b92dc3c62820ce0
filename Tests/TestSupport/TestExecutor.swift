import Dispatch
import Foundation
import TxGateCore

/// Stands in for a worker's event loop: runs completions on its own serial queue, and lets a
/// test check that a completion really arrived there.
public final class TestExecutor: CallbackExecutor, Sendable {
    private let queue: DispatchQueue
    private let key = DispatchSpecificKey<Int>()
    private let id: Int

    public init(_ id: Int = 0) {
        self.id = id
        queue = DispatchQueue(label: "txgate.test.executor.\(id)")
        queue.setSpecific(key: key, value: id)
    }

    public func execute(_ work: @escaping () -> Void) {
        // The protocol's work item is not @Sendable; it runs once, on this serial queue only.
        nonisolated(unsafe) let work = work
        queue.async { work() }
    }

    /// Whether the calling code runs on this executor's queue.
    public var isCurrent: Bool { DispatchQueue.getSpecific(key: key) == id }
}

/// Awaits one store call: `await call { store.get("k", on: $0, $1) }`.
public func call<T: Sendable>(on executor: CallbackExecutor = TestExecutor(),
                              _ operation: (CallbackExecutor, @escaping (StoreResult<T>) -> Void) -> Void) async -> StoreResult<T> {
    await withCheckedContinuation { continuation in
        operation(executor) { continuation.resume(returning: $0) }
    }
}

/// Calls `body` for the first `run` only (a completion racing a test's own deadline).
public final class Once<T>: @unchecked Sendable {
    // @unchecked: `body` is only read and cleared under `lock`.
    private let lock = NSLock()
    private var body: ((T) -> Void)?
    public init(_ body: @escaping (T) -> Void) { self.body = body }
    public func run(_ value: T) {
        let first = lock.withLock { () -> ((T) -> Void)? in
            defer { body = nil }
            return body
        }
        first?(value)
    }
}

/// Results arriving on several threads.
public final class Collected<T>: @unchecked Sendable {
    // @unchecked: `stored` is only touched under `lock`.
    private let lock = NSLock()
    private var stored: [T] = []
    public init() {}
    /// Adds `item`; returns how many there are now.
    @discardableResult
    public func append(_ item: T) -> Int {
        lock.withLock {
            stored.append(item)
            return stored.count
        }
    }
    public var items: [T] { lock.withLock { stored } }
    public var count: Int { lock.withLock { stored.count } }
}

extension Result {
    /// The failure, or nil for a success.
    public var error: Failure? {
        if case .failure(let e) = self { return e }
        return nil
    }
}
