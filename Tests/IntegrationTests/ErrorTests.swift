import Foundation
import Testing
import TestSupport

/// The gateway's own error answers: the right status, a JSON body, and quickly.
@Suite("Gateway errors", .testbed)
struct ErrorTests {
    static var smallLimits: [String: Any] { ["limits": ["maxBodyBytes": 1024, "maxHeaderBytes": 2048]] }

    @Test("413 for a Content-Length above maxBodyBytes, without waiting for the body")
    func contentLengthOverLimit() throws {
        let bed = try Testbed.current
        let (gateway, _) = try bed.startGatewayWithBank(config: Self.smallLimits)

        let client = try gateway.connect(timeout: 5)
        // Only the head: the gateway must decide from Content-Length alone.
        try client.sendRequest("POST", "/echo", headers: [("Content-Length", "4096"),
                                                          ("Content-Type", "application/octet-stream")])
        try expectGatewayError(413, within: 2) { try client.readResponse(method: "POST") }
        // The unread body makes the connection unusable: the gateway must close it.
        #expect(client.serverClosed(within: 3), "connection left open after 413 with an unread body")

        // A body within the limit still goes through.
        let ok = try gateway.fetch("POST", "/echo", body: randomBytes(1000))
        #expect(ok.status == 200, "\(ok)")
    }

    @Test("a client that sends its whole oversized body still reads the 413 (no reset)")
    func oversizedBodySentInFullStillGets413() throws {
        let bed = try Testbed.current
        let (gateway, _) = try bed.startGatewayWithBank(config: Self.smallLimits)

        // What `curl --data-binary @big` does: write the whole request, then read. 8 MiB is more
        // than loopback socket buffers hold, so if the gateway closes without draining, the
        // kernel answers the rest with a reset and the client never sees the 413.
        let client = try gateway.connect(timeout: 10)
        do {
            try client.sendRequest("POST", "/echo", headers: [("Content-Type", "application/octet-stream")],
                                   body: randomBytes(8 << 20))
        } catch {
            Issue.record("sending the body failed (\(error)); the gateway must drain the body it refuses")
        }
        do {
            expectGatewayError(try client.readResponse(method: "POST"), 413)
        } catch {
            Issue.record("no 413 for the client: \(error)")
        }
    }

    @Test("413 for a chunked body that grows above maxBodyBytes")
    func chunkedBodyOverLimit() throws {
        let bed = try Testbed.current
        let (gateway, _) = try bed.startGatewayWithBank(config: Self.smallLimits)

        let client = try gateway.connect(timeout: 5)
        try client.sendRequest("POST", "/echo", headers: [("Transfer-Encoding", "chunked")])
        let chunk = Array(repeating: UInt8(ascii: "b"), count: 600)
        var wire: [UInt8] = []
        for _ in 0..<3 { wire += Array("258\r\n".utf8) + chunk + Array("\r\n".utf8) }  // 3 × 600 = 1800 bytes
        wire += Array("0\r\n\r\n".utf8)
        try client.send(wire)
        try expectGatewayError(413, within: 2) { try client.readResponse(method: "POST") }

        // The gateway is fine afterwards.
        let after = try gateway.fetch("GET", "/accounts")
        #expect(after.status == 200)
    }

    @Test("413 as soon as a chunked body passes the limit, before it ends")
    func chunkedBodyOverLimitIsRejectedEarly() throws {
        let bed = try Testbed.current
        let (gateway, _) = try bed.startGatewayWithBank(config: Self.smallLimits)

        let client = try gateway.connect(timeout: 5)
        try client.sendRequest("POST", "/echo", headers: [("Transfer-Encoding", "chunked")])
        let chunk = Array(repeating: UInt8(ascii: "c"), count: 800)
        try client.send(Array("320\r\n".utf8) + chunk + Array("\r\n".utf8))
        try client.send(Array("320\r\n".utf8) + chunk + Array("\r\n".utf8))
        // No terminating chunk: 1600 bytes already exceed 1024.
        try expectGatewayError(413, within: 2) { try client.readResponse(method: "POST") }
    }

    @Test("431 when the request head exceeds maxHeaderBytes")
    func headersOverLimit() throws {
        let bed = try Testbed.current
        let (gateway, _) = try bed.startGatewayWithBank(config: Self.smallLimits)

        let client = try gateway.connect(timeout: 5)
        try expectGatewayError(431, within: 2) {
            try client.request("GET", "/accounts", headers: [("X-Big", String(repeating: "h", count: 3000))])
        }

        // Just under the limit is fine.
        let ok = try gateway.fetch("GET", "/accounts", headers: [("X-Big", String(repeating: "h", count: 1500))])
        #expect(ok.status == 200, "\(ok)")
    }

    @Test("431 for a 64 KiB header block")
    func hugeHeadersGet431() throws {
        let bed = try Testbed.current
        let (gateway, _) = try bed.startGatewayWithBank(config: Self.smallLimits)

        let client = try gateway.connect(timeout: 5)
        var headers: [(String, String)] = []
        for i in 0..<16 { headers.append(("X-Filler-\(i)", String(repeating: "f", count: 4096))) }
        let r = try client.request("GET", "/accounts", headers: headers)
        expectGatewayError(r, 431)
    }

    @Test("502 quickly when nothing listens at the upstream address")
    func unreachableUpstream() throws {
        let bed = try Testbed.current
        let deadPort = try Ports.free()
        let gateway = try bed.startGateway(upstream: "http://127.0.0.1:\(deadPort)")

        let (r, _) = try expectGatewayError(502, within: 2) { try gateway.fetch("GET", "/accounts", timeout: 5) }
        #expect(r.hasHeader("X-Request-Id"), "\(r.headerSummary)")

        // A keep-alive client can go on after a 502.
        let client = try gateway.connect(timeout: 5)
        expectGatewayError(try client.request("GET", "/a"), 502)
        expectGatewayError(try client.request("POST", "/b", body: Array("{}".utf8)), 502)
    }

    @Test("504 when the upstream does not answer within responseTimeoutMs")
    func slowUpstream() throws {
        let bed = try Testbed.current
        let (gateway, _) = try bed.startGatewayWithBank(config: ["upstream": ["responseTimeoutMs": 300]])

        let (_, elapsed) = try expectGatewayError(504, within: 1.5) { try gateway.fetch("GET", "/slow?ms=3000", timeout: 5) }
        #expect(elapsed >= 0.25, "504 after only \(elapsed) s, before responseTimeoutMs")

        // The gateway is fine afterwards, and a quick answer is not cut.
        let ok = try gateway.fetch("GET", "/slow?ms=50")
        #expect(ok.status == 200, "\(ok)")
        #expect((try ok.json()["slept"] as? NSNumber)?.intValue == 50)
    }
}
