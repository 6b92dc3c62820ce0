import HTTPCore
import Testing
@testable import TxGateCore

@Suite struct ProxyHeadersTests {
    /// The fields `ProxyHeaders.upstreamRequest` forwards for `client`, as headers.
    static func upstream(_ client: HTTPHeaders, clientIP: String, forwardedChain: Bool = false, isTLS: Bool,
                         upstreamAuthority: String, requestId: String, credentials: GatewayCredentials? = nil) -> HTTPHeaders {
        var fields = ForwardedFields(client)
        ProxyHeaders.upstreamRequest(&fields, clientIP: clientIP, forwardedChain: forwardedChain, isTLS: isTLS,
                                     upstreamAuthority: upstreamAuthority, requestId: requestId, credentials: credentials)
        return fields.headers
    }

    @Test func hopByHopAndConnectionNamedHeadersAreRemoved() {
        var h = HTTPHeaders([("Connection", "close, X-Private"), ("X-Private", "1"), ("keep-alive", "300"),
                             ("Proxy-Connection", "x"), ("TE", "trailers"), ("Upgrade", "websocket"),
                             ("Transfer-Encoding", "chunked"), ("Proxy-Authorization", "Basic x"), ("X-Keep", "yes")])
        ProxyHeaders.removeHopByHop(&h)
        #expect(h.fields.map(\.name) == ["X-Keep"])
    }

    @Test func upstreamRequestHeaders() {
        let client = HTTPHeaders([("Host", "gw.example.com"), ("X-Forwarded-For", "203.0.113.7"),
                                  ("X-Forwarded-Proto", "https"), ("Content-Length", "5"), ("Accept", "*/*"),
                                  ("X-Request-Id", "spoofed")])
        let h = Self.upstream(client, clientIP: "10.0.0.1", isTLS: false,
                              upstreamAuthority: "backend:9000", requestId: "rid-1")
        #expect(h.first("Host") == "backend:9000")
        // From a peer nobody trusts, the client's chain is dropped: the peer alone.
        #expect(h.values("X-Forwarded-For") == ["10.0.0.1"])
        #expect(h.values("X-Forwarded-Proto") == ["http"])
        #expect(h.first("X-Forwarded-Host") == "gw.example.com")
        #expect(h.values("X-Request-Id") == ["rid-1"])
        #expect(h.first("Content-Length") == nil)
        #expect(h.first("Accept") == "*/*")
    }

    /// Issue 23 item 7: fields a backend may trust never come from the client, in any case,
    /// and a response may still carry them.
    @Test func clientAssertedFieldsAreDropped() {
        let client = HTTPHeaders(ProxyHeaders.clientOverrides.map { ($0, "x") } + ProxyHeaders.clientOverrides.map { ($0.lowercased(), "y") }
                                 + [("X-TxGate-Username", "kept"), ("X-Real-IPs", "kept")])
        let h = Self.upstream(client, clientIP: "10.0.0.1", isTLS: false, upstreamAuthority: "b", requestId: "r")
        for name in ["X-TxGate-User", "X-Original-URL", "X-Rewrite-URL", "X-Real-IP", "True-Client-IP", "X-Client-IP",
                     "Forwarded", "X-HTTP-Method-Override"] {
            #expect(ProxyHeaders.clientOverrides.contains(name))
            #expect(h.first(name) == nil, "\(name)")
        }
        #expect(h.first("X-TxGate-Username") == "kept")
        #expect(h.first("X-Real-IPs") == "kept")
        #expect(h.values("X-Forwarded-For") == ["10.0.0.1"])
        let back = ProxyHeaders.clientResponse(HTTPHeaders([("X-Real-IP", "1.2.3.4")]), requestId: "r", keepContentLength: false)
        #expect(back.first("X-Real-IP") == "1.2.3.4")
    }

    @Test func aTrustedPeersChainIsPassedOnWithThePeerAppended() {
        let client = HTTPHeaders([("X-Forwarded-For", "198.51.100.9, 203.0.113.7"), ("X-Forwarded-For", "10.0.0.5")])
        let h = Self.upstream(client, clientIP: "10.0.0.1", forwardedChain: true, isTLS: false,
                              upstreamAuthority: "backend:9000", requestId: "rid-1")
        #expect(h.values("X-Forwarded-For") == ["198.51.100.9, 203.0.113.7, 10.0.0.5, 10.0.0.1"])
    }

    @Test func clientResponseHeaders() {
        let up = HTTPHeaders([("Content-Length", "10"), ("Connection", "X-B"), ("X-B", "s"), ("Keep-Alive", "timeout=5"),
                              ("Set-Cookie", "a=1"), ("Set-Cookie", "b=2")])
        let h = ProxyHeaders.clientResponse(up, requestId: "r", keepContentLength: false)
        #expect(h.fields.map(\.name) == ["Set-Cookie", "Set-Cookie", "X-Request-Id"])
        #expect(ProxyHeaders.clientResponse(up, requestId: "r", keepContentLength: true).first("Content-Length") == "10")
    }

