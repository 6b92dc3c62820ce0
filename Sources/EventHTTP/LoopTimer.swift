import CLibevent

/// A one-shot timer on a loop. Re-arming replaces the previous deadline.
public final class LoopTimer {
    private let loop: EventLoop
    private var event: OpaquePointer?
    private let callback: () -> Void

    public init(loop: EventLoop, _ callback: @escaping () -> Void) {
        loop.preconditionInEventLoop()
        self.loop = loop
        self.callback = callback
        event = event_new(loop.base, -1, 0, { _, _, arg in
            let timer = Unmanaged<LoopTimer>.fromOpaque(arg!).takeUnretainedValue()
            timer.callback()
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    public func schedule(afterMs ms: Int) {
        loop.preconditionInEventLoop()
        var tv = timeval(milliseconds: ms)
        event_add(event, &tv)
    }

    public func cancel() {
        loop.preconditionInEventLoop()
        event_del(event)
    }

    deinit { event_free(event) }
}

/// A libevent signal event on the main loop.
public final class SignalWatcher {
    private var event: OpaquePointer?
    private let handler: (Int32) -> Void
    private let signal: Int32

    public init(loop: EventLoop, signal: Int32, _ handler: @escaping (Int32) -> Void) {
        loop.preconditionInEventLoop()
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

extension timeval {
    init(milliseconds ms: Int) {
        self.init(tv_sec: ms / 1000, tv_usec: (ms % 1000) * 1000)
    }
}
