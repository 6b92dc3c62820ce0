import Foundation
import Testing
import TestSupport

/// What the gateway removes and adds on the way through.
@Suite("Proxy headers", .testbed)
struct HeaderTests {
    @Test("hop-by-hop request headers do not reach the backend; end-to-end ones do")
    func hopByHopRequestHeadersAreStripped() throws {
        let bed = try Testbed.current
        let (gateway, _) = try bed.startGatewayWithBank()

        let r = try gateway.fetch("GET", "/echo", headers: [
            ("Connection", "X-Client-Private, keep-alive"),
            ("X-Client-Private", "x"),
            ("Keep-Alive", "300"),
            ("Proxy-Connection", "keep-alive"),
            ("TE", "trailers"),
            ("Upgrade", "websocket"),
            ("Proxy-Authorization", "Basic xx"),
            ("X-Custom", "1"),
        ])
        #expect(r.status == 200, "\(r)")
        let echo = try EchoedRequest(r)
        for name in ["X-Client-Private", "Keep-Alive", "Proxy-Connection", "TE", "Upgrade", "Proxy-Authorization"] {
            #expect(!echo.hasHeader(name), "\(name) reached the backend:\n\(echo)")
        }
        // The gateway may send a Connection header of its own, but not the client's.
        let connection = echo.headerValues("Connection").joined(separator: ",").lowercased()
        #expect(!connection.contains("x-client-private"), "client's Connection reached the backend:\n\(echo)")
        #expect(echo.headerValues("X-Custom") == ["1"], "X-Custom did not arrive once:\n\(echo)")
    }

    @Test("hop-by-hop response headers do not reach the client; end-to-end ones do")
    func hopByHopResponseHeadersAreStripped() throws {
        let bed = try Testbed.current
        let (gateway, bank) = try bed.startGatewayWithBank()

        // The backend really sends them (otherwise this test proves nothing).
        let direct = try RawHTTPClient.fetch(port: bank.port, "GET", "/hop")
        #expect(direct.header("X-Backend-Private") == "secret")

        let r = try gateway.fetch("GET", "/hop")
        #expect(r.status == 200, "\(r)")
        #expect(r.bodyText == #"{"hop":true}"#)
        #expect(!r.hasHeader("X-Backend-Private"), "\(r.headerSummary)")
        #expect(!r.hasHeader("Proxy-Connection"), "\(r.headerSummary)")
        #expect(!r.hasHeader("Upgrade"), "\(r.headerSummary)")
        #expect(!r.headerValues("Keep-Alive").contains("timeout=5"), "backend's Keep-Alive came through:\n\(r.headerSummary)")
        #expect(!r.headerTokens("Connection").contains("x-backend-private"), "backend's Connection came through:\n\(r.headerSummary)")
        #expect(r.header("X-Backend-Public") == "visible", "\(r.headerSummary)")
    }

    @Test("X-Forwarded-For, -Proto and -Host reach the backend")
    func forwardedHeaders() throws {
        let bed = try Testbed.current
        let (gateway, _) = try bed.startGatewayWithBank()

        let r = try gateway.fetch("GET", "/echo", headers: [("Host", "api.example.test:8443"),
                                                            ("X-Forwarded-For", "203.0.113.7")])
        #expect(r.status == 200, "\(r)")
        let echo = try EchoedRequest(r)
        // The client is not a trusted proxy (`trustedProxies`): its own X-Forwarded-For is dropped.
        #expect(echo.headerValues("X-Forwarded-For") == ["127.0.0.1"], "\(echo)")
        #expect(echo.headerValues("X-Forwarded-Proto") == ["http"], "\(echo)")
        #expect(echo.headerValues("X-Forwarded-Host") == ["api.example.test:8443"], "\(echo)")
        #expect(echo.headerValues("Host").count == 1, "\(echo)")

        // Without a client-supplied X-Forwarded-For, the client IP alone.
        let plain = try EchoedRequest(gateway.fetch("GET", "/echo"))
        #expect(plain.headerValues("X-Forwarded-For") == ["127.0.0.1"], "\(plain)")
        #expect(plain.headerValues("X-Forwarded-Host") == ["127.0.0.1:\(gateway.port)"], "\(plain)")
    }

    @Test("a client's X-Request-Id goes upstream and comes back")
    func clientRequestIdIsKept() throws {
        let bed = try Testbed.current
        let (gateway, _) = try bed.startGatewayWithBank()
        let id = "it-\(UUID().uuidString.lowercased())"

        let r = try gateway.fetch("GET", "/echo", headers: [("X-Request-Id", id)])
        #expect(r.status == 200, "\(r)")
        #expect(r.headerValues("X-Request-Id") == [id], "\(r.headerSummary)")
        #expect(try EchoedRequest(r).headerValues("X-Request-Id") == [id])

        // The access log names it too.
        let logged = Timing.poll(timeout: 3) {
            gateway.logLines().contains { $0["msg"] as? String == "access" && $0["request_id"] as? String == id }
        }
        #expect(logged, "no access log line with request_id \(id); stderr:\n\(gateway.process.stderrTail())")
    }

    @Test("without X-Request-Id the gateway generates one, sends it upstream and returns it")
    func requestIdIsGenerated() throws {
        let bed = try Testbed.current
        let (gateway, _) = try bed.startGatewayWithBank()

        let r = try gateway.fetch("GET", "/echo")
        #expect(r.status == 200, "\(r)")
        let upstream = try EchoedRequest(r).headerValues("X-Request-Id")
        #expect(upstream.count == 1, "\(upstream)")
        let id = try #require(upstream.first)
        #expect(!id.isEmpty)
        #expect(r.headerValues("X-Request-Id") == [id], "\(r.headerSummary)")

        let second = try EchoedRequest(gateway.fetch("GET", "/echo")).header("X-Request-Id")
        #expect(second != nil && second != id, "two requests got the same id \(id)")
    }

    @Test("an insane client X-Request-Id is replaced")
    func badRequestIdIsReplaced() throws {
        let bed = try Testbed.current
        let (gateway, _) = try bed.startGatewayWithBank()
        let bad = String(repeating: "a", count: 5000)

        let r = try gateway.fetch("GET", "/echo", headers: [("X-Request-Id", bad)])
        #expect(r.status == 200, "\(r.status)")
        let upstream = try EchoedRequest(r).headerValues("X-Request-Id")
        #expect(upstream.count == 1)
        #expect(upstream.first != bad && !(upstream.first ?? "").isEmpty)
        #expect(r.headerValues("X-Request-Id") == upstream)
    }

    @Test("one access log line per request, with method, path and status")
    func accessLogLine() throws {
        let bed = try Testbed.current
        let (gateway, _) = try bed.startGatewayWithBank()

        #expect(try gateway.fetch("GET", "/accounts").status == 200)
        #expect(try gateway.fetch("GET", "/nope").status == 404)
        var lines: [[String: Any]] = []
        Timing.poll(timeout: 3) {
            lines = gateway.logLines().filter { $0["msg"] as? String == "access" }
            return lines.count >= 2
        }
        #expect(lines.count == 2, "access lines: \(lines)")
        let first = try #require(lines.first)
        #expect(first["method"] as? String == "GET")
        #expect(first["path"] as? String == "/accounts")
        #expect((first["status"] as? NSNumber)?.intValue == 200)
        #expect(!((first["request_id"] as? String) ?? "").isEmpty)
        #expect((lines.last?["status"] as? NSNumber)?.intValue == 404)
        #expect(gateway.logLines().contains { $0["msg"] as? String == "listening" }, "no 'listening' log line")
    }
}
