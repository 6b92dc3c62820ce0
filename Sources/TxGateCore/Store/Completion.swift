/// A completion on its way back to the executor of the caller that asked, through another
/// thread (a store's thread, an email lane): Sendable, so that it may travel there.
// @unchecked Sendable: `done` is never called here, only handed to `executor.execute`, which
// runs it on the caller's executor (the CallbackExecutor contract); `Value` is Sendable.
public struct Completion<Value: Sendable>: @unchecked Sendable {
    public let executor: CallbackExecutor
    private let done: (Value) -> Void

    public init(on executor: CallbackExecutor, _ done: @escaping (Value) -> Void) {
        self.executor = executor
        self.done = done
    }

    /// Runs the completion with `value` on its executor.
    public func callAsFunction(_ value: Value) {
        let done = self.done
        executor.execute { done(value) }
    }
}
