import EventHTTP
import Foundation
import Testing
import TestSupport
import TxGateCore
@testable import TxGate

/// `CanonicalRequestPhase` alone: one `Host`, one normalized path that every later phase and
/// the upstream see, the query kept as it came.
@Suite struct CanonicalRequestPhaseTests {
    static func server(_ paths: PathsConfig = PathsConfig()) throws -> LoopServer {
        try PhaseServer.start { _ in [CanonicalRequestPhase(paths: paths), Report()] }
    }

    @Test func thePathIsNormalizedAndTheQueryKeptAsItCame() throws {
        let server = try Self.server()
        defer { server.stop() }
        let r = try Reported(RawHTTPClient.fetch(port: server.port, "GET", "/a/./b/../c//%7Euser;v=1/?x=%2F&y=a/../b"))
        #expect(r.path == "/a/c/~user/")
        #expect(r.target == "/a/c/~user/?x=%2F&y=a/../b")
        // A path that is already normal (the fast path): the target as it came.
        for (target, path) in [("/accounts/transfer?x=%2F&y=a/../b", "/accounts/transfer"), ("/", "/"), ("/a/b/", "/a/b/"),
                               ("/a?", "/a")] {
            let plain = try Reported(RawHTTPClient.fetch(port: server.port, "GET", target))
            #expect(plain.path == path && plain.target == target, "\(target): \(plain.path) \(plain.target)")
        }
    }

    @Test func anAbsoluteFormTargetIsReadAsItsPathAndQuery() throws {
        let server = try Self.server()
        defer { server.stop() }
        for (target, path, normalized) in [("http://example.com/a/../b?q=1", "/b", "/b?q=1"), ("http://example.com", "/", "/"),
                                           ("http://example.com?q=1", "/", "/?q=1")] {
            let r = try Reported(RawHTTPClient.fetch(port: server.port, "GET", target))
            #expect(r.path == path && r.target == normalized, "\(target): \(r.path) \(r.target)")
        }
    }

    @Test func aRequestNeedsExactlyOneHostAnHTTP10OneNone() throws {
        let server = try Self.server()
        defer { server.stop() }
        let two = try RawHTTPClient.fetch(port: server.port, "GET", "/", headers: [("Host", "a"), ("host", "b")])
        #expect(two.status == 400 && two.bodyText.contains("the request has 2 Host headers"), "\(two)")
        let client = try RawHTTPClient(port: server.port)
        defer { client.close() }
        try client.send("GET /x HTTP/1.1\r\n\r\n")
        let none = try client.readResponse()
        #expect(none.status == 400 && none.bodyText.contains("needs a Host header"), "\(none)")
        let old = try RawHTTPClient(port: server.port)
        defer { old.close() }
        try old.send("GET /x HTTP/1.0\r\n\r\n")
        #expect(try Reported(old.readResponse()).path == "/x")
    }

    @Test func anEncodedSlashIsRefusedUnlessKept() throws {
        let refusing = try Self.server()
        defer { refusing.stop() }
        let refused = try RawHTTPClient.fetch(port: refusing.port, "GET", "/a%2Fb")
        #expect(refused.status == 400 && refused.bodyText.contains("the request path is refused"), "\(refused)")
        let keeping = try Self.server(PathsConfig(encodedSlash: .keep))
        defer { keeping.stop() }
        #expect(try Reported(RawHTTPClient.fetch(port: keeping.port, "GET", "/a%2Fb")).path == "/a%2Fb")
    }

    @Test func aClimbAboveTheRootIsRefused() throws {
        let server = try Self.server()
        defer { server.stop() }
        for target in ["/../etc/passwd", "/a/..;/b"] {
            let r = try RawHTTPClient.fetch(port: server.port, "GET", target)
            #expect(r.status == 400, "\(target):\n\(r)")
        }
    }

    @Test func theOriginFormOfATarget() {
        #expect(CanonicalRequestPhase.originForm("/a?b") == "/a?b")
        #expect(CanonicalRequestPhase.originForm("https://h:8443/p/q?x") == "/p/q?x")
        #expect(CanonicalRequestPhase.originForm("https://h?x") == "/?x")
        #expect(CanonicalRequestPhase.originForm("https://h") == "/")
        #expect(CanonicalRequestPhase.originForm("h/p") == nil)
        #expect(CanonicalRequestPhase.originForm("*") == nil)
    }
}
