import Foundation
import Synchronization
import TxGateCore

/// A wall clock that moves only when the test says so, for a gateway or a store run in the
/// test process (`Gateway(config:logger:clock:)`, `SQLiteStore(path:clock:)`): an expiry is
/// tested by moving the clock past it, not by sleeping, so a slow machine cannot change what
/// the test sees. Read from any thread (a store reads it on its own queue).
public final class ManualClock: Sendable {
    private let ms: Atomic<Int64>

    /// Starts at the real time by default, so that TOTP codes computed from the system's time
    /// are valid at first.
    public init(startMs: Int64 = Int64(Date().timeIntervalSince1970 * 1000)) {
        ms = Atomic(startMs)
    }

    /// The current time in epoch milliseconds.
    public var nowMs: Int64 { ms.load(ordering: .relaxed) }

    /// Unix seconds.
    public var now: Int { Int(nowMs / 1000) }

    /// The clock as a store reads it.
    public var read: @Sendable () -> Int64 { { [self] in nowMs } }

    /// The clock as the gateway reads it.
    public var wallClock: WallClock { WallClock(nowMs: read) }

    /// Moves the clock forward by `ms` milliseconds.
    public func advance(ms delta: Int64) {
        precondition(delta >= 0, "a clock does not go back")
        ms.add(delta, ordering: .relaxed)
    }

    /// Moves the clock forward by `seconds` (rounded to the millisecond).
    public func advance(seconds: Double) {
        advance(ms: Int64((seconds * 1000).rounded()))
    }

    /// Steps the clock back by `ms` milliseconds, as an operator or NTP stepping a clock that ran
    /// ahead does: for the tests of what a clock step must not undo.
    public func stepBack(ms delta: Int64) {
        precondition(delta >= 0)
        ms.subtract(delta, ordering: .relaxed)
    }
}
