import Foundation
import Testing
import TestSupport

/// The second security review's request-layer findings (issue 23, items 4, 6, 7, 8 and two of
/// 10), as a client sees them on the wire: each test failed on the gateway before the fix.
@Suite("Trust review: request hardening", .testbed)
struct TrustReviewHardeningTests {
    static let ok = Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8)

    /// `/public/**` open to anyone, `/secret/**` only for demo, in front of `upstream`.
    static func pathConfig(_ extra: [String: Any] = [:]) -> [String: Any] {
        deepMerge(AuthTests.authConfig([
            "loginJourney": "Login",
            "policies": [
                ["name": "public", "resources": ["/public/**"], "actions": ["GET"], "subjects": "anyone"],
                ["name": "secret", "resources": ["/secret/**"], "actions": ["GET"], "subjects": ["demo"]],
            ],
        ]), extra)
    }

    /// The request lines the upstream received.
    static func requestLines(_ upstream: RawUpstream) -> [String] {
        upstream.receivedRequests.map { $0.components(separatedBy: "\r\n").first ?? $0 }
    }
}

// MARK: item 4: path parameters (`;`)

extension TrustReviewHardeningTests {
    @Test("a dot segment with parameters (..;, ..;x, ..%3B, .;) is a 400 and never reaches the backend")
    func dotSegmentsWithParametersAreRefused() throws {
        let bed = try Testbed.current
        let upstream = try RawUpstream(response: Self.ok)
        defer { upstream.stop() }
        let g = try bed.startGateway(upstream: upstream.url, config: Self.pathConfig())
        for target in ["/public/..;/secret/x", "/public/a/..;/..;/secret/x", "/public/..;x/secret/x",
                       "/public/..%3B/secret/x", "/public/..%3b/secret/x", "/public/%2e%2e;/secret/x", "/public/.;x/a"] {
            let r = try g.fetch("GET", target)
            expectGatewayError(r, 400)
            #expect(r.bodyText.contains("parameters"), "\(target): \(r.bodyText)")
        }
        #expect(upstream.receivedRequests.isEmpty, "\(upstream.receivedRequests)")
    }

    @Test("policies match each segment without its parameters, and the backend gets that same path")
    func parametersAreStrippedForPoliciesAndBackend() throws {
        let bed = try Testbed.current
        let upstream = try RawUpstream(response: Self.ok)
        defer { upstream.stop() }
        let g = try bed.startGateway(upstream: upstream.url, config: Self.pathConfig())
        #expect(try g.fetch("GET", "/public/a;v=1/b;jsessionid=x?q=1").status == 200)
        #expect(try g.fetch("GET", "/public;x/file").status == 200, "the public policy applies to /public;x/file")
        // /secret;x/data is /secret/data for the policy: an anonymous client is sent to log in
        // (no 403 for a path no policy names).
        let secret = try g.fetch("GET", "/secret;x/data")
        #expect(secret.status == 307, "\(secret)")
        #expect(secret.header("Location")?.contains("goto=") == true, "\(secret)")
        #expect(Self.requestLines(upstream) == ["GET /public/a/b?q=1 HTTP/1.1", "GET /public/file HTTP/1.1"])
    }

