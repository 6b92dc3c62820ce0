import Foundation
import Testing
import TxGateCrypto
import TestSupport

/// Requests go through txgate to demo-bank and come back as the backend sent them.
@Suite("Proxying", .testbed)
struct ProxyTests {
    @Test("GET /accounts through the gateway gives demo-bank's answer")
    func getAccountsIsProxied() throws {
        let bed = try Testbed.current
        let (gateway, bank) = try bed.startGatewayWithBank()

        let direct = try RawHTTPClient.fetch(port: bank.port, "GET", "/accounts")
        let proxied = try gateway.fetch("GET", "/accounts")

        #expect(direct.status == 200)
        #expect(proxied.status == 200, "\(proxied)")
        #expect(proxied.bodyText == direct.bodyText)
        #expect(proxied.header("Content-Type") == "application/json")
        let accounts = try proxied.json()["accounts"] as? [[String: Any]]
        #expect(accounts?.map { $0["id"] as? String } == ["acc-001", "acc-002"])
    }

    @Test("POST /transfer is forwarded with its body; the backend's 201 and 400 come back")
    func postTransferIsProxied() throws {
        let bed = try Testbed.current
        let (gateway, _) = try bed.startGatewayWithBank()

        let ok = try gateway.fetch("POST", "/transfer", headers: [("Content-Type", "application/json")],
                                   body: Array(#"{"amount":12.5,"currency":"EUR","payee":"Alice"}"#.utf8))
        #expect(ok.status == 201, "\(ok)")
        let created = try ok.json()
        #expect(created["status"] as? String == "executed")
        #expect(created["payee"] as? String == "Alice")
        #expect(created["currency"] as? String == "EUR")
        #expect((created["amount"] as? NSNumber)?.doubleValue == 12.5)

        let bad = try gateway.fetch("POST", "/transfer", headers: [("Content-Type", "application/json")],
                                    body: Array(#"{"amount":12.5,"currency":"EUR"}"#.utf8))
        #expect(bad.status == 400, "\(bad)")
        #expect((try bad.json()["code"] as? NSNumber)?.intValue == 400)
        #expect((try bad.json()["message"] as? String)?.contains("payee") == true)
    }

    @Test("method, path and query reach the backend unchanged")
    func methodAndTargetArePreserved() throws {
        let bed = try Testbed.current
        let (gateway, _) = try bed.startGatewayWithBank()

        let r = try gateway.fetch("PUT", "/echo?a=1&b=two%20words", body: Array("x".utf8))
        #expect(r.status == 200, "\(r)")
        let echo = try EchoedRequest(r)
        #expect(echo.method == "PUT")
        #expect(echo.uri == "/echo?a=1&b=two%20words")
        #expect(echo.version == "HTTP/1.1")
    }

    /// Each worker listens on its own socket (SO_REUSEPORT) and the kernel picks one by a hash:
    /// 32 connections over 4 workers came out as 12, 9, 6, 5. Connections are handed on to the
    /// worker with the fewest, so every worker serves 8.
    @Test("the workers share the client connections evenly, whichever listening socket the kernel picks")
    func workersShareConnectionsEvenly() throws {
        let bed = try Testbed.current
        let (gateway, _) = try bed.startGatewayWithBank(config: ["workers": 4])
        // The start-up's probe connection gone first: it would count on its worker meanwhile.
        Timing.poll(timeout: 5) { (try? gateway.clientConnectionsPerWorker().reduce(0, +)) == 0 }
        let clients = try (0..<32).map { _ in try gateway.connect() }
        defer { clients.forEach { $0.close() } }
        for client in clients {
            let r = try client.request("GET", "/accounts")
            #expect(r.status == 200, "\(r)")
        }
        var counts: [Int] = []
        Timing.poll(timeout: 5) {
            counts = (try? gateway.clientConnectionsPerWorker()) ?? []
            return counts.reduce(0, +) == 32
        }
        #expect(counts == [8, 8, 8, 8], "client connections per worker: \(counts)")
    }

    @Test("GET /-/health is answered by the gateway itself, even with the upstream down")
    func healthIsAnsweredByGateway() throws {
        let bed = try Testbed.current
        let deadPort = try Ports.free()
        let gateway = try bed.startGateway(upstream: "http://127.0.0.1:\(deadPort)")

        let r = try gateway.fetch("GET", "/-/health")
        #expect(r.status == 200, "\(r)")
        #expect(r.header("Content-Type")?.lowercased().hasPrefix("application/json") == true)
        #expect(try r.json()["status"] as? String == "ok", "\(r)")
    }

    @Test("a 1 MiB random binary body arrives byte for byte")
    func binaryBodyArrivesIntact() throws {
        let bed = try Testbed.current
        let (gateway, _) = try bed.startGatewayWithBank()
        let body = randomBytes(1 << 20)

        let r = try gateway.fetch("POST", "/echo", headers: [("Content-Type", "application/octet-stream")],
                                  body: body, timeout: 30)
        #expect(r.status == 200, "\(r.status) \(r.bodyText.prefix(300))")
        let echo = try EchoedRequest(r)
        #expect(echo.bodyLength == body.count)
        #expect(echo.bodySha256 == Crypto.hex(Crypto.sha256(body)))
        #expect(echo.bodyBase64 == Data(body).base64EncodedString())
        #expect(echo.header("Content-Length") == String(body.count))
    }

    @Test("a chunked request body is de-chunked and sent upstream with a Content-Length")
    func chunkedRequestBodyIsDechunked() throws {
        let bed = try Testbed.current
        let (gateway, _) = try bed.startGatewayWithBank()
        let chunks: [[UInt8]] = [Array("hello, ".utf8), randomBytes(26), Array(repeating: 0x41, count: 4000), Array("end".utf8)]
        let expected = chunks.flatMap { $0 }

        let client = try gateway.connect()
        try client.sendRequest("POST", "/echo", headers: [("Transfer-Encoding", "chunked"),
                                                           ("Content-Type", "application/octet-stream")])
        for c in chunks {
            try client.send(Array((String(c.count, radix: 16) + "\r\n").utf8) + c + Array("\r\n".utf8))
            Timing.sleep(0.02)  // separate writes: the gateway must assemble them
        }
        try client.send("0\r\n\r\n")
        let r = try client.readResponse()

        #expect(r.status == 200, "\(r)")
        let echo = try EchoedRequest(r)
        #expect(echo.bodyLength == expected.count)
        #expect(echo.body == expected)
        #expect(echo.bodySha256 == Crypto.hex(Crypto.sha256(expected)))
        #expect(echo.header("Content-Length") == String(expected.count), "upstream saw:\n\(echo)")
        #expect(!echo.hasHeader("Transfer-Encoding"), "upstream saw:\n\(echo)")
    }

    /// Regression (Fuzz/README.md, fuzz-chunked): chunk-size is 1*HEXDIG. The decoder read `;5`
    /// (the fuzzer's `;;eA6789`) as a size, took `+5` and `-0`, and refused a size whose extension
    /// began with a combining mark (the fuzzer's `0;\u{6DC}t=1`).
    @Test("a chunk size that is not 1*HEXDIG is refused; extensions are skipped byte-wise")
    func chunkSizeIsStrict() throws {
        let bed = try Testbed.current
        let (gateway, _) = try bed.startGatewayWithBank()
        func post(_ body: String) throws -> HTTPResponse {
            let client = try gateway.connect()
            try client.sendRequest("POST", "/echo", headers: [("Transfer-Encoding", "chunked"),
                                                               ("Content-Type", "application/octet-stream")])
            try client.send(body)
            return try client.readResponse()
        }
        for bad in [";;eA6789\r\nhello\r\n0\r\n\r\n", ";5\r\nhello\r\n0\r\n\r\n", "+5\r\nhello\r\n0\r\n\r\n",
                    "5\r\nhello\r\n-0\r\n\r\n", "5 5\r\nhello\r\n0\r\n\r\n"] {
            let r = try post(bad)
            #expect(r.status == 400, "\(bad.debugDescription): \(r)")
        }
        let r = try post("5;\u{6DC}t=1\r\nhello\r\n0;\u{6DC}t=1\r\n\r\n")
        #expect(r.status == 200, "\(r)")
        #expect(try EchoedRequest(r).body == Array("hello".utf8))
    }

    @Test("a chunked upstream response reaches the client intact")
    func chunkedResponseIsRelayed() throws {
        let bed = try Testbed.current
        let (gateway, _) = try bed.startGatewayWithBank()

        let r = try gateway.fetch("GET", "/stream?chunks=50&size=1000", timeout: 20)
        #expect(r.status == 200, "\(r)")
        #expect(r.body.count == 50_000)
        #expect(r.body.allSatisfy { $0 == UInt8(ascii: "x") })
        #expect(!(r.hasHeader("Content-Length") && r.hasHeader("Transfer-Encoding")),
                "both Content-Length and Transfer-Encoding:\n\(r.headerSummary)")
        #expect(r.headerValues("Transfer-Encoding").count <= 1, "\(r.headerSummary)")
    }

    @Test("one client connection carries several requests (keep-alive)")
    func keepAliveConnectionServesSeveralRequests() throws {
        let bed = try Testbed.current
        let (gateway, _) = try bed.startGatewayWithBank()
        let client = try gateway.connect()

        let a = try client.request("GET", "/accounts")
        #expect(a.status == 200, "\(a)")
        let b = try client.request("POST", "/echo", body: Array("second".utf8))
        #expect(b.status == 200, "\(b)")
        #expect(try EchoedRequest(b).body == Array("second".utf8))
        let c = try client.request("GET", "/-/health")
        #expect(c.status == 200, "\(c)")
        let d = try client.request("GET", "/stream?chunks=3&size=10")
        #expect(d.status == 200, "\(d)")
        #expect(d.bodyText == String(repeating: "x", count: 30))
        let e = try client.request("GET", "/accounts")
        #expect(e.status == 200, "\(e)")
        #expect(e.bodyText == a.bodyText)
        #expect(!client.serverClosed(within: 0.2), "the gateway closed a keep-alive connection")
    }

    @Test("upstream connections are reused across client requests")
    func upstreamConnectionsAreReused() throws {
        let bed = try Testbed.current
        let (gateway, _) = try bed.startGatewayWithBank(config: ["workers": 1])

        var seen: [Int] = []
        for _ in 0..<10 {
            let r = try gateway.fetch("GET", "/conn")
            #expect(r.status == 200, "\(r)")
            seen.append((try r.json()["connection"] as? NSNumber)?.intValue ?? -1)
        }
        #expect(!seen.contains(-1))
        #expect(Set(seen).count <= 2, "10 sequential requests used upstream connections \(seen)")

        // The same holds within one keep-alive client connection.
        let client = try gateway.connect()
        var onOne: [Int] = []
        for _ in 0..<5 {
            let r = try client.request("GET", "/conn")
            onOne.append((try r.json()["connection"] as? NSNumber)?.intValue ?? -1)
        }
        #expect(Set(onOne).count <= 2, "5 requests on one client connection used upstream connections \(onOne)")
    }
}
