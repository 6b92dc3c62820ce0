/// A value confined to one event loop, made Sendable so that it can travel through other
/// threads (a resolver queue, a store's worker) and come back: it may only be read or
/// changed on its loop, which is checked in debug builds (after swift-nio's `NIOLoopBound`).
// @unchecked Sendable: `value` is only reachable on `loop`'s thread (checked in debug builds).
public struct LoopBound<Value>: @unchecked Sendable {
    public let loop: EventLoop
    private var _value: Value

    /// Binds `value` to `loop`; call it on that loop.
    public init(_ value: Value, loop: EventLoop) {
        loop.preconditionInEventLoop()
        self.loop = loop
        _value = value
    }

    public var value: Value {
        get {
            loop.preconditionInEventLoop()
            return _value
        }
        set {
            loop.preconditionInEventLoop()
            _value = newValue
        }
    }

    /// Runs `work` with the value on its loop, from any thread.
    public func execute(_ work: @escaping (Value) -> Void) {
        let value = _value
        loop.execute { work(value) }
    }
}
