import Dispatch
import Foundation
import TestSupport
import TxGateCore
import TxGateEmail

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
func deliver(_ message: OutgoingEmail, with sender: EmailSender, executor: TestExecutor = TestExecutor(),
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
