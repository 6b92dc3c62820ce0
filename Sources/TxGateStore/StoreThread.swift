import Foundation
import Glibc
import TxGateCore

/// One thread of its own that runs blocks in the order they are given, one at a time: where the
/// SQLite store makes every SQLite call.
///
/// A serial `DispatchQueue` did this before, and woke one of libdispatch's pool threads for each
/// batch (three took turns in the step-up cycle). This thread sleeps on one condition variable,
/// only when nothing is waiting; what is given while it runs is taken when the turn ends,
/// without a wake-up. The store's thread spends 7 % less a step-up cycle, the gateway 4 % (1
/// worker), and the store takes 1.12× the cycles a second with 4 loops feeding it (its ceiling,
/// `bench/store-bench`; bench/RESULTS.md, twenty-second attempt). Dispatch has no serial
/// executor bound to one thread, hence this one.
final class StoreThread: @unchecked Sendable {
    // @unchecked Sendable: `blocks`, `spare`, `sleeping` and `stopping` are only touched with
    // `lock` held; `id` is written once, before `init` returns.
    private let lock = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let wake = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var blocks: [() -> Void] = []
    /// The array the thread ran last, kept for its capacity.
    private var spare: [() -> Void] = []
    private var sleeping = false
    private var stopping = false
    private var id = pthread_t()

    /// Starts the thread, named `name` (at most 15 bytes are kept: the kernel's limit).
    init(name: String) {
        pthread_mutex_init(lock, nil)
        pthread_cond_init(wake, nil)
        let started = DispatchSemaphore(value: 0)
        let thread = Thread { [self] in
            id = pthread_self()
            CurrentThread.name(name)
            Self.takeNoProcessSignals()
            started.signal()
            run()
        }
        thread.start()
        started.wait()
    }

    deinit {
        pthread_cond_destroy(wake)
        pthread_mutex_destroy(lock)
        lock.deallocate()
        wake.deallocate()
    }

    /// Whether the caller is this thread.
    var isCurrent: Bool { pthread_equal(pthread_self(), id) != 0 }

    /// Runs `block` on the thread, after every block given before it.
    func async(_ block: @escaping () -> Void) {
        pthread_mutex_lock(lock)
        blocks.append(block)
        let asleep = sleeping
        pthread_mutex_unlock(lock)
        if asleep { pthread_cond_signal(wake) }
    }

    /// Runs `body` on the thread and waits for it (runs it in place if called on the thread).
    func sync<T>(_ body: () throws -> T) rethrows -> T {
        try sync(body, rescue: { throw $0 })
    }

    /// `sync` with the error handed back through `rescue`: a `rethrows` function may throw only
    /// from its closures.
    private func sync<T>(_ body: () throws -> T, rescue: (Error) throws -> T) rethrows -> T {
        if isCurrent { return try body() }
        var result: Result<T, Error>?
        let done = DispatchSemaphore(value: 0)
        withoutActuallyEscaping(body) { body in
            // The block given to the thread may outlive this call (the thread lets go of its
            // blocks after a turn), `body` must not: it is let go of before the signal.
            let held = Held(body)
            async {
                result = Result { try held.body!() }
                held.body = nil
                done.signal()
            }
            done.wait()
        }
        switch result! {
        case .success(let value): return value
        case .failure(let error): return try rescue(error)
        }
    }

    private final class Held<T> {
        var body: (() throws -> T)?
        init(_ body: @escaping () throws -> T) { self.body = body }
    }

    /// Ends the thread once every block given so far has run. Called on the thread itself, it
    /// ends after the block that called it and those waiting.
    func stop() {
        pthread_mutex_lock(lock)
        stopping = true
        let asleep = sleeping
        pthread_mutex_unlock(lock)
        if asleep { pthread_cond_signal(wake) }
    }

    /// Blocks the signals sent to the process on the calling thread, as libdispatch does on its
    /// own threads, where the store ran before: a SIGTERM or SIGHUP is handled on a thread that
    /// waits for it, never in the middle of a SQLite call. The faults a thread causes itself
    /// stay deliverable, whatever mask the thread inherited.
    private static func takeNoProcessSignals() {
        var set = sigset_t()
        sigfillset(&set)
        for fault in [SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGSEGV] { sigdelset(&set, fault) }
        pthread_sigmask(SIG_SETMASK, &set, nil)
    }

    private func run() {
        pthread_mutex_lock(lock)
        while true {
            while blocks.isEmpty && !stopping {
                sleeping = true
                pthread_cond_wait(wake, lock)
                sleeping = false
            }
            if blocks.isEmpty { break }
            var batch: [() -> Void] = []
            swap(&batch, &blocks)
            swap(&blocks, &spare)
            pthread_mutex_unlock(lock)
            for block in batch { block() }
            // Released here, off the lock: a block's captures may hold the store, whose deinit
            // runs then.
            batch.removeAll(keepingCapacity: true)
            pthread_mutex_lock(lock)
            spare = batch
        }
        pthread_mutex_unlock(lock)
    }
}
