import EventHTTP
import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The listener (Listener, HTTPServer): how many connections one loop turn takes, what the
/// accepted sockets are, and a port it cannot have.
@Suite struct ListenerTests {
    /// `n` clients connected to `port`; the kernel completes the connections before any accept.
    static func connect(_ n: Int, to port: Int) throws -> [RawHTTPClient] {
        try (0..<n).map { _ in try RawHTTPClient(port: port) }
    }

    @Test("a TLS server takes one connection a loop turn, a plain one takes what is waiting")
    func connectionsPerTurn() throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let made = try TestCertificate(in: folder)
        let tls = try TLSContext.server(certificateFile: made.cert, privateKeyFile: made.key)
        let loop = EventLoop()
        let address = try SocketAddress(host: "127.0.0.1", port: 0)
        let make = { (tls: TLSContext?) in
            try HTTPServer(loop: loop, address: address, tls: tls, limits: ServerLimits(maxConnectionsPerClient: 0),
                           errorBody: { _, m in ("text/plain", Array(m.utf8)) }, handler: { _ in })
        }
        let secure = try make(tls)
        let plain = try make(nil)
        let clients = try Self.connect(3, to: secure.boundPort) + Self.connect(3, to: plain.boundPort)
        defer { clients.forEach { $0.close() } }

        // Each handshake costs a quarter of a millisecond: requests already read must not wait
        // behind every new connection's handshake at once.
        var taken: [Int] = []
        for _ in 0..<4 {
            loop.turn()
            taken.append(secure.connectionCount)
        }
        #expect(taken == [1, 2, 3, 3], "TLS connections open after each turn: \(taken)")
        #expect(plain.connectionCount == 3, "a plain server took \(plain.connectionCount) of 3 waiting connections")
        secure.closeAll()
        plain.closeAll()
    }

    @Test("accepted sockets are non-blocking and close-on-exec")
    func acceptedSocketFlags() throws {
        let loop = EventLoop()
        var accepted: [Int32] = []
        let listener = try Listener(loop: loop, address: SocketAddress(host: "127.0.0.1", port: 0), backlog: 16, acceptsPerTurn: 4,
                                    onAccept: { fd, _ in accepted.append(fd) }, onError: { e in Issue.record("accept failed: \(e)") })
        let clients = try Self.connect(2, to: listener.port)
        defer { clients.forEach { $0.close() } }
        loop.turn()
        #expect(accepted.count == 2)
        for fd in accepted {
            #expect(fcntl(fd, F_GETFL) & O_NONBLOCK != 0, "socket \(fd) blocks")
            #expect(fcntl(fd, F_GETFD) & FD_CLOEXEC != 0, "socket \(fd) is inherited by a child process")
            Glibc.close(fd)
        }
        listener.close()
    }

    @Test("servers share a port (SO_REUSEPORT); a port held without it is named in the error")
    func sharedAndTakenPorts() throws {
        let loop = EventLoop()
        let first = try Listener(loop: loop, address: SocketAddress(host: "127.0.0.1", port: 0), backlog: 16, acceptsPerTurn: 1,
                                 onAccept: { fd, _ in Glibc.close(fd) }, onError: { _ in })
        let second = try Listener(loop: loop, address: SocketAddress(host: "127.0.0.1", port: first.port), backlog: 16,
                                  acceptsPerTurn: 1, onAccept: { fd, _ in Glibc.close(fd) }, onError: { _ in })
        #expect(second.port == first.port)
        first.close()
        second.close()

        // A socket bound without SO_REUSEPORT (another program) keeps the port.
        let other = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { Glibc.close(other) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(other, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        #expect(bound == 0 && listen(other, 1) == 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(other, $0, &length) } }
        let port = Int(UInt16(bigEndian: address.sin_port))
        do {
            _ = try Listener(loop: loop, address: SocketAddress(host: "127.0.0.1", port: port), backlog: 16, acceptsPerTurn: 1,
                             onAccept: { fd, _ in Glibc.close(fd) }, onError: { _ in })
            Issue.record("a second listener took port \(port), held without SO_REUSEPORT")
        } catch {
            #expect("\(error)" == "cannot listen on 127.0.0.1:\(port): Address already in use", "\(error)")
        }
    }
}
