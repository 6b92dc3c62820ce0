import EventHTTP
import Foundation
import Testing
import TestSupport
import TxGateCore
@testable import TxGate

/// `CORSPhase` alone: preflights answered by the gateway, the listed origins' other requests
/// marked readable (with the challenge exposed), every other origin left as it is.
@Suite struct CORSPhaseTests {
    static let app = "https://app.example.com"

    static func server(credentials: Bool = false) throws -> LoopServer {
        let cors = CORSConfig(allowedOrigins: [app], allowCredentials: credentials, maxAgeS: 120)
        return try PhaseServer.start { _ in [CORSPhase(cors: cors), Report()] }
    }

    @Test func aRequestWithoutOriginIsLeftAlone() throws {
        let server = try Self.server()
        defer { server.stop() }
        let r = try RawHTTPClient.fetch(port: server.port, "GET", "/x")
        #expect(r.status == 200)
        #expect(!r.headers.contains { $0.name.lowercased().hasPrefix("access-control-") || $0.name == "Vary" }, "\(r.headerSummary)")
    }

    @Test func aListedOriginMayReadTheAnswerAndItsChallenge() throws {
        let server = try Self.server(credentials: true)
        defer { server.stop() }
        let r = try RawHTTPClient.fetch(port: server.port, "POST", "/transfer", headers: [("Origin", Self.app)], body: Array("{}".utf8))
        #expect(try Reported(r).method == "POST", "the request goes on")
        #expect(r.header("Access-Control-Allow-Origin") == Self.app)
        #expect(r.header("Access-Control-Allow-Credentials") == "true")
        #expect(r.header("Access-Control-Expose-Headers") == "WWW-Authenticate, X-Request-Id, Location")
        #expect(r.header("Vary") == "Origin")
    }

    @Test func anotherOriginGetsOnlyVary() throws {
        let server = try Self.server()
        defer { server.stop() }
        let r = try RawHTTPClient.fetch(port: server.port, "GET", "/x", headers: [("Origin", "https://evil.example")])
        #expect(r.status == 200)
        #expect(r.header("Vary") == "Origin")
        #expect(r.header("Access-Control-Allow-Origin") == nil && r.header("Access-Control-Expose-Headers") == nil, "\(r.headerSummary)")
    }

    @Test func aPreflightIsAnsweredHereWithWhatWasAskedFor() throws {
        let server = try Self.server()
        defer { server.stop() }
        let r = try RawHTTPClient.fetch(port: server.port, "OPTIONS", "/transfer", headers: [
            ("Origin", Self.app), ("Access-Control-Request-Method", "PUT"),
            ("Access-Control-Request-Headers", "content-type, x-authenticate-response"),
        ])
        #expect(r.status == 204, "\(r)")
        #expect(r.header("Access-Control-Allow-Origin") == Self.app)
        #expect(r.header("Access-Control-Allow-Credentials") == nil)
        #expect(r.header("Access-Control-Allow-Methods") == "PUT")
        #expect(r.header("Access-Control-Allow-Headers") == "content-type, x-authenticate-response")
        #expect(r.header("Access-Control-Max-Age") == "120")
        #expect(r.header("Cache-Control") == "no-store")
        #expect(r.body.isEmpty)
    }

    @Test func aPreflightAskingForSomethingThatIsNotATokenGetsTheDefaults() throws {
        let server = try Self.server()
        defer { server.stop() }
        let r = try RawHTTPClient.fetch(port: server.port, "OPTIONS", "/transfer", headers: [
            ("Origin", Self.app), ("Access-Control-Request-Method", "GE\"T"), ("Access-Control-Request-Headers", "a;b"),
        ])
        #expect(r.status == 204)
        #expect(r.header("Access-Control-Allow-Methods") == "GET, POST")
        #expect(r.header("Access-Control-Allow-Headers") == nil)
    }

    @Test func anotherOriginsPreflightIs403AndAnOPTIONSWithoutAMethodIsNoPreflight() throws {
        let server = try Self.server()
        defer { server.stop() }
        let r = try RawHTTPClient.fetch(port: server.port, "OPTIONS", "/x", headers: [
            ("Origin", "https://evil.example"), ("Access-Control-Request-Method", "POST"),
        ])
        #expect(r.status == 403 && r.bodyText.contains("is not in cors.allowedOrigins"), "\(r)")
        #expect(r.header("Vary") == "Origin" && r.header("Access-Control-Allow-Origin") == nil)
        let plain = try RawHTTPClient.fetch(port: server.port, "OPTIONS", "/x", headers: [("Origin", Self.app)])
        #expect(try Reported(plain).method == "OPTIONS", "an OPTIONS of the application's own goes on")
    }
}
