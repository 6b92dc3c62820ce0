import EventHTTP
import Foundation
import Logging
import Testing
import TestSupport
import TxGateCore
import TxGateStore
@testable import TxGate

/// `GatewayEndpointsPhase` alone: `/-/health` (the store's ping), `/-/ready` (the background
/// checks of the upstream and the store), and nothing else under `/-/`, which is never proxied.
@Suite struct GatewayEndpointsPhaseTests {
    /// The phase with its readiness checks (started at once) of the upstream at `upstreamPort`
    /// and of `store`.
    static func server(store: Store? = nil, upstreamPort: Int) throws -> LoopServer {
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let upstream = UpstreamEndpoint(address: try SocketAddress(host: "127.0.0.1", port: upstreamPort), tls: nil, tlsHost: "127.0.0.1",
                                        connectTimeoutMs: 1_000, responseTimeoutMs: 1_000, maxIdle: 1)
        return try PhaseServer.start { loop in
            let readiness = Readiness(loop: loop, upstream: upstream, store: store, intervalMs: 60_000, worker: 0, logger: logger)
            loop.execute { readiness.start() }
            return [Given { $0.path = String($0.head.target.prefix { $0 != "?" }) },
                    GatewayEndpointsPhase(store: store, loop: loop, workers: 3, readiness: readiness, logger: logger), Report()]
        }
    }

    /// An upstream that accepts connections (readiness only connects).
    static func upstream() throws -> LoopServer {
        try LoopServer(limits: ServerLimits()) { $0.respond(status: 200, body: []) }
    }

    static func store(_ folder: TemporaryDirectory) throws -> SQLiteStore {
        try SQLiteStore(path: folder.path("store.db"))
    }

    @Test func healthSaysTheVersionAndWhetherTheStoreAnswers() throws {
        let upstream = try Self.upstream()
        defer { upstream.stop() }
        let stateless = try Self.server(upstreamPort: upstream.port)
        defer { stateless.stop() }
        let ok = try RawHTTPClient.fetch(port: stateless.port, "GET", "/-/health")
        #expect(ok.status == 200 && ok.bodyText == #"{"status":"ok","version":"\#(TxGateVersion.current)","workers":3}"#, "\(ok)")

        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let store = try Self.store(folder)
        let stateful = try Self.server(store: store, upstreamPort: upstream.port)
        defer { stateful.stop() }
        let up = try RawHTTPClient.fetch(port: stateful.port, "GET", "/-/health")
        #expect(up.status == 200 && up.bodyText.hasSuffix(#""store":"up"}"#), "\(up)")
        store.close()
        let down = try RawHTTPClient.fetch(port: stateful.port, "HEAD", "/-/health")
        #expect(down.status == 503, "\(down)")
        let body = try RawHTTPClient.fetch(port: stateful.port, "GET", "/-/health")
        #expect(body.bodyText.hasPrefix(#"{"status":"degraded""#) && body.bodyText.hasSuffix(#""store":"down"}"#), "\(body)")
    }

    @Test func readyFollowsTheUpstreamAndTheStore() throws {
        let upstream = try Self.upstream()
        defer { upstream.stop() }
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let ready = try Self.server(store: try Self.store(folder), upstreamPort: upstream.port)
        defer { ready.stop() }
        var r = try RawHTTPClient.fetch(port: ready.port, "GET", "/-/ready")
        #expect(Timing.poll(timeout: 5) {
            r = (try? RawHTTPClient.fetch(port: ready.port, "GET", "/-/ready")) ?? r
            return r.status == 200
        }, "\(r)")
        #expect(r.bodyText.hasPrefix(#"{"status":"ready""#) && r.bodyText.hasSuffix(#""upstream":"up","store":"up"}"#), "\(r)")

        let nobody = try Ports.free()
        let notReady = try Self.server(upstreamPort: nobody)
        defer { notReady.stop() }
        var n = try RawHTTPClient.fetch(port: notReady.port, "GET", "/-/ready")
        #expect(Timing.poll(timeout: 5) {
            n = (try? RawHTTPClient.fetch(port: notReady.port, "GET", "/-/ready")) ?? n
            return n.bodyText.contains(#""upstream":"down""#)
        }, "\(n)")
        #expect(n.status == 503 && n.bodyText.hasPrefix(#"{"status":"not ready""#), "\(n)")
    }

    @Test func nothingElseUnderTheGatewaysPrefixAndOnlyGETOrHEAD() throws {
        let upstream = try Self.upstream()
        defer { upstream.stop() }
        let server = try Self.server(upstreamPort: upstream.port)
        defer { server.stop() }
        let unknown = try RawHTTPClient.fetch(port: server.port, "GET", "/-/status")
        #expect(unknown.status == 404 && unknown.bodyText.contains("no gateway endpoint at /-/status"), "\(unknown)")
        let post = try RawHTTPClient.fetch(port: server.port, "POST", "/-/health", body: [])
        #expect(post.status == 405, "\(post)")
        #expect(try Reported(RawHTTPClient.fetch(port: server.port, "GET", "/health")).path == "/health", "not under /-/: goes on")
    }
}
