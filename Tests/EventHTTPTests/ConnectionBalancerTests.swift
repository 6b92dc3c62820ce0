import EventHTTP
import Foundation
import HTTPCore
import Testing
import TestSupport

/// Servers of one group (`ConnectionBalancer`) share out the connections they accept: a server
/// that accepts one while another holds fewer hands it over to that one's loop.
///
/// Each server listens on a port of its own here, so that the kernel's choice (a hash, with a
/// shared port) plays no part: every connection arrives at the first server, and how many the
/// other ends up with is the balancing alone. Both loops are turned by hand on this thread.
@Suite struct ConnectionBalancerTests {
    final class Group {
        let loops = [EventLoop(), EventLoop()]
        let balancer = ConnectionBalancer()
        var servers: [HTTPServer] = []
        /// Requests each server answered.
        var served = [0, 0]

        init(tls: TLSContext? = nil) throws {
            for (i, loop) in loops.enumerated() {
                servers.append(try HTTPServer(loop: loop, address: SocketAddress(host: "127.0.0.1", port: 0), tls: tls,
                                              limits: ServerLimits(maxConnectionsPerClient: 0), balancer: balancer,
                                              errorBody: { _, m in ("text/plain", Array(m.utf8)) },
                                              handler: { [unowned self] ex in
                                                  served[i] += 1
                                                  ex.respond(status: 200, headers: HTTPHeaders(), body: Array("hi".utf8))
                                              }))
            }
        }

        /// Turns both loops until `done` holds, for at most `seconds`.
        func turn(within seconds: Double = 5, until done: () -> Bool) {
            let deadline = Date().addingTimeInterval(seconds)
            while !done() && Date() < deadline {
                loops.forEach { $0.turn() }
                usleep(500)
            }
        }

        /// Turns both loops for a while (what is ready, and what that makes ready).
        func settle() {
            for _ in 0..<20 {
                loops.forEach { $0.turn() }
                usleep(500)
            }
        }

        var open: [Int] { servers.map(\.connectionCount) }

        func close() { servers.forEach { $0.closeAll() } }
    }

    @Test("connections accepted by one server are shared out evenly, and served where they go")
    func sharedOutEvenly() throws {
        let group = try Group()
        defer { group.close() }
        let clients = try ListenerTests.connect(6, to: group.servers[0].boundPort)
        defer { clients.forEach { $0.close() } }
        group.turn { group.open.reduce(0, +) == 6 }
        // Alone, the first server would hold all six.
        #expect(group.open == [3, 3], "connections per server: \(group.open)")
        #expect(group.balancer.counts == [3, 3], "counted per server: \(group.balancer.counts)")

        // Each connection is served, on whichever loop it went to.
        for client in clients { try client.sendRequest("GET", "/") }
        for client in clients {
            group.settle()
            let response = try client.readResponse()
            #expect(response.status == 200 && response.bodyText == "hi", "\(response)")
        }
    }

    @Test("a closed connection is no longer counted, and the next one goes to the server with the fewest")
    func closedConnectionsUncounted() throws {
        let group = try Group()
        defer { group.close() }
        var clients = try ListenerTests.connect(4, to: group.servers[0].boundPort)
        defer { clients.forEach { $0.close() } }
        group.turn { group.open.reduce(0, +) == 4 }
        #expect(group.open == [2, 2])

        // Every connection closed: both counts back to zero.
        clients.forEach { $0.close() }
        group.turn { group.open == [0, 0] }
        #expect(group.open == [0, 0] && group.balancer.counts == [0, 0], "\(group.open), counted \(group.balancer.counts)")

        // Two connections to the second server: the first stays there (all even), the second goes
        // to the first server, which holds none.
        clients = try ListenerTests.connect(2, to: group.servers[1].boundPort)
        group.turn { group.open.reduce(0, +) == 2 }
        #expect(group.open == [1, 1], "connections per server: \(group.open)")
    }

    @Test("a server that has begun to drain gets no connections, and one handed over meanwhile is closed")
    func drainingServerGetsNone() throws {
        let group = try Group()
        defer { group.close() }
        // Handed over, then the server it went to drains before it takes it: closed, uncounted.
        let early = try ListenerTests.connect(2, to: group.servers[0].boundPort)
        defer { early.forEach { $0.close() } }
        group.loops[0].turn()
        #expect(group.open == [1, 0] && group.balancer.counts == [1, 1], "\(group.open), counted \(group.balancer.counts)")
        var drained = false
        group.servers[1].beginDrain { drained = true }
        #expect(drained)
        group.settle()
        #expect(early[1].serverClosed(within: 2), "the connection handed to a draining server is still open")
        #expect(group.open == [1, 0] && group.balancer.counts == [1, 0], "\(group.open), counted \(group.balancer.counts)")
        early[0].close()
        group.turn { group.open == [0, 0] }

        let clients = try ListenerTests.connect(3, to: group.servers[0].boundPort)
        defer { clients.forEach { $0.close() } }
        group.turn { group.open[0] == 3 }
        #expect(group.open == [3, 0], "connections per server: \(group.open)")
        #expect(group.balancer.counts == [3, 0])
        for client in clients {
            try client.sendRequest("GET", "/")
            group.settle()
            #expect(try client.readResponse().status == 200)
        }
    }

    @Test("over TLS, a connection handed over does its handshake on the server it went to")
    func handedOverWithTLS() throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let made = try TestCertificate(in: folder)
        let group = try Group(tls: try TLSContext.server(certificateFile: made.cert, privateKeyFile: made.key))
        defer { group.close() }
        let port = group.servers[0].boundPort
        // A connection that stays silent keeps the first server at one.
        let silent = try RawHTTPClient(port: port)
        defer { silent.close() }
        group.turn { group.open == [1, 0] }
        #expect(group.open == [1, 0])
        // curl's connection arrives at the first server too, which hands it over.
        let curl = Process()
        curl.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        curl.arguments = ["-sk", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}", "https://127.0.0.1:\(port)/"]
        let out = Pipe()
        curl.standardOutput = out
        try curl.run()
        group.turn(within: 15) { !curl.isRunning }
        curl.waitUntilExit()
        let code = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(code == "200", "curl: \(code)")
        #expect(group.served == [0, 1], "requests answered per server: \(group.served)")
    }
}
