import Foundation

/// A failure of the test harness itself (a binary missing, a process that would not start, a
/// socket call that failed), with a message that says what to do about it.
public struct HarnessError: Error, CustomStringConvertible {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}

/// Why a raw socket read or write did not complete.
public enum SocketFailure: Error, CustomStringConvertible, Equatable {
    /// Nothing arrived within the receive timeout.
    case timedOut(String)
    /// The peer closed the connection before a complete message arrived.
    case closedEarly(String)
    /// The peer reset the connection (ECONNRESET / EPIPE).
    case reset(String)
    /// Some other errno.
    case system(String)

    public var description: String {
        switch self {
        case .timedOut(let s): return "timed out: \(s)"
        case .closedEarly(let s): return "connection closed early: \(s)"
        case .reset(let s): return "connection reset: \(s)"
        case .system(let s): return "socket error: \(s)"
        }
    }
}

public func errnoString(_ e: Int32 = errno) -> String {
    String(cString: strerror(e))
}
