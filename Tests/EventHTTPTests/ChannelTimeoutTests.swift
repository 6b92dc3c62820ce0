import EventHTTP
import Foundation
import Synchronization
import Testing
import TestSupport

/// The timeouts of a plain connection (SocketChannel): each fires after that long without
/// progress, and progress keeps pushing it back.
@Suite struct ChannelTimeoutTests {
    @Test func aClientThatStopsReadingIsClosedAfterTheWriteTimeout() throws {
        let big = [UInt8](repeating: 0x61, count: 32 << 20)
        let server = try LoopServer(limits: ServerLimits(writeTimeoutMs: 300)) { $0.respond(status: 200, body: big) }
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        defer { client.close() }
        try client.sendRequest("GET", "/")
        #expect(Timing.poll(timeout: 2) { server.openConnections == 1 })
        // Nothing is read: the socket buffers fill, and the response stalls for good.
        #expect(Timing.poll(timeout: 5) { server.openConnections == 0 })
    }

    @Test func aClientThatReadsLateWithinTheWriteTimeoutGetsTheWholeResponse() throws {
        let big = [UInt8](repeating: 0x62, count: 32 << 20)
        let server = try LoopServer(limits: ServerLimits(writeTimeoutMs: 3_000)) { $0.respond(status: 200, body: big) }
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        defer { client.close() }
        try client.sendRequest("GET", "/")
        Timing.sleep(1)
        #expect(server.openConnections == 1)
        let r = try client.readResponse()
        #expect(r.status == 200)
        #expect(r.body.count == big.count)
        #expect(r.body.allSatisfy { $0 == 0x62 })
    }

    @Test func anIdleKeptAliveConnectionIsClosedAfterTheIdleTimeout() throws {
        let server = try LoopServer(limits: ServerLimits(idleTimeoutMs: 300)) { $0.respond(status: 200, body: Array("ok".utf8)) }
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        defer { client.close() }
        // Requests 150 ms apart for 1.5 s: never idle for 300 ms, never closed.
        for i in 0..<10 {
            if i > 0 { Timing.sleep(0.15) }
            #expect(try client.request("GET", "/").status == 200)
        }
        let (closed, after) = Timing.measure { client.serverClosed(within: 3) }
        #expect(closed)
        #expect(after > 0.15)
    }
}
