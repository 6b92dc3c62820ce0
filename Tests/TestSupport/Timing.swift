import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Monotonic time, and waiting for a condition instead of for a fixed time.
public enum Timing {
    public static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    public static func sleep(_ seconds: Double) {
        usleep(useconds_t(max(0, seconds) * 1_000_000))
    }

    /// Calls `body` every `interval` seconds until it returns true or `timeout` passes; returns the last result.
    @discardableResult
    public static func poll(timeout: Double, interval: Double = 0.02, _ body: () throws -> Bool) rethrows -> Bool {
        let deadline = now() + timeout
        while true {
            if try body() { return true }
            if now() >= deadline { return false }
            sleep(interval)
        }
    }

    /// Runs `body` and returns its result with the elapsed seconds.
    public static func measure<T>(_ body: () throws -> T) rethrows -> (T, Double) {
        let start = now()
        let value = try body()
        return (value, now() - start)
    }
}

/// Polls `condition` every 50 ms until it holds, or throws after `seconds` naming `what`.
public func eventually(_ seconds: Double, _ what: String, _ condition: () async throws -> Bool) async throws {
    let deadline = Timing.now() + seconds
    while Timing.now() < deadline {
        if try await condition() { return }
        try await Task.sleep(nanoseconds: 50_000_000)
    }
    throw HarnessError("\(what): not within \(seconds) s")
}

/// `Array(s.utf8)`.
public func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

/// Random bytes (not compressible, not text).
public func randomBytes(_ count: Int) -> [UInt8] {
    var rng = SystemRandomNumberGenerator()
    var out = [UInt8](repeating: 0, count: count)
    var i = 0
    while i < count {
        var word = rng.next() as UInt64
        for _ in 0..<8 where i < count {
            out[i] = UInt8(truncatingIfNeeded: word)
            word >>= 8
            i += 1
        }
    }
    return out
}
