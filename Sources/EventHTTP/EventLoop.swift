import CLibevent
import Foundation

/// One libevent `event_base`, driven by one thread. Every handle created on a loop (listener,
/// bufferevents, timers) must only be touched from that thread; `execute` is the one
/// thread-safe entry point.
public final class EventLoop: @unchecked Sendable {
    public let base: OpaquePointer
    private var wakeEvent: OpaquePointer?
    private let lock = NSLock()
    private var pending: [() -> Void] = []
    private var loopThread: pthread_t?
    /// Objects bound to this loop (one per owner, e.g. a store's connection for this loop).
    /// Set before the loop runs or on its thread; read on its thread only.
    public var locals: [ObjectIdentifier: AnyObject] = [:]

    public init() {
        EventLoop.processSetup
        guard let b = event_base_new() else { fatalError("event_base_new failed: out of memory") }
        base = b
        wakeEvent = event_new(base, -1, 0, { _, _, arg in
            Unmanaged<EventLoop>.fromOpaque(arg!).takeUnretainedValue().runPending()
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    deinit {
        if let wakeEvent { event_free(wakeEvent) }
        event_base_free(base)
    }

    /// Process-wide setup, once: libevent locking for cross-thread wake-ups, and SIGPIPE
    /// ignored so that a peer closing mid-write is an error return, not a crash. SIGTERM and
    /// SIGINT are unblocked: a parent that started us with them blocked (Foundation's
    /// Process does) must still be able to stop us gracefully.
    private static let processSetup: Void = {
        evthread_use_pthreads()
        signal(SIGPIPE, SIG_IGN)
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGTERM)
        sigaddset(&set, SIGINT)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
    }()

    /// Runs the loop on the calling thread until `stop()`.
    public func run() {
        loopThread = pthread_self()
        event_base_loop(base, EVLOOP_NO_EXIT_ON_EMPTY)
        runPending()
    }

    /// Stops the loop once the current callbacks return. Thread-safe.
    public func stop() {
        event_base_loopbreak(base)
    }

    public var inLoopThread: Bool {
        guard let t = loopThread else { return false }
        return pthread_equal(t, pthread_self()) != 0
    }

    /// Runs `work` on the loop thread. Thread-safe.
    public func execute(_ work: @escaping () -> Void) {
        lock.lock()
        pending.append(work)
        lock.unlock()
        event_active(wakeEvent, EV_READ, 0)
    }

    private func runPending() {
        lock.lock()
        let work = pending
        pending.removeAll()
        lock.unlock()
        for w in work { w() }
    }

    /// A monotonic clock in nanoseconds, for latency measurement.
    public static func nowNanos() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}

/// A one-shot timer on a loop. Re-arming replaces the previous deadline.
public final class LoopTimer {
    private var event: OpaquePointer?
    private let callback: () -> Void

    public init(loop: EventLoop, _ callback: @escaping () -> Void) {
        self.callback = callback
        event = event_new(loop.base, -1, 0, { _, _, arg in
            let timer = Unmanaged<LoopTimer>.fromOpaque(arg!).takeUnretainedValue()
            timer.callback()
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    public func schedule(afterMs ms: Int) {
        var tv = timeval(milliseconds: ms)
        event_add(event, &tv)
    }

    public func cancel() { event_del(event) }

    deinit { event_free(event) }
}

extension timeval {
    init(milliseconds ms: Int) {
        self.init(tv_sec: ms / 1000, tv_usec: (ms % 1000) * 1000)
    }
}

/// Small helpers for moving bytes in and out of evbuffers.
public enum EvBuffer {
    public static func append(_ buffer: OpaquePointer, _ string: String) {
        var s = string
        s.withUTF8 { _ = evbuffer_add(buffer, $0.baseAddress, $0.count) }
    }

    public static func append(_ buffer: OpaquePointer, _ bytes: [UInt8]) {
        bytes.withUnsafeBytes { _ = evbuffer_add(buffer, $0.baseAddress, $0.count) }
    }

    public static func length(_ buffer: OpaquePointer) -> Int { evbuffer_get_length(buffer) }

    /// Copies the whole buffer out (for small bodies the domain inspects, e.g. JSON).
    public static func bytes(_ buffer: OpaquePointer) -> [UInt8] {
        let n = evbuffer_get_length(buffer)
        guard n > 0 else { return [] }
        return [UInt8](unsafeUninitializedCapacity: n) { out, count in
            count = Int(evbuffer_copyout(buffer, out.baseAddress, n))
        }
    }

    /// Finds `needle` in the buffer; the offset of its first byte, or nil.
    static func search(_ buffer: OpaquePointer, _ needle: StaticString) -> Int? {
        let p = evbuffer_search(buffer, UnsafeRawPointer(needle.utf8Start).assumingMemoryBound(to: CChar.self),
                                needle.utf8CodeUnitCount, nil)
        return p.pos < 0 ? nil : p.pos
    }
}

/// A libevent signal event on the main loop.
public final class SignalWatcher {
    private var event: OpaquePointer?
    private let handler: (Int32) -> Void
    private let signal: Int32

    public init(loop: EventLoop, signal: Int32, _ handler: @escaping (Int32) -> Void) {
        self.handler = handler
        self.signal = signal
        event = event_new(loop.base, signal, Int16(EV_SIGNAL | EV_PERSIST), { _, _, arg in
            let w = Unmanaged<SignalWatcher>.fromOpaque(arg!).takeUnretainedValue()
            w.handler(w.signal)
        }, Unmanaged.passUnretained(self).toOpaque())
        event_add(event, nil)
    }

    deinit { event_free(event) }
}
