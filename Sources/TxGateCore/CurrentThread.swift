import CTxGateThread
import Synchronization

/// What a thread does to itself: a name the kernel shows, the CPUs it runs on.
public enum CurrentThread {
    /// Names the calling thread for the kernel (`top -H`, `/proc/PID/task/TID/comm`), cut to 15
    /// bytes: Foundation's `Thread.name` does not reach it on Linux. A thread left unnamed (the
    /// call failed) works the same.
    public static func name(_ name: String) {
        _ = txgate_name_current_thread(name)
    }

    /// Whether a thread of this process was pinned (`pin(to:)`): then `unpin` has work to do.
    private static let anyPinned = Atomic<Bool>(false)

    /// Restricts the calling thread to `cpu`. Returns 0, or the errno value that says why not.
    /// A thread it starts from then on inherits that one CPU: see `unpin`.
    public static func pin(to cpu: Int) -> Int32 {
        anyPinned.store(true, ordering: .relaxed)
        var one = Int32(clamping: cpu)
        return txgate_set_current_thread_cpus(&one, 1)
    }

    /// Lets the calling thread run on every CPU the process may use again, once a thread has
    /// been pinned (a no-op before). Called first by work handed off a pinned worker's loop to a
    /// thread of a pool (password hashing, DNS, email, checkpoints): the pool's threads are
    /// started by whichever thread hands it work, and a new thread inherits its starter's CPUs,
    /// so a pool thread a worker started would otherwise run only on that worker's CPU, beside
    /// its loop, whatever thread later hands it work.
    public static func unpin() {
        guard anyPinned.load(ordering: .relaxed), let cpus = CPUs.allowed else { return }
        _ = cpus.map { Int32(clamping: $0) }.withUnsafeBufferPointer {
            txgate_set_current_thread_cpus($0.baseAddress, Int32($0.count))
        }
    }
}
