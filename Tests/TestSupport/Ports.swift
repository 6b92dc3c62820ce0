import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Free TCP ports on 127.0.0.1, connect() probes, and sockets that listen without answering.
public enum Ports {
    private static let lock = NSLock()
    /// Ports already handed out in this test run. Tests run in parallel and the gateway binds
    /// with SO_REUSEPORT, so two tests sharing a port would silently share a listener; never
    /// hand out the same port twice.
    nonisolated(unsafe) private static var handedOut: Set<Int> = []

    /// A port nothing listens on: binds port 0 on 127.0.0.1, reads the port back and closes the socket.
    public static func free() throws -> Int {
        for _ in 0..<50 {
            let fd = try boundSocket()
            defer { close(fd) }
            let port = try self.port(of: fd)
            let fresh = lock.withLock { handedOut.insert(port).inserted }
            if fresh { return port }
        }
        throw HarnessError("could not find a free port on 127.0.0.1")
    }

    /// A socket listening on 127.0.0.1 that accepts nothing: connections complete (the kernel
    /// queues them) but no byte ever comes back, like a hung server. Close the descriptor when done.
    public static func silentListener() throws -> (fd: Int32, port: Int) {
        let fd = try boundSocket()
        guard listen(fd, 16) == 0 else { close(fd); throw HarnessError("listen(): \(errnoString())") }
        return (fd, try port(of: fd))
    }

    public static func loopback(port: Int) -> sockaddr_in {
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        return addr
    }

    /// The result of one connect() attempt.
    public enum Probe: Equatable, Sendable {
        case accepted
        case refused
        case failed(Int32)
    }

    /// One blocking connect() to 127.0.0.1:port; the socket is closed right away.
    public static func probe(_ port: Int) -> Probe {
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

    /// One connect() to 127.0.0.1:port; true if accepted.
    public static func accepts(_ port: Int) -> Bool { probe(port) == .accepted }

    private static func boundSocket() throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket(): \(errnoString())") }
        var addr = loopback(port: 0)
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else { close(fd); throw HarnessError("bind(127.0.0.1:0): \(errnoString())") }
        return fd
    }

    private static func port(of fd: Int32) throws -> Int {
        var bound = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let rc = withUnsafeMutablePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        guard rc == 0 else { throw HarnessError("getsockname(): \(errnoString())") }
        return Int(UInt16(bigEndian: bound.sin_port))
    }
}