    /// The gateway's own fields (its CORS answer) come last and replace the upstream's fields of
    /// the same `Access-Control-*` name; the head the proxy writes holds exactly these fields.
    @Test func theGatewaysOwnFieldsFollowAndReplaceTheUpstreamsCORSFields() {
        let up = HTTPHeaders([("Access-Control-Allow-Origin", "*"), ("access-control-max-age", "5"), ("Vary", "Accept"),
                              ("Access-Control-Expose-Headers", "X-Up"), ("X-Request-Id", "upstream's"), ("Content-Length", "3")])
        let own = HTTPHeaders([("Access-Control-Allow-Origin", "https://app.example"), ("Access-Control-Max-Age", "600"),
                               ("Vary", "Origin")])
        let h = ProxyHeaders.clientResponse(up, requestId: "r", keepContentLength: false, own: own)
        #expect(h.fields.map { "\($0.name): \($0.value)" } == [
            "Vary: Accept", "Access-Control-Expose-Headers: X-Up", "X-Request-Id: r",
            "Access-Control-Allow-Origin: https://app.example", "Access-Control-Max-Age: 600", "Vary: Origin",
        ])
        for keep in [false, true] {
            var w = HeadWriter()
            ProxyHeaders.writeClientResponse(up, requestId: "r", keepContentLength: keep, own: own, into: &w)
            var expected = HeadWriter()
            expected.writeFields(ProxyHeaders.clientResponse(up, requestId: "r", keepContentLength: keep, own: own))
            #expect(w.bytes == expected.bytes)
            #expect(String(decoding: w.bytes, as: UTF8.self).contains("Content-Length: 3\r\n") == keep)
        }
    }

    @Test func requestIdsFromClientsAreCheckedAndGeneratedOnesAreUnique() {
        #expect(ProxyHeaders.acceptableRequestId("abc-123") == "abc-123")
        #expect(ProxyHeaders.acceptableRequestId("has space") == nil)
        #expect(ProxyHeaders.acceptableRequestId("") == nil)
        #expect(ProxyHeaders.acceptableRequestId(String(repeating: "a", count: 201)) == nil)
        var g = RequestIdGenerator()
        let ids = (0..<1000).map { _ in g.next() }
        #expect(Set(ids).count == 1000)
        // 15 bytes at most: Swift keeps such a String inline, so an id costs no allocation.
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        #expect(ids.allSatisfy { $0.utf8.count == 15 && $0.utf8.allSatisfy(alphabet.contains) })
        #expect(ids.allSatisfy { ProxyHeaders.acceptableRequestId($0) == $0 })
        #expect(ids[0].hasSuffix("AAAAAAB") && ids[62].hasSuffix("AAAAAA_") && ids[63].hasSuffix("AAAAABA")
                && ids[999].hasSuffix("AAAAAPo"))
        #expect(Set(ids.map { $0.prefix(8) }).count == 1)
        #expect(Set((0..<20).map { _ in
            var other = RequestIdGenerator()
            return other.next().prefix(8)
        }).count > 1, "a random prefix per generator")

        // When the 42-bit counter runs out, a new prefix starts the count again.
        var last = RequestIdGenerator(prefix: 0, counter: 1 << 42 - 2)
        #expect(last.next() == "AAAAAAAA" + "_______")
        let wrapped = last.next()
        #expect(wrapped.hasSuffix("AAAAAAB") && !wrapped.hasPrefix("AAAAAAAA"))
    }

    @Test func errorBodyIsAMsShape() {
        let body = String(decoding: ErrorBody.json(status: 502, message: "can't \"reach\"\n"), as: UTF8.self)
        #expect(body == #"{"code":502,"reason":"Bad Gateway","message":"can't \"reach\"\n"}"#)
    }

    @Test func theGatewaysCredentialsNeverGoUpstream() {
        let credentials = GatewayCredentials(cookieName: "iPlanetDirectoryPro", bearerToken: "tok")
        let up = Self.upstream(HTTPHeaders([("Cookie", "a=1; iPlanetDirectoryPro=tok; b=2"), ("iPlanetDirectoryPro", "tok"),
                                            ("X-TxID", "t"), ("Authorization", "Bearer tok"), ("Cookie", "iPlanetDirectoryPro=tok"),
                                            ("iplanetdirectorypro", "tok"), ("Accept", "*/*")]),
                               clientIP: "10.0.0.1", isTLS: false, upstreamAuthority: "up", requestId: "r", credentials: credentials)
        #expect(up.fields.map(\.name) == ["Cookie", "Accept", "Host", "X-Forwarded-For", "X-Forwarded-Proto", "X-Request-Id"])
        #expect(up.first("Cookie") == "a=1; b=2")
        // Another client's bearer token is not the gateway's: it goes through.
        #expect(credentials.withoutCredentials(HTTPHeaders.Field(name: "Authorization", value: "Bearer someone-elses"))?.value
                == "Bearer someone-elses")
        #expect(credentials.withoutCredentials(HTTPHeaders.Field(name: "Cookie", value: " iPlanetDirectoryPro=tok ")) == nil)
    }
}
