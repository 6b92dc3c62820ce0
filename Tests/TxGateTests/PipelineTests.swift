import EventHTTP
import Foundation
import HTTPCore
import Logging
import Synchronization
import Testing
import TxGateCore
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

    /// The calls phases record, in order.
    final class Calls: Sendable {
        let seen = Mutex<[String]>([])
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

    /// A phase for some of the gateway's path families; records each call.
    struct Gated: RequestPhase {
        let name: String
        let appliesTo: PathFamily
        let calls: Calls
        func handle(_ ctx: RequestContext) -> PhaseStatus {
            calls.seen.withLock { $0.append(name + " " + ctx.path) }
            return .next
        }
    }

    /// Sets the path a query names (`?path=...`), as forward-auth puts the original request's there.
    struct SetsPath: RequestPhase {
        func handle(_ ctx: RequestContext) -> PhaseStatus {
            ctx.path = String(ctx.head.path)
            if let q = ctx.head.target.split(separator: "?", maxSplits: 1).dropFirst().first, q.hasPrefix("path=") {
                ctx.path = String(q.dropFirst(5))
            }
            return .next
        }
    }

    @Test func thePathIsPlacedInItsFamilyOnce() {
        for path in ["/-/", "/-/health", "/-/authz", "/-/metrics", "/-/x/y"] { #expect(PathFamily(path) == .gateway, "\(path)") }
        for path in ["/am", "/am/", "/am/json/realms/root/authenticate", "/.well-known/", "/.well-known/openid-configuration"] {
            #expect(PathFamily(path) == .auth, "\(path)")
        }
        for path in ["", "/", "/-", "/-x", "/amx", "/a/am", "/.well-known", "/.well-knownx/", "/api/-/x", "/AM/x"] {
            #expect(PathFamily(path) == .other, "\(path)")
        }
        #expect(PathFamily(ForwardAuthPhase.path) == .gateway)
        #expect(PathFamily(MetricsEndpointPhase.path) == .gateway)
        #expect(PathFamily(ApprovalPagePath.path) == .auth)
    }

    /// The loop calls a phase only for a path in its families, and a path set by a phase (as
    /// forward-auth sets the original request's) decides for the phases after it.
    @Test func phasesForOtherPathsAreNotCalled() throws {
        let calls = Calls()
        let server = try Self.server { _ in
            [SetsPath(),
             Gated(name: "gateway", appliesTo: .gateway, calls: calls),
             Gated(name: "auth", appliesTo: .auth, calls: calls),
             Gated(name: "both", appliesTo: [.gateway, .auth], calls: calls),
             Gated(name: "all", appliesTo: .all, calls: calls),
             Answer()]
        }
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        defer { client.close() }
        for target in ["/api", "/-/health", "/am/json", "/.well-known/x", "/-/authz?path=/am/x", "/-/authz?path=/api"] {
            #expect(try client.request("GET", target).status == 200)
        }
        #expect(calls.seen.withLock { $0 } == [
            "all /api",
            "gateway /-/health", "both /-/health", "all /-/health",
            "auth /am/json", "both /am/json", "all /am/json",
            "auth /.well-known/x", "both /.well-known/x", "all /.well-known/x",
            "auth /am/x", "both /am/x", "all /am/x",
            "all /api",
        ])
    }
}
