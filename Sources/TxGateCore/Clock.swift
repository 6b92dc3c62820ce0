import Foundation

/// Wall-clock time for decisions, sessions and journeys. Injected, so that pure code is
/// tested at any instant and expiry is tested without sleeping.
public struct WallClock: Sendable {
    public let nowMs: @Sendable () -> Int64

    public init(nowMs: @escaping @Sendable () -> Int64) { self.nowMs = nowMs }

    public static let system = WallClock { Int64(Date().timeIntervalSince1970 * 1000) }

    /// Unix seconds.
    public var now: Int { Int(nowMs() / 1000) }
}
