import EventHTTP
import Foundation
import HTTPCore
import Synchronization
import Testing
import TestSupport

/// TLS on EventHTTP's own socket channel (issue 29: `SSL_read`/`SSL_write` on the channel's
/// events, one record per write, in place of `bufferevent_openssl`). Both sides are EventHTTP's
/// here: an `HTTPServer` with TLS, and an `UpstreamPool` that verifies its certificate. Bodies
/// cross record boundaries (16 KiB), fill the socket while the other side's loop is blocked (so
/// that writes stop half-way and resume), and come back byte for byte.
@Suite struct TLSChannelTests {
    /// Bytes that differ from one offset to the next, so that a lost, doubled or reordered
    /// record shows in the comparison.
    static func pattern(_ n: Int, seed: Int) -> [UInt8] {
        (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ ($0 >> 9) &+ seed) }
    }

    final class Fixture: Sendable {
        let folder: TemporaryDirectory
        /// The server's certificate (PEM file), self-signed: the clients' CA file.
        let certificate: String
        let server: LoopServer

        init(_ handler: @escaping (ServerExchange) -> Void) throws {
            folder = try TemporaryDirectory()
            let made = try TestCertificate(in: folder)
            certificate = made.cert
            let tls = try TLSContext.server(certificateFile: made.cert, privateKeyFile: made.key)
            server = try LoopServer(limits: ServerLimits(maxBodyBytes: 16 << 20, maxConnectionsPerClient: 0), tls: tls, handler)
        }

        func stop() {
            server.stop()
            folder.remove()
        }
    }

    /// Sends `requests` one after another through one TLS pool to the fixture's server;
    /// `beforeEach` runs on the client's loop just after each request is handed to the pool.
    static func send(_ requests: [UpstreamRequest], to fixture: Fixture, caFile: String? = nil, maxIdle: Int = 4,
                     beforeEach: @escaping @Sendable () -> Void = {}) throws -> [String] {
        let loop = EventLoop()
        let endpoint = UpstreamEndpoint(address: try SocketAddress(host: "127.0.0.1", port: fixture.server.port),
                                        tls: try TLSContext.client(caFile: caFile ?? fixture.certificate),
                                        tlsHost: "localhost", connectTimeoutMs: 2000, responseTimeoutMs: 10_000, maxIdle: maxIdle)
        let results = Mutex<[String]>([])
        let finished = DispatchSemaphore(value: 0)
        Thread { loop.run(); finished.signal() }.start()
        loop.execute {
            let pool = UpstreamPool(loop: loop, endpoint: endpoint)
            func next(_ i: Int) {
                guard i < requests.count else {
                    pool.closeIdle()
                    loop.stop()
                    return
                }
                BufferedCall.send(requests[i], on: pool, deadlineMs: 10_000, maxBytes: 16 << 20) { r in
                    let text: String
                    switch r {
                    case .success(let resp): text = "\(resp.head.status) \(resp.body.count) \(Self.digest(resp.body))"
                    case .failure(let f): text = "failed: \(f)"
                    }
                    results.withLock { $0.append(text) }
                    next(i + 1)
                }
                beforeEach()
            }
            next(0)
        }
        guard finished.wait(timeout: .now() + 30) == .success else { throw HarnessError("the client loop did not finish") }
        return results.withLock { $0 }
    }

    /// A cheap order-sensitive checksum (FNV-1a), printed in the results.
    static func digest(_ bytes: [UInt8]) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in bytes { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        return h
    }

    static func get(_ target: String) -> UpstreamRequest {
        var h = HTTPHeaders()
        h.add("Host", "localhost")
        return UpstreamRequest(method: "GET", target: target, headers: h, body: nil)
    }

    static func post(_ bytes: [UInt8]) -> UpstreamRequest {
        var h = HTTPHeaders()
        h.add("Host", "localhost")
        h.add("Content-Length", "\(bytes.count)")
        return UpstreamRequest(method: "POST", target: "/echo", headers: h, body: Body(bytes))
    }

    struct ResponseCase: CustomTestStringConvertible, Sendable {
        let size: Int
        /// The client's loop sleeps this long after sending: the server's response fills the
        /// socket and its `SSL_write` must wait and be repeated.
        let stallMs: Int
        var testDescription: String { "\(size) bytes" + (stallMs > 0 ? ", client stalled \(stallMs) ms" : "") }
    }

    @Test(arguments: [
        ResponseCase(size: 0, stallMs: 0),
        ResponseCase(size: 1, stallMs: 0),
        ResponseCase(size: 16_383, stallMs: 0),
        ResponseCase(size: 16_384, stallMs: 0),
        ResponseCase(size: 16_385, stallMs: 0),
        ResponseCase(size: 65_543, stallMs: 0),
        ResponseCase(size: 3 << 20 | 5, stallMs: 0),
        ResponseCase(size: 6 << 20 | 3, stallMs: 300),
    ])
    func aResponseBodyArrivesWhole(_ c: ResponseCase) throws {
        let fixture = try Fixture { ex in
            let size = Int(ex.head.target.dropFirst()) ?? 0
            ex.respond(status: 200, body: Self.pattern(size, seed: size))
        }
        defer { fixture.stop() }
        // Twice on one connection: the second response follows a first that may have stalled.
        let results = try Self.send([Self.get("/\(c.size)"), Self.get("/\(c.size)")], to: fixture) {
            if c.stallMs > 0 { Thread.sleep(forTimeInterval: Double(c.stallMs) / 1000) }
        }
        let expected = "200 \(c.size) \(Self.digest(Self.pattern(c.size, seed: c.size)))"
        #expect(results == [expected, expected])
    }

    struct RequestCase: CustomTestStringConvertible, Sendable {
        let size: Int
        /// The server's loop sleeps this long as the request goes out: the client's request
        /// body fills the socket and its `SSL_write` must wait and be repeated.
        let serverStallMs: Int
        var testDescription: String { "\(size) bytes" + (serverStallMs > 0 ? ", server stalled \(serverStallMs) ms" : "") }
    }

    @Test(arguments: [
        RequestCase(size: 0, serverStallMs: 0),
        RequestCase(size: 1, serverStallMs: 0),
        RequestCase(size: 16_384, serverStallMs: 0),
        RequestCase(size: 100_003, serverStallMs: 0),
        RequestCase(size: 4 << 20 | 1, serverStallMs: 300),
    ])
    func aRequestBodyIsEchoedWhole(_ c: RequestCase) throws {
        let fixture = try Fixture { ex in
            ex.whenBodyComplete { ok in
                guard ok else { return }
                ex.respond(status: 200, body: ex.body.bytes)
            }
        }
        defer { fixture.stop() }
        let body = Self.pattern(c.size, seed: 11)
        let server = fixture.server
        let results = try Self.send([Self.post(body), Self.post(body)], to: fixture) {
            if c.serverStallMs > 0 { server.loop.execute { Thread.sleep(forTimeInterval: Double(c.serverStallMs) / 1000) } }
        }
        let expected = "200 \(c.size) \(Self.digest(body))"
        #expect(results == [expected, expected])
    }

    @Test func aClientThatDoesNotTrustTheCertificateFailsWithOpenSSLsReason() throws {
        let fixture = try Fixture { ex in ex.respond(status: 200, body: []) }
        defer { fixture.stop() }
        let other = try TemporaryDirectory()
        defer { other.remove() }
        let stranger = try TestCertificate(in: other)
        let results = try Self.send([Self.get("/")], to: fixture, caFile: stranger.cert)
        #expect(results.count == 1)
        #expect(results.first?.hasPrefix("failed: ") == true, "\(results)")
        #expect(results.first?.contains("certificate verify failed") == true, "\(results)")
        // The server saw the handshake fail and let the connection go.
        #expect(Timing.poll(timeout: 2) { fixture.server.openConnections == 0 })
    }

    @Test func plainHTTPOnTheTLSPortIsClosedWithoutAnAnswer() throws {
        let fixture = try Fixture { ex in ex.respond(status: 200, body: Array("proxied".utf8)) }
        defer { fixture.stop() }
        let client = try RawHTTPClient(port: fixture.server.port)
        defer { client.close() }
        try client.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(client.serverClosed(within: 2))
        #expect(Timing.poll(timeout: 2) { fixture.server.openConnections == 0 })
    }

    /// Python's `ssl` module as the client: every request in one write, the last one asking to
    /// close; what comes back up to the end of the stream, which must be a `close_notify`
    /// (a bare close raises SSLEOFError with `suppress_ragged_eofs=False`).
    static let pipelineClient = """
        import socket, ssl, sys
        port, n, ca = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
        ctx = ssl.create_default_context(cafile=ca)
        s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost",
                            suppress_ragged_eofs=False)
        reqs = "".join(f"GET /{i} HTTP/1.1\\r\\nHost: t\\r\\n\\r\\n" for i in range(n))
        s.sendall((reqs + "GET /last HTTP/1.1\\r\\nHost: t\\r\\nConnection: close\\r\\n\\r\\n").encode())
        data = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        except ssl.SSLEOFError:
            data += b"<no close_notify>"
        sys.stdout.buffer.write(data)
        """

    /// The bodies of the responses in `wire`, in order (Content-Length framing), and what
    /// follows the last one.
    static func bodies(_ wire: [UInt8]) -> (bodies: [String], rest: String) {
        var out: [String] = []
        var i = 0
        let sep: [UInt8] = Array("\r\n\r\n".utf8)
        while i < wire.count {
            guard let end = (i...(wire.count - sep.count)).first(where: { Array(wire[$0..<($0 + 4)]) == sep }) else { break }
            let head = String(decoding: wire[i..<end], as: UTF8.self).lowercased()
            guard head.hasPrefix("http/1.1 200"),
                  let line = head.split(separator: "\r\n").first(where: { $0.hasPrefix("content-length:") }),
                  let n = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)),
                  end + 4 + n <= wire.count else { break }
            out.append(String(decoding: wire[(end + 4)..<(end + 4 + n)], as: UTF8.self))
            i = end + 4 + n
        }
        return (out, String(decoding: wire[i...], as: UTF8.self))
    }

    @Test(arguments: [1, 10, 200])
    func pipelinedRequestsAreAnsweredInOrderAndTheCloseIsClean(_ n: Int) throws {
        let fixture = try Fixture { ex in
            // Every other answer on a later turn of the loop, as an upstream's would be.
            if ex.head.target.hasSuffix("1") || ex.head.target.hasSuffix("3") {
                ex.loop.execute { ex.respond(status: 200, body: Array(ex.head.target.utf8)) }
            } else {
                ex.respond(status: 200, body: Array(ex.head.target.utf8))
            }
        }
        defer { fixture.stop() }
        guard let python = BinaryLocator.onPath("python3")?.path else {
            Issue.record("python3 is needed for this test")
            return
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: python)
        p.arguments = ["-c", Self.pipelineClient, "\(fixture.server.port)", "\(n)", fixture.certificate]
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let wire = [UInt8](out.fileHandleForReading.readDataToEndOfFile())
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        #expect(p.terminationStatus == 0, "\(stderr)")
        let (bodies, rest) = Self.bodies(wire)
        #expect(bodies == (0..<n).map { "/\($0)" } + ["/last"])
        #expect(rest == "", "after the last response: \(rest)")
    }
}
