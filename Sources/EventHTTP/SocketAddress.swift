import Glibc
import CLibevent
import Foundation

/// A resolved IPv4/IPv6 address, ready for bind/connect.
public struct SocketAddress: CustomStringConvertible, Sendable {
    var storage = sockaddr_storage()
    var length: Int32 = 0
    public let host: String
    public let port: Int

    /// Resolves `host` (a name or a literal address) once. Called at start-up, never on the loop.
    public init(host: String, port: Int) throws {
        self.host = host
        self.port = port
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &result)
        guard rc == 0, let first = result else {
            throw SocketError("cannot resolve '\(host)': \(String(cString: gai_strerror(rc)))")
        }
        defer { freeaddrinfo(result) }
        // Prefer IPv4 when a name has both, to match what "localhost" means to most backends.
        var chosen = first
        var p: UnsafeMutablePointer<addrinfo>? = first
        while let a = p {
            if a.pointee.ai_family == AF_INET { chosen = a; break }
            p = a.pointee.ai_next
        }
        length = Int32(chosen.pointee.ai_addrlen)
        withUnsafeMutableBytes(of: &storage) { dst in
            dst.copyMemory(from: UnsafeRawBufferPointer(start: chosen.pointee.ai_addr, count: Int(length)))
        }
    }

    /// The address as a numeric string ("127.0.0.1", "::1"), for libraries that take one.
    public var numericHost: String {
        var buffer = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        let rc = withSockaddr { sa, len in
            getnameinfo(sa, socklen_t(len), &buffer, socklen_t(buffer.count), nil, 0, NI_NUMERICHOST)
        }
        return rc == 0 ? String(nulTerminated: buffer) : host
    }

    func withSockaddr<T>(_ body: (UnsafePointer<sockaddr>, Int32) -> T) -> T {
        withUnsafePointer(to: storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) }
        }
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// The numeric address of a peer, for logs and X-Forwarded-For.
    static func numericHost(_ addr: UnsafePointer<sockaddr>) -> String {
        var buf = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        switch Int32(addr.pointee.sa_family) {
        case AF_INET:
            addr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { a in
                var ip = a.pointee.sin_addr
                _ = inet_ntop(AF_INET, &ip, &buf, socklen_t(buf.count))
            }
        case AF_INET6:
            addr.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { a in
                var ip = a.pointee.sin6_addr
                _ = inet_ntop(AF_INET6, &ip, &buf, socklen_t(buf.count))
            }
        default: return "unknown"
        }
        return String(nulTerminated: buf)
    }
}

/// Fails, naming the address, when another socket already listens on `address`.
///
/// The servers bind with `SO_REUSEPORT`, under which a second process of the same user binds
/// the same port without a word and the kernel splits the connections between both. This
/// binds a throw-away socket without `SO_REUSEPORT` (with `SO_REUSEADDR`, as the servers do,
/// so connections of a previous instance in TIME_WAIT do not count) and closes it at once.
/// Call it before the servers bind. Port 0 (any free port) is never taken, so not probed.
public func probeListenAddress(_ address: SocketAddress) throws {
    guard address.port != 0 else { return }
    let fd = socket(Int32(address.storage.ss_family), Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw SocketError("cannot listen on \(address): \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    var one: Int32 = 1
    _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
    let rc = address.withSockaddr { sa, len in bind(fd, sa, socklen_t(len)) }
    guard rc != 0 else { return }
    let err = errno
    if err == EADDRINUSE {
        throw SocketError("cannot listen on \(address): address already in use (another process listens on it)", code: err)
    }
    throw SocketError("cannot listen on \(address): \(String(cString: strerror(err)))", code: err)
}

public struct SocketError: Error, CustomStringConvertible {
    public let description: String
    /// The `errno` behind it, when there was one.
    public let code: Int32?
    public init(_ description: String, code: Int32? = nil) {
        self.description = description
        self.code = code
    }

    /// The process (EMFILE) or the system (ENFILE) is out of file descriptors: nothing is wrong
    /// with the peer, and saying it refuses connections would send the operator the wrong way.
    public var isDescriptorExhaustion: Bool { code == EMFILE || code == ENFILE }
}

func setNoDelay(_ fd: Int32) {
    var one: Int32 = 1
    _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
}

extension String {
    /// The NUL-terminated C string a C call wrote into `buffer`.
    init(nulTerminated buffer: [CChar]) {
        self = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
}
