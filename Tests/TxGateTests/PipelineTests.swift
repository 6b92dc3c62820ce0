import EventHTTP
import Foundation
import HTTPCore
import Logging
import Synchronization
import Testing
import TestSupport
@testable import TxGate

/// The request loop (issue 25 item 1): phases return what they decided, an asynchronous one
/// answers through its resume token exactly once, and the stack stays flat however many
/// phases run or requests are pipelined.
@Suite struct PipelineTests {
    /// Where the caller's frame is: the address of a local, a measure of the stack's depth.
    static func stackAddress() -> UInt {
        var marker = 0
        return withUnsafeMutablePointer(to: &marker) { UInt(bitPattern: $0) }
    }

    final class Depths: Sendable {
        let seen = Mutex<[UInt]>([])
    }

    /// Records the stack depth it runs at, then goes on.
    struct Probe: RequestPhase {
        let depths: Depths
        func handle(_ ctx: RequestContext) -> PhaseStatus {
            let here = PipelineTests.stackAddress()
            depths.seen.withLock { $0.append(here) }
            return .next
        }
    }

    struct Next: RequestPhase {
        func handle(_ ctx: RequestContext) -> PhaseStatus { .next }
    }

    /// Goes on from a later turn of the loop, as a store lookup does.
    struct Later: RequestPhase {
        let loop: EventLoop
        func handle(_ ctx: RequestContext) -> PhaseStatus {
            ctx.suspend { resume in
                var resume = Optional(resume)
                loop.execute { resume.take()?.next() }
            }
        }
    }

    /// Uses its token before returning (a lookup answered from memory).
    struct AtOnce: RequestPhase {
        func handle(_ ctx: RequestContext) -> PhaseStatus {
            ctx.suspend { $0.next() }
        }
    }

    /// Lets go of its token without answering (a bug).
    struct Forgets: RequestPhase {
        let loop: EventLoop
        func handle(_ ctx: RequestContext) -> PhaseStatus {
            ctx.suspend { resume in
                var resume = Optional(resume)
                loop.execute { _ = resume.take() }
            }
        }
    }

    struct Answer: RequestPhase {
        func handle(_ ctx: RequestContext) -> PhaseStatus {
            .reply(LocalReply(status: 200, body: Array(ctx.target.utf8), details: .gatewayEndpoint))
        }
    }

    static func server(_ phases: @escaping (EventLoop) -> [RequestPhase]) throws -> LoopServer {
        try PhaseServer.start(phases)
    }

    @Test func aHundredPhasesAndPipelinedRequestsRunAtOneDepth() throws {
        let depths = Depths()
        let server = try Self.server { loop in
            [Probe(depths: depths)] + Array(repeating: Next(), count: 50) + [AtOnce(), Later(loop: loop)]
                + Array(repeating: Next(), count: 50) + [Probe(depths: depths), Answer()]
        }
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        defer { client.close() }
        try client.send((0..<100).map { "GET /\($0) HTTP/1.1\r\nHost: t\r\n\r\n" }.joined())
        var bodies: [String] = []
        for _ in 0..<100 { bodies.append(String(decoding: try client.readResponse().body, as: UTF8.self)) }
        #expect(bodies == (0..<100).map { "/\($0)" })
        let seen = depths.seen.withLock { $0 }
        #expect(seen.count == 200)
        // Before: each phase called the next (some hundreds of bytes a phase), each answer the next request.
        let spread = (seen.max() ?? 0) - (seen.min() ?? 0)
        #expect(spread < 8192, "a later phase or request ran \(spread) bytes of stack deeper")
    }

    @Test func aPhaseThatLetsGoOfItsTokenFailsTheRequestInsteadOfLeavingItWaiting() throws {
        let server = try Self.server { loop in [Forgets(loop: loop), Answer()] }
        defer { server.stop() }
        let r = try RawHTTPClient.fetch(port: server.port, "GET", "/x")
        #expect(r.status == 500)
        #expect(String(decoding: r.body, as: UTF8.self).contains("let go of the request without answering"), "\(String(decoding: r.body, as: UTF8.self))")
    }

    @Test func anEndpointsFirstAnswerCountsAndASecondIsIgnored() throws {
        struct TwoAnswers: RequestPhase {
            func handle(_ ctx: RequestContext) -> PhaseStatus {
                ctx.suspend { resume in
                    let call = EndpointCall(ctx, resume)
                    call.respondJSON(status: 201, #"{"first":true}"#)
                    call.respondJSON(status: 202, #"{"second":true}"#)
                }
            }
        }
        let server = try Self.server { _ in [TwoAnswers(), Answer()] }
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        defer { client.close() }
        let first = try client.request("GET", "/a")
        #expect(first.status == 201 && String(decoding: first.body, as: UTF8.self) == #"{"first":true}"#)
        // The connection goes on with the next request as usual.
        let again = try client.request("GET", "/b")
        #expect(again.status == 201)
    }
}
