import Dispatch
import Foundation
import TxGateCore
import TxGateEmail

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

/// What one `send` reported, and where.
struct Delivery {
    var result: Result<Void, EmailError>
    /// The completion ran on the executor's queue.
    var onExecutor: Bool
    /// The completion ran on the thread that called `send` (it must not: that is an event loop).
    var onCallingThread: Bool
    /// How long `send` itself took to return.
    var sendReturnedAfter: Double
    /// From the call to the completion.
    var completedAfter: Double

    var error: EmailError? {
        if case .failure(let e) = result { return e }
        return nil
    }
    var succeeded: Bool { error == nil }
}

/// Calls `sender.send` from a thread of its own, which stays alive (like an event loop) until
/// the completion arrives, so that "ran on the calling thread" is a fair question. Gives up
/// after `timeout` seconds, so that a sender that never answers fails the test instead of hanging it.
func deliver(_ message: EmailMessage, with sender: EmailSender, executor: TestExecutor = TestExecutor(),
             timeout: Double = 30) async -> Delivery {
    await withCheckedContinuation { continuation in
        let finish = Once<Delivery> { continuation.resume(returning: $0) }
        let thread = Thread {
            let caller = pthread_self()
            let start = Timing.now()
            let completed = DispatchSemaphore(value: 0)
            let returnedAt = NSLock()
            var returned = 0.0
            returnedAt.lock()
            sender.send(message, on: executor) { result in
                let onExecutor = executor.isCurrent
                let onCaller = pthread_equal(pthread_self(), caller) != 0
                let completedAfter = Timing.now() - start
                // Released once `send` has returned, unless the completion ran inside `send`.
                if !onCaller { returnedAt.lock(); returnedAt.unlock() }
                finish.run(Delivery(result: result, onExecutor: onExecutor, onCallingThread: onCaller,
                                sendReturnedAfter: onCaller ? completedAfter : returned, completedAfter: completedAfter))
                completed.signal()
            }
            returned = Timing.now() - start
            returnedAt.unlock()
            _ = completed.wait(timeout: .now() + timeout)
        }
        thread.start()
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout) {
            finish.run(Delivery(result: .failure(.failed("test: no completion within \(timeout) s")), onExecutor: false,
                            onCallingThread: false, sendReturnedAfter: timeout, completedAfter: timeout))
        }
    }
}

/// Calls `body` for the first `run` only (a completion racing a test's own deadline).
final class Once<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var body: ((T) -> Void)?
    init(_ body: @escaping (T) -> Void) { self.body = body }
    func run(_ value: T) {
        let first = lock.withLock { () -> ((T) -> Void)? in
            defer { body = nil }
            return body
        }
        first?(value)
    }
}

/// A fresh folder under the system temp folder, removed by `remove()`.
struct TemporaryFolder {
    let url: URL
    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("txgate-email-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    var path: String { url.path }
    func path(_ name: String) -> String { url.appendingPathComponent(name).path }
    func remove() { try? FileManager.default.removeItem(at: url) }
}

struct HarnessError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Monotonic time.
enum Timing {
    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// Calls `body` every `interval` seconds until it returns true or `timeout` passes.
    @discardableResult
    static func poll(timeout: Double, interval: Double = 0.02, _ body: () throws -> Bool) rethrows -> Bool {
        let deadline = now() + timeout
        while true {
            if try body() { return true }
            if now() >= deadline { return false }
            usleep(useconds_t(interval * 1_000_000))
        }
    }
}
