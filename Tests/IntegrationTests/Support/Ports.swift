import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Free TCP ports on 127.0.0.1 and connect() probes.
enum Ports {
    private static let lock = NSLock()
    /// Ports already handed out in this test run. Tests run in parallel and the gateway binds
    /// with SO_REUSEPORT, so two tests sharing a port would silently share a listener; never
    /// hand out the same port twice.
    nonisolated(unsafe) private static var handedOut: Set<Int> = []

    /// Binds port 0 on 127.0.0.1, reads the port back and closes the socket.
    static func free() throws -> Int {
        for _ in 0..<50 {
            let port = try bindEphemeral()
            lock.lock()
            let fresh = handedOut.insert(port).inserted
            lock.unlock()
            if fresh { return port }
        }
        throw HarnessError("could not find a free port on 127.0.0.1")
    }

    private static func bindEphemeral() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket(): \(errnoString())") }
        defer { close(fd) }
        var addr = loopback(port: 0)
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else { throw HarnessError("bind(127.0.0.1:0): \(errnoString())") }
        var bound = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let rc2 = withUnsafeMutablePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        guard rc2 == 0 else { throw HarnessError("getsockname(): \(errnoString())") }
        return Int(UInt16(bigEndian: bound.sin_port))
    }

    static func loopback(port: Int) -> sockaddr_in {
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        return addr
    }

    /// The result of one connect() attempt.
    enum Probe: Equatable {
        case accepted
        case refused
        case failed(Int32)
    }

    /// One blocking connect() to 127.0.0.1:port; the socket is closed right away.
    static func probe(_ port: Int) -> Probe {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return .failed(errno) }
        defer { close(fd) }
        var addr = loopback(port: port)
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if rc == 0 { return .accepted }
        return errno == ECONNREFUSED ? .refused : .failed(errno)
    }
}

/// Monotonic time helpers.
enum Timing {
    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    static func sleep(_ seconds: Double) {
        usleep(useconds_t(max(0, seconds) * 1_000_000))
    }

    /// Calls `body` every `interval` until it returns true or `timeout` passes; returns the last result.
    @discardableResult
    static func poll(timeout: Double, interval: Double = 0.02, _ body: () throws -> Bool) rethrows -> Bool {
        let deadline = now() + timeout
        while true {
            if try body() { return true }
            if now() >= deadline { return false }
            sleep(interval)
        }
    }

    /// Runs `body` and returns its result with the elapsed seconds.
    static func measure<T>(_ body: () throws -> T) rethrows -> (T, Double) {
        let start = now()
        let value = try body()
        return (value, now() - start)
    }
}
