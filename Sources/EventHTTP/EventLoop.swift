import CLibevent
import HTTPCore
import Foundation

/// One libevent `event_base`, driven by one thread. Every handle created on a loop (listener,
/// bufferevents, timers) must only be touched from that thread; `execute` is the one
/// thread-safe entry point.
///
/// Until `run()` the loop belongs to the thread that created it, so that a worker can be set
/// up (listener, pool, store connections) before its thread starts.
// @unchecked Sendable: `base` is only used on the loop's thread (checked in debug builds);
// `pending` and `owner` are guarded by `lock`; libevent's wake-up is thread-safe.
public final class EventLoop: @unchecked Sendable {
    package let base: OpaquePointer
    private var wakeEvent: OpaquePointer?
    private let lock = NSLock()
    private var pending: [() -> Void] = []
    private var owner: pthread_t
    /// Objects bound to this loop (one per owner, e.g. a store's connection for this loop).
    private var locals: [ObjectIdentifier: AnyObject] = [:]
    /// The writer of every message head this loop sends (`HeadScratch`).
    let heads = HeadScratch()
    /// Finished requests' header buffers, for the next request heads parsed on this loop.
    let requestHeaders = HeadersPool()
    /// Where a plain socket reads when nothing is buffered for it (`SocketChannel.readReady`):
    /// a request head that arrives whole is parsed from here, with no input chain allocated,
    /// filled, searched and freed for it.
    let readBuffer = UnsafeMutableRawPointer.allocate(byteCount: EventLoop.readBufferSize, alignment: 16)
    static let readBufferSize = 16_384

