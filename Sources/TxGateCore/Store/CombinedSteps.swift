// Store steps that do what took two before: a write and the counter it moves
// (`CounterMove`), a raise and the keys that block it (`GuardedRaise`).

/// A counter (`Store.increment`'s) moved by the same store step as a write, and only when the
/// write is made (`Store.create(_:value:ttlMs:moving:on:_:)`,
/// `Store.compareAndSwap(_:expected:new:ttlMs:audit:moving:on:_:)`): a user's count of
/// transactions waiting for approval goes up with the index entry a challenge claims and down
/// with the approval, never one without the other, and without a store step of its own.
public enum CounterMove: Equatable, Sendable {
    /// Adds 1, as `increment`: a counter that is absent (or expired) starts at 1 and expires
    /// after `ttlMs`; a live one keeps its expiry.
    case up(String, ttlMs: Int)
    /// Lowers by 1, as `decrement`: never below 0, keeping its expiry. A counter that is absent,
    /// at 0 or not a number is left as it is, and the value after the move is given as 0.
    case down(String)

    /// The counter's key.
    public var key: String {
        switch self {
        case .up(let key, _), .down(let key): key
        }
    }
}

/// What `Store.raise(_:to:unlessPresent:on:_:)` did.
public enum GuardedRaise: Equatable, Sendable {
    /// The number was raised (or set: the key was absent).
    case raised
    /// The number kept is the value or more: nothing changed.
    case notHigher
    /// One of the guard keys is there (live): nothing was read or changed.
    case blocked
}
