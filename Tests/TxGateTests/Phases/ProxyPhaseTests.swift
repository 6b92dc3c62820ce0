import EventHTTP
import Foundation
import HTTPCore
import Synchronization
import Testing
import TestSupport
@testable import TxGate

/// The request's context answers its own upstream call (`RequestContext.proxying`): the call,
/// the exchange's callbacks and the resume token it keeps all hold the context while the
/// request is upstream, and none of them may keep it afterwards, however the request ends.
@Suite struct ProxyPhaseTests {
    /// The last request's context, held weakly: gone once nothing holds it. Read on the
    /// gateway's loop, so that the test never holds the context itself, even for a moment (its
    /// last release, and its deinit, stay on the loop).
    final class LastContext: @unchecked Sendable {
        private let lock = NSLock()
        private weak var ctx: RequestContext?
        private var seen = 0

        func track(_ c: RequestContext) { lock.withLock { ctx = c; seen += 1 } }

        func released(on loop: EventLoop) -> Bool {
            let answer = Mutex(false)
            let done = DispatchSemaphore(value: 0)
            loop.execute {
                self.lock.withLock { answer.withLock { $0 = self.seen > 0 && self.ctx == nil } }
                done.signal()
            }
            return done.wait(timeout: .now() + 2) == .success && answer.withLock { $0 }
        }
    }

    struct Track: RequestPhase {
        let last: LastContext
        func handle(_ ctx: RequestContext) -> PhaseStatus {
            last.track(ctx)
            return .next
        }
    }

    static func gateway(upstreamPort: Int, last: LastContext, responseTimeoutMs: Int = 2000) throws -> LoopServer {
        let endpoint = UpstreamEndpoint(address: try SocketAddress(host: "127.0.0.1", port: upstreamPort), tls: nil,
                                        tlsHost: "127.0.0.1", connectTimeoutMs: 1000, responseTimeoutMs: responseTimeoutMs,
                                        maxIdle: 8, idleTimeoutMs: 10_000)
        return try PhaseServer.start { loop in
            [Track(last: last), UpstreamRequestFilter(upstreamAuthority: "upstream", sessionCookieName: nil),
             ProxyPhase(pool: UpstreamPool(loop: loop, endpoint: endpoint), basePath: "")]
        }
    }

    @Test func aProxiedRequestsContextIsReleasedWhenItsResponseEnds() throws {
        let upstream = try LoopServer(limits: ServerLimits()) { ex in ex.respond(status: 200, body: Array("hello".utf8)) }
        defer { upstream.stop() }
        let last = LastContext()
        let gateway = try Self.gateway(upstreamPort: upstream.port, last: last)
        defer { gateway.stop() }
        let client = try RawHTTPClient(port: gateway.port)
        defer { client.close() }
        let response = try client.request("GET", "/a")
        #expect(response.status == 200)
        #expect(String(decoding: response.body, as: UTF8.self) == "hello")
        #expect(Timing.poll(timeout: 3) { last.released(on: gateway.loop) })
    }

    @Test func aFailedCallsContextIsReleased() throws {
        // Nothing listens there: the connection is refused.
        let port = try Ports.free()
        let last = LastContext()
        let gateway = try Self.gateway(upstreamPort: port, last: last)
        defer { gateway.stop() }
        let client = try RawHTTPClient(port: gateway.port)
        defer { client.close() }
        #expect(try client.request("GET", "/a").status == 502)
        #expect(Timing.poll(timeout: 3) { last.released(on: gateway.loop) })
    }

    @Test func theContextOfARequestWhoseClientLeftIsReleased() throws {
        // A head and part of a body, then nothing: the client gives up mid-response.
        let upstream = try RawUpstream(response: Array("HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\npartial".utf8))
        defer { upstream.stop() }
        let last = LastContext()
        let gateway = try Self.gateway(upstreamPort: upstream.port, last: last, responseTimeoutMs: 30_000)
        defer { gateway.stop() }
        let client = try RawHTTPClient(port: gateway.port)
        try client.send("GET /a HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(Timing.poll(timeout: 3) { upstream.receivedRequests.count == 1 })
        Thread.sleep(forTimeInterval: 0.2)
        #expect(!last.released(on: gateway.loop))
        // A reset: closed plainly with nothing unread, the gateway would see a half-close.
        client.reset()
        #expect(Timing.poll(timeout: 3) { last.released(on: gateway.loop) })
    }
}
