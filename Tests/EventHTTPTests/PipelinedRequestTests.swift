import EventHTTP
import Foundation
import HTTPCore
import Synchronization
import Testing
import TestSupport

/// Pipelined requests on one connection (issue 25): the end of one response never starts the
/// next request from inside the call that ended it, so the stack stays as deep for the
/// hundredth request as for the first, and the answers come back in order.
@Suite struct PipelinedRequestTests {
    /// Where the handler's frame is: the address of a local, a measure of the stack's depth.
    static func stackAddress() -> UInt {
        var marker = 0
        return withUnsafeMutablePointer(to: &marker) { UInt(bitPattern: $0) }
    }

    static func pipeline(_ n: Int, answer: @escaping (ServerExchange) -> Void) throws -> (depths: [UInt], bodies: [String]) {
        let depths = Mutex<[UInt]>([])
        let server = try LoopServer(limits: ServerLimits()) { ex in
            let here = Self.stackAddress()
            depths.withLock { $0.append(here) }
            answer(ex)
        }
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        defer { client.close() }
        // Every request in one write: all of them are buffered before the first is answered.
        try client.send((0..<n).map { "GET /\($0) HTTP/1.1\r\nHost: t\r\n\r\n" }.joined())
        var bodies: [String] = []
        for _ in 0..<n { bodies.append(String(decoding: try client.readResponse().body, as: UTF8.self)) }
        return (depths.withLock { $0 }, bodies)
    }

    @Test func aHundredRequestsAnsweredAtOnceRunAtTheSameDepth() throws {
        let (depths, bodies) = try Self.pipeline(100) { ex in ex.respond(status: 200, body: Array(ex.head.target.utf8)) }
        #expect(bodies == (0..<100).map { "/\($0)" })
        #expect(depths.count == 100)
        // Before: each answer started the next request inside it, some 2 KiB of stack a request deeper.
        let spread = (depths.max() ?? 0) - (depths.min() ?? 0)
        #expect(spread < 4096, "the handler ran \(spread) bytes of stack deeper for a later request")
    }

    @Test func aHundredRequestsAnsweredFromLoopCallbacksRunAtTheSameDepth() throws {
        let (depths, bodies) = try Self.pipeline(100) { ex in
            // Answered on a later turn of the loop, as a store or upstream callback does.
            ex.loop.execute { ex.respond(status: 200, body: Array(ex.head.target.utf8)) }
        }
        #expect(bodies == (0..<100).map { "/\($0)" })
        let spread = (depths.max() ?? 0) - (depths.min() ?? 0)
        #expect(spread < 4096, "the handler ran \(spread) bytes of stack deeper for a later request")
    }
}
