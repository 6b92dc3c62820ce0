import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What systemd is to a `Type=notify` service: a unix datagram socket whose path goes into
/// the child's `NOTIFY_SOCKET`, and the messages (`READY=1`, `STOPPING=1`, ...) received on it.
public final class NotifySocket: @unchecked Sendable {
    // @unchecked: `fd` and `path` are immutable; `receive` is called from one test at a time.
    public let path: String
    private let fd: Int32

    /// Binds a datagram socket at `path` (at most 107 bytes, a unix socket address's limit).
    public init(path: String) throws {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else {
            throw HarnessError("notify socket path too long for a unix socket (\(bytes.count) bytes): \(path)")
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { $0.copyBytes(from: bytes) }
        let s = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard s >= 0 else { throw HarnessError("socket(AF_UNIX, SOCK_DGRAM): \(String(cString: strerror(errno)))") }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(s, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else {
            let err = String(cString: strerror(errno))
            close(s)
            throw HarnessError("cannot bind the notify socket at \(path): \(err)")
        }
        fd = s
        self.path = path
    }

    deinit {
        close(fd)
        unlink(path)
    }

    /// The next datagram's text, or nil if none comes within `timeout` seconds.
    public func receive(timeout: Double) -> String? {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&p, 1, Int32(max(0, timeout) * 1000)) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = recv(fd, &buffer, buffer.count, 0)
        guard n >= 0 else { return nil }
        return String(decoding: buffer[0..<n], as: UTF8.self)
    }

    /// Waits for a datagram with the line `line` (e.g. "READY=1") and returns it whole, with
    /// the datagrams received before it; throws, naming what came instead, after `timeout` s.
    public func expect(_ line: String, timeout: Double = 15) throws -> (message: String, before: [String]) {
        let deadline = Timing.now() + timeout
        var before: [String] = []
        while let m = receive(timeout: deadline - Timing.now()) {
            if m.split(separator: "\n").contains(Substring(line)) { return (m, before) }
            before.append(m)
        }
        throw HarnessError("no notification with '\(line)' within \(timeout) s; received instead: \(before)")
    }

    /// Every datagram that arrives within `seconds`.
    public func drain(for seconds: Double) -> [String] {
        let deadline = Timing.now() + seconds
        var out: [String] = []
        while let m = receive(timeout: deadline - Timing.now()) { out.append(m) }
        return out
    }
}