    @Test("paths.semicolon: reject refuses every ';', keep passes it through")
    func semicolonOption() throws {
        let bed = try Testbed.current
        let upstream = try RawUpstream(response: Self.ok)
        defer { upstream.stop() }
        let rejecting = try bed.startGateway(upstream: upstream.url, config: Self.pathConfig(["paths": ["semicolon": "reject"]]))
        let r = try rejecting.fetch("GET", "/public/a;v=1")
        expectGatewayError(r, 400)
        #expect(r.bodyText.contains("';'"), "\(r.bodyText)")
        #expect(upstream.receivedRequests.isEmpty)

        let keeping = try bed.startGateway(upstream: upstream.url, config: Self.pathConfig(["paths": ["semicolon": "keep"]]))
        #expect(try keeping.fetch("GET", "/public/a;v=1/b").status == 200)
        expectGatewayError(try keeping.fetch("GET", "/public/..;/secret/x"), 400)
        #expect(Self.requestLines(upstream) == ["GET /public/a;v=1/b HTTP/1.1"])

        let bad = try bed.check(configText: #"{"upstream": {"url": "http://127.0.0.1:1"}, "paths": {"semicolon": "strip-all"}}"#)
        #expect(bad.status != 0)
        #expect((bad.stdout + bad.stderr).contains("paths.semicolon"), "\(bad)")
    }
}

// MARK: item 6: metrics to the resolved client

extension TrustReviewHardeningTests {
    @Test("metrics.allowFrom checks the client a trusted proxy relays for, on every spelling of the path")
    func metricsCheckTheResolvedClient() throws {
        let bed = try Testbed.current
        let bank = try bed.startDemoBank()
        // The proxy (127.0.0.2) is itself inside allowFrom, as nginx on loopback is by default.
        let g = try bed.startGateway(upstream: bank.url, config: [
            "trustedProxies": ["127.0.0.2/32"], "metrics": ["allowFrom": ["127.0.0.0/30", "192.0.2.0/24"]],
        ])
        for path in ["/-/metrics", "/-//metrics", "/-/./metrics", "/-/%6detrics", "/am/../-/metrics"] {
            // Relayed by the trusted proxy for a client outside allowFrom: refused.
            let relayed = try g.fetch("GET", path, headers: [("X-Forwarded-For", "6.6.6.6")], source: "127.0.0.2")
            expectGatewayError(relayed, 403)
            #expect(!relayed.bodyText.contains("txgate_"), "\(path)")
            expectGatewayError(try g.fetch("GET", path, headers: [("X-Forwarded-For", "6.6.6.6:1234")], source: "127.0.0.2"), 403)
            expectGatewayError(try g.fetch("GET", path, headers: [("X-Forwarded-For", "unknown")], source: "127.0.0.2"), 403)
            // Relayed for a client inside allowFrom, and direct from one: served.
            let allowed = try g.fetch("GET", path, headers: [("X-Forwarded-For", "192.0.2.9")], source: "127.0.0.2")
            #expect(allowed.status == 200, "\(path): \(allowed)")
            #expect(allowed.bodyText.contains("txgate_requests_total"), "\(path)")
            #expect(try g.fetch("GET", path).status == 200, "\(path)")
            // A client that is no trusted proxy cannot claim an allowed address.
            expectGatewayError(try g.fetch("GET", path, headers: [("X-Forwarded-For", "127.0.0.1")], source: "127.0.0.9"), 403)
        }
    }
}

// MARK: item 7: client headers the backend may trust

extension TrustReviewHardeningTests {
    @Test("the gateway's identity header, route overrides and client-address headers from the client are dropped")
    func trustedHeadersAreDropped() throws {
        let (g, _) = try Testbed.current.startGatewayWithBank()
        let dropped = ["X-TxGate-User", "X-Original-URL", "X-Rewrite-URL", "X-Real-IP", "True-Client-IP", "X-Client-IP"]
        let r = try g.fetch("GET", "/echo", headers: [
            ("X-TxGate-User", "admin"), ("X-Original-URL", "/admin"), ("X-Rewrite-URL", "/admin"),
            ("X-Real-IP", "10.0.0.1"), ("True-Client-IP", "10.0.0.1"), ("X-Client-IP", "10.0.0.1"),
            ("x-txgate-user", "root"), ("X-Custom", "kept"),
        ])
        #expect(r.status == 200, "\(r)")
        let echo = try EchoedRequest(r)
        for name in dropped { #expect(!echo.hasHeader(name), "\(name) reached the backend:\n\(echo)") }
        #expect(echo.headerValues("X-Custom") == ["kept"], "\(echo)")
        #expect(echo.headerValues("X-Forwarded-For") == ["127.0.0.1"], "\(echo)")
    }
}

// MARK: item 8: chunked framing

extension TrustReviewHardeningTests {
    @Test("a bare LF or CR in a chunk extension or a trailer line is a 400")
    func bareLineEndsInChunkedFramingAreRefused() throws {
        let (g, _) = try Testbed.current.startGatewayWithBank()
        let head = "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        for body in ["5;a\nb\r\nhello\r\n0\r\n\r\n", "5;a\rb\r\nhello\r\n0\r\n\r\n",
                     "5\r\nhello\r\n0\r\nX: y\n\r\n\r\n", "5\r\nhello\r\n0\r\nX: y\rZ: z\r\n\r\n"] {
            let c = try g.connect()
            defer { c.close() }
            try c.send(head + body)
            let r = try c.readResponse(method: "POST")
            expectGatewayError(r, 400)
            #expect(r.bodyText.contains("chunk"), "\(body.debugDescription): \(r.bodyText)")
        }
        // Extensions and trailers that are well formed are still fine.
        let c = try g.connect()
        defer { c.close() }
        try c.send(head + "5;a=b\r\nhello\r\n0\r\nX-Trailer: y\r\n\r\n")
        let fine = try c.readResponse(method: "POST")
        #expect(fine.status == 200, "\(fine)")
        #expect(try EchoedRequest(fine).body == Array("hello".utf8))
    }
}

// MARK: item 10: X-Forwarded-For with ports or `unknown`; empty lines before a request line

extension TrustReviewHardeningTests {
    @Test("X-Forwarded-For entries with a port name the client, not the proxy; unknown is nobody's address")
    func forwardedForPortsAndUnknown() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: AuthTests.authConfig([
            "trustedProxies": ["127.0.0.2/32"],
            "security": ["maxFailedAttempts": 2, "lockoutWindowS": 60, "lockoutDurationS": 60],
        ]))
        func client(_ xff: String) throws -> String? {
            let r = try g.fetch("GET", "/echo", headers: [("X-Forwarded-For", xff)], source: "127.0.0.2")
            #expect(r.status == 200, "\(r)")
            return try OperatingTests.accessLine(g, r)["client"] as? String
        }
        #expect(try client("6.6.6.6:1234") == "6.6.6.6")
        #expect(try client("[2001:db8::1]:80") == "2001:db8::1")
        #expect(try client("198.51.100.7:443, 127.0.0.2:8080") == "198.51.100.7")
        #expect(try client("unknown") == "unknown")
        #expect(try client("198.51.100.7, unknown") == "unknown")

