import Foundation
import CLibevent  // SOCK_* resolve through it once Listener.swift uses them too (clang module ownership)
import Glibc

/// Tells a service manager (systemd, with `Type=notify`) how the process is doing: `READY=1`
/// once it serves, `RELOADING=1` and `READY=1` around a reload, `STOPPING=1` at shutdown.
///
/// This is `sd_notify(3)` written out rather than linked: the protocol is one datagram of
/// `KEY=VALUE` lines to the unix socket named by `$NOTIFY_SOCKET` (a path, or an abstract
/// address when it starts with `@`). libsystemd would be a run-time dependency (and a package
/// in `scripts/install-deps.sh` and the image) for these twenty lines, on machines where most
/// runs (a terminal, docker, the tests) have no service manager at all; without
/// `$NOTIFY_SOCKET` every call here is a no-op, as `sd_notify` is.
///
/// A send never blocks the caller: the socket is non-blocking, and a lost datagram is
/// harmless (systemd then times the start out, which the log explains). `$NOTIFY_SOCKET` is
/// read once, at init; the process starts no children, so it is left in the environment.
public final class ServiceNotifier: @unchecked Sendable {
    // @unchecked: `fd` and `address` are immutable after init; sendto(2) on one datagram
    // socket from several threads is safe.
    private let fd: Int32
    private let address: sockaddr_un
    private let addressLength: socklen_t
    /// Where the datagrams go, for logs ("@/org/..." for an abstract address).
    public let socketName: String

    /// The notifier `$NOTIFY_SOCKET` names, or nil when there is none (not run by systemd, or
    /// by a unit that is not `Type=notify`). Throws when the variable names an address no
    /// datagram can be sent to: a service manager that waits for `READY=1` would otherwise
    /// time the start out with nothing said.
    public init?(environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        guard let name = environment["NOTIFY_SOCKET"], !name.isEmpty else { return nil }
        guard name.hasPrefix("/") || name.hasPrefix("@") else {
            throw SocketError("NOTIFY_SOCKET '\(name)' is neither a path nor an abstract socket address ('@...')")
        }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(name.utf8)
        // An abstract address starts with a NUL byte, and its length counts exactly its bytes.
        if bytes[0] == UInt8(ascii: "@") { bytes[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: addr.sun_path)
        guard bytes.count < capacity else {
            throw SocketError("NOTIFY_SOCKET '\(name)' is longer than a unix socket address (\(capacity - 1) bytes)")
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { dst in
            dst.copyBytes(from: bytes)
        }
        let pathOffset = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)!
        addressLength = socklen_t(pathOffset + bytes.count + (bytes[0] == 0 ? 0 : 1))
        address = addr
        let s = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard s >= 0 else { throw SocketError("cannot open a socket for NOTIFY_SOCKET: \(String(cString: strerror(errno)))", code: errno) }
        fd = s
        socketName = name
    }

    deinit { close(fd) }

    /// Sends `READY=1`: the listeners accept and requests are served.
    public func ready(status: String? = nil) throws { try send(["READY=1"] + statusLine(status)) }

    /// Sends `RELOADING=1` with the monotonic clock's time, as systemd wants it (for
    /// `Type=notify-reload`, and for the reload state `systemctl status` shows); `ready()`
    /// must follow once the reload is over, whatever its outcome.
    public func reloading() throws {
        try send(["RELOADING=1", "MONOTONIC_USEC=\(Self.monotonicMicroseconds())"])
    }

    /// Sends `STOPPING=1`: the process stops accepting and finishes what is in flight.
    public func stopping() throws { try send(["STOPPING=1"]) }

    /// Sends one datagram of `KEY=VALUE` lines.
    public func send(_ lines: [String]) throws {
        let message = Array(lines.joined(separator: "\n").utf8)
        let sent = withUnsafePointer(to: address) { a in
            a.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                message.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), sa, addressLength) }
            }
        }
        guard sent == message.count else {
            let err = errno
            throw SocketError("cannot notify the service manager at NOTIFY_SOCKET '\(socketName)': \(String(cString: strerror(err)))", code: err)
        }
    }

    private func statusLine(_ status: String?) -> [String] {
        guard let status else { return [] }
        return ["STATUS=" + status.replacingOccurrences(of: "\n", with: " ")]
    }

    static func monotonicMicroseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000 + UInt64(ts.tv_nsec) / 1_000
    }
}