    public init() {
        EventLoop.processSetup
        guard let b = event_base_new() else { fatalError("event_base_new failed: out of memory") }
        base = b
        owner = pthread_self()
        wakeEvent = event_new(base, -1, 0, { _, _, arg in
            Unmanaged<EventLoop>.fromOpaque(arg!).takeUnretainedValue().runPending()
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    deinit {
        if let wakeEvent { event_free(wakeEvent) }
        event_base_free(base)
        readBuffer.deallocate()
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

    /// Runs the loop on the calling thread until `stop()`. From here on, that thread owns it.
    public func run() {
        lock.withLock { owner = pthread_self() }
        event_base_loop(base, EVLOOP_NO_EXIT_ON_EMPTY)
        runPending()
    }

    /// One turn of the loop on the calling thread, without waiting: the callbacks of what is ready
    /// now. For tests that watch what one turn does.
    package func turn() {
        preconditionInEventLoop()
        event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK)
    }

    /// Stops the loop once the current callbacks return, or as soon as it runs if it has not
    /// started yet. Thread-safe.
    ///
    /// The break is asked for from inside the loop: `event_base_loop` forgets a break asked
    /// for before it started, so a `stop` racing a `run` that had not entered it yet (a server
    /// stopped right after it was made) left the loop running for good. A closure queued now
    /// runs inside the loop whenever it runs.
    public func stop() {
        execute { [base] in event_base_loopbreak(base) }
    }

    /// Whether the caller is on the thread that owns the loop (its creator until `run()`).
    public var inEventLoop: Bool {
        let owner = lock.withLock { self.owner }
        return pthread_equal(owner, pthread_self()) != 0
    }

    /// The former name of `inEventLoop`.
    public var inLoopThread: Bool { inEventLoop }

    /// Traps, in debug builds, when called off the loop's thread.
    @inlinable
    public func preconditionInEventLoop(file: StaticString = #fileID, line: UInt = #line) {
        assert(inEventLoop, "called off the event loop's thread", file: file, line: line)
    }

    /// Runs `work` on the loop thread, after the callbacks in progress. Thread-safe.
    ///
    /// The closure is not `@Sendable` because `CallbackExecutor` (TxGateCore) hands over
    /// store completions that are not: what it captures must be Sendable or bound to this
    /// loop (`LoopBound`).
    public func execute(_ work: @escaping () -> Void) {
        lock.withLock { pending.append(work) }
        event_active(wakeEvent, EV_READ, 0)
    }

    private func runPending() {
        let work = lock.withLock {
            let work = pending
            pending.removeAll()
            return work
        }
        for w in work { w() }
    }

    /// The object `key` bound to this loop, if any. On the loop's thread only.
    public func local(_ key: ObjectIdentifier) -> AnyObject? {
        preconditionInEventLoop()
        return locals[key]
    }

    /// Binds `value` to this loop under `key` (nil removes it) and returns what was there.
    /// On the loop's thread only.
    @discardableResult
    public func setLocal(_ value: AnyObject?, for key: ObjectIdentifier) -> AnyObject? {
        preconditionInEventLoop()
        if let value { return locals.updateValue(value, forKey: key) }
        return locals.removeValue(forKey: key)
    }

    /// A monotonic clock in nanoseconds, for latency measurement.
    public static func nowNanos() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// The same clock at the kernel tick's resolution (1-4 ms), for timeouts and idle times:
    /// it reads a value the kernel keeps, without reading the time source (in a virtual machine,
    /// a paravirtual clock), several times cheaper, and a request takes several such readings.
    /// A value from here is compared only with others from here.
    public static func coarseNanos() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC_COARSE, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}

/// One head writer per loop, reused for every head the loop sends (a response to a client, a
/// request to an upstream): a head is written and copied into its output before the next one
/// starts, so one buffer serves them all instead of a new one per message.
final class HeadScratch {
    private var writer = HeadWriter(capacity: 4096)
    private var inUse = false
    private var oversized = false
    /// The exchange whose response head the writer holds back for its body (`writeHeld`).
    private var heldFor: ServerExchange?
    /// True while a plain socket's read callback runs (`SocketChannel.readReady`): a response
    /// head started then may wait for its body, which that callback delivers when it is
    /// already in (a proxied response read whole), to go out with it in one system call.
    /// Whatever is still held when the callback returns goes into its output (`releaseHeld`).
    var mayHold = false

    /// Calls `body` with the writer, emptied, then appends what it wrote to `output`; returns
    /// the head's size.
    @discardableResult
    func write(into output: OpaquePointer, _ body: (inout HeadWriter) -> Void) -> Int {
        write(body) { _ = evbuffer_add(output, $0.baseAddress, $0.count) }
    }

    /// `write(into:)` through the channel (`Channel.write`: sent at once where it can be), with
    /// `bytes` to follow the head, if any (valid only during the call): both go in one system
    /// call where the channel can send at once (`Channel.write(_:then:)`).
    @discardableResult
    func write(to channel: Channel, then bytes: UnsafeRawBufferPointer?, _ body: (inout HeadWriter) -> Void) -> Int {
        write(body) { head in
            if let bytes { channel.write(head, then: bytes) } else { channel.write(head) }
        }
    }

    /// Writes a response head and keeps it, for `exchange` to send with its body
    /// (`takeHeld`) or to have it appended to its output (`releaseHeld`).
    func writeHeld(for exchange: ServerExchange, _ body: (inout HeadWriter) -> Void) -> Int {
        let n = write(body) { _ in }  // (releases any head held before)
        heldFor = exchange
        return n
    }

    /// Calls `send` with the head held for `exchange` and forgets it.
    func takeHeld(for exchange: ServerExchange, _ send: (UnsafeRawBufferPointer) -> Void) {
        precondition(heldFor === exchange && !inUse, "HeadScratch: no head held for this exchange")
        heldFor = nil
        inUse = true
        defer { inUse = false }
        writer.withBytes(send)
    }

    /// Hands a held head to its exchange (`ServerExchange.releaseHeldHead`), if one is held.
    func releaseHeld() {
        guard let exchange = heldFor else { return }
        exchange.releaseHeldHead()
    }

    private func write(_ body: (inout HeadWriter) -> Void, then put: (UnsafeRawBufferPointer) -> Void) -> Int {
        precondition(!inUse, "HeadScratch: a head written while another is being written")
        releaseHeld()
        inUse = true
        defer { inUse = false }
        // A rare huge head does not keep its memory past the next head.
        if oversized { writer = HeadWriter(capacity: 4096) }
        writer.removeAll()
        body(&writer)
        let n = writer.withBytes { b in
            put(b)
            return b.count
        }
        oversized = n > 64 << 10
        return n
    }
}

/// A loop's spare request header buffers: a client connection hands its finished request's
/// headers back (`give`), and the next request head parsed on the loop, on any connection, is
/// parsed into them (`take`, `HeadersSpare(lending:)`) once nothing else holds them: no
/// allocation per request, and an idle connection holds none. At most `limit` are kept.
final class HeadersPool {
    private var free: ContiguousArray<HTTPHeaders> = []
    static let limit = 16

    init() { free.reserveCapacity(Self.limit) }

    func take() -> HTTPHeaders? { free.popLast() }

    func give(_ headers: HTTPHeaders) {
        if free.count < Self.limit && headers.isWorthKeeping { free.append(headers) }
    }
}
