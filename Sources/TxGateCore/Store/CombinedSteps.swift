// Store steps that do what took several before: writes made all or none and the counter they
// move (`ConditionalWrite`, `CounterMove`), a raise and the keys that block it (`GuardedRaise`).

/// One write of `Store.writeAll`, made only if its condition holds (and only with the others).
public enum ConditionalWrite: Equatable, Sendable {
    /// Sets `key` only if it is absent (or expired), as `Store.create`.
    case create(String, value: [UInt8], ttlMs: Int)
    /// Replaces the value only if it equals `expected`, as `Store.compareAndSwap`; `ttlMs` nil
    /// keeps the expiry.
    case swap(String, expected: [UInt8], new: [UInt8], ttlMs: Int?)

    public var key: String {
        switch self {
        case .create(let key, _, _), .swap(let key, _, _, _): key
        }
    }

    /// What makes `writes` no valid `Store.writeAll`, checked before anything is sent: a key
    /// written twice, a time to live that is not positive.
    public static func problem(in writes: [ConditionalWrite]) -> String? {
        for (i, write) in writes.enumerated() {
            if writes[..<i].contains(where: { $0.key == write.key }) { return "writeAll: '\(write.key)' is written twice" }
            switch write {
            case .create(_, _, let ttlMs), .swap(_, _, _, let ttlMs?):
                if ttlMs <= 0 { return "writeAll '\(write.key)': ttlMs must be more than 0, got \(ttlMs)" }
            case .swap(_, _, _, nil): break
            }
        }
        return nil
    }
}

/// What `Store.writeAll` did.
public enum WriteOutcome: Equatable, Sendable {
    /// Every write was made, and the counter moved: its value after the move.
    case written(count: Int)
    /// The condition of the write of `key` (the first, in the order given, whose condition
    /// failed) did not hold: `found` is the live value there (nil: absent). Nothing was written
    /// or moved.
    case refused(key: String, found: [UInt8]?)
}

/// A counter (`Store.increment`'s) moved by the same store step as a write, and only when the
/// write is made (`Store.writeAll`, `Store.compareAndSwap(_:expected:new:ttlMs:audit:moving:on:_:)`):
/// a user's count of transactions waiting for approval goes up with the record and the index
/// entry a challenge writes and down with the approval, never one without the other, and
/// without a store step of its own.
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