        // Each client behind the proxy has its own lockout: two clients with ports are two.
        func login(_ password: String, client: String) throws -> HTTPResponse {
            let xff = [("X-Forwarded-For", client)]
            let step = try AuthTests.post(g, AuthTests.authPath, nil, headers: xff, source: "127.0.0.2").json()
            return try AuthTests.post(g, AuthTests.authPath, AuthTests.answer(step, ["demo", password]), headers: xff, source: "127.0.0.2")
        }
        for _ in 0..<2 { #expect(try login("wrong", client: "198.51.100.7:5555").status == 401) }
        #expect(try login(AuthTests.password, client: "198.51.100.7:5556").status == 401, "locked out")
        #expect(try login(AuthTests.password, client: "198.51.100.8:5555").status == 200, "another client is not locked out")
        // Clients the proxy cannot name share no lockout bucket: failures from one do not lock out the others.
        for _ in 0..<2 { #expect(try login("wrong", client: "unknown").status == 401) }
        #expect(try login(AuthTests.password, client: "unknown").status == 200)
    }

    @Test("empty lines before a request line are ignored, up to a bound")
    func emptyLinesBeforeTheRequestLine() throws {
        let (g, _) = try Testbed.current.startGatewayWithBank()
        let c = try g.connect()
        defer { c.close() }
        try c.send("\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try c.readResponse().status == 200)
        // After a body, as old clients send it: the next request on the connection still works.
        try c.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi\r\n")
        #expect(try c.readResponse(method: "POST").status == 200)
        try c.send("\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try c.readResponse().status == 200)

        // Arriving one by one, split between reads.
        let slow = try g.connect()
        defer { slow.close() }
        try slow.send("\r")
        Thread.sleep(forTimeInterval: 0.05)
        try slow.send("\n\r\n")
        Thread.sleep(forTimeInterval: 0.05)
        try slow.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try slow.readResponse().status == 200)

        // Not without bound.
        let many = try g.connect()
        defer { many.close() }
        try many.send(String(repeating: "\r\n", count: 1000) + "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        let r = try many.readResponse()
        expectGatewayError(r, 400)
        #expect(r.bodyText.contains("empty lines"), "\(r.bodyText)")
    }
}

// MARK: item 10: header bytes that are not UTF-8

extension TrustReviewHardeningTests {
    @Test("header values that are not UTF-8 reach the backend as the bytes received")
    func nonUTF8HeaderBytesAreForwardedAsReceived() throws {
        let bed = try Testbed.current
        let upstream = try RawUpstream(response: Self.ok)
        defer { upstream.stop() }
        let g = try bed.startGateway(upstream: upstream.url)
        let c = try g.connect()
        defer { c.close() }
        // Latin-1 "café" (obs-text, RFC 9110 §5.5) and a lone continuation byte.
        try c.send(Array("GET /x HTTP/1.1\r\nHost: x\r\nX-Name: caf".utf8) + [0xE9] + Array("\r\nX-Odd: a".utf8) + [0x80, 0x62]
                   + Array("\r\n\r\n".utf8))
        #expect(try c.readResponse().status == 200)
        let received = try #require(upstream.receivedRequestBytes.first)
        func contains(_ needle: [UInt8]) -> Bool {
            received.count >= needle.count && (0...(received.count - needle.count)).contains { Array(received[$0..<($0 + needle.count)]) == needle }
        }
        #expect(contains(Array("X-Name: caf".utf8) + [0xE9, 0x0D, 0x0A]), "\(upstream.receivedRequests)")
        #expect(contains(Array("X-Odd: a".utf8) + [0x80, 0x62, 0x0D, 0x0A]), "\(upstream.receivedRequests)")
        #expect(!contains([0xEF, 0xBF, 0xBD]), "rewritten as U+FFFD")
    }
}
