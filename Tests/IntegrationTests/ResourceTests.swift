import Foundation
import Testing
import TestSupport

/// The gateway gives back what it takes.
@Suite("Resources", .testbed)
struct ResourceTests {
    @Test("no file descriptor leak after 200+ requests including 413, 431, 504 and 502")
    func noDescriptorLeak() throws {
        let bed = try Testbed.current
        let (gateway, bank) = try bed.startGatewayWithBank(config: [
            "workers": 1,
            "limits": ["maxBodyBytes": 1024, "maxHeaderBytes": 2048],
            "upstream": ["responseTimeoutMs": 300],
        ])

        // Warm up (pooled upstream connection, lazily opened files), then take the baseline.
        for _ in 0..<5 { _ = try gateway.fetch("GET", "/accounts") }
        Timing.sleep(0.3)
        let baseline = try gateway.openFileDescriptors()

        var unexpected: [String] = []
        func expectStatus(_ want: Int, _ what: String, _ body: () throws -> HTTPResponse) {
            do {
                let r = try body()
                if r.status != want { unexpected.append("\(what): \(r.status) (wanted \(want))") }
            } catch {
                unexpected.append("\(what): \(error)")
            }
        }

        for i in 0..<160 {
            switch i % 8 {
            case 0, 1, 2:
                expectStatus(200, "GET /accounts") { try gateway.fetch("GET", "/accounts") }
            case 3:
                expectStatus(200, "POST /echo") { try gateway.fetch("POST", "/echo", body: randomBytes(512)) }
            case 4:
                expectStatus(413, "oversized body") {
                    let c = try gateway.connect(timeout: 5)
                    defer { c.close() }
                    try c.sendRequest("POST", "/echo", headers: [("Content-Length", "5000")])
                    return try c.readResponse(method: "POST")
                }
            case 5:
                expectStatus(431, "oversized head") {
                    try gateway.fetch("GET", "/accounts", headers: [("X-Big", String(repeating: "h", count: 3000))])
                }
            case 6:
                // Several requests on one connection, closed by the client mid-keep-alive.
                expectStatus(200, "keep-alive") {
                    let c = try gateway.connect(timeout: 5)
                    defer { c.close() }
                    _ = try c.request("GET", "/accounts")
                    return try c.request("GET", "/-/health")
                }
            default:
                // A client that goes away with its request in flight upstream.
                let c = try gateway.connect(timeout: 5)
                try c.sendRequest("GET", "/slow?ms=100")
                c.close()
            }
        }
        for _ in 0..<5 {
            expectStatus(504, "slow upstream") { try gateway.fetch("GET", "/slow?ms=1000") }
        }

        // The backend goes away: every request is a 502 now.
        bank.process.kill()
        for _ in 0..<40 {
            expectStatus(502, "upstream down") { try gateway.fetch("GET", "/accounts") }
        }
        #expect(unexpected.isEmpty, "unexpected answers: \(unexpected)")

        var now = try gateway.openFileDescriptors()
        Timing.poll(timeout: 5, interval: 0.1) {
            now = (try? gateway.openFileDescriptors()) ?? now
            return now <= baseline + 3
        }
        #expect(now <= baseline + 3, "gateway had \(baseline) open descriptors before and \(now) after")
        #expect(gateway.process.isRunning, "the gateway died: \(gateway.process.stderrTail())")
    }
}
