import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif
import TestSupport

/// SIGTERM: stop accepting, finish what is in flight, exit 0.
@Suite("Graceful shutdown", .testbed)
struct ShutdownTests {
    @Test("SIGTERM lets an in-flight request finish, refuses new connections, exits 0")
    func inFlightRequestFinishes() throws {
        let bed = try Testbed.current
        let (gateway, _) = try bed.startGatewayWithBank(config: ["workers": 2, "shutdownTimeoutMs": 10_000])

        let client = try gateway.connect(timeout: 10)
        try client.sendRequest("GET", "/slow?ms=1500")
        Timing.sleep(0.2)
        let signalledAt = Timing.now()
        gateway.process.terminate()

        // The listener goes away while the slow request is still running.
        var refusedAfter: Double?
        Timing.poll(timeout: 1.0, interval: 0.025) {
            if Ports.probe(gateway.port) == .refused {
                refusedAfter = Timing.now() - signalledAt
                return true
            }
            return false
        }
        #expect(refusedAfter != nil, "new connections were still accepted 1 s after SIGTERM")

        let r = try client.readResponse()
        #expect(r.status == 200, "\(r)")
        #expect((try? r.json()["slept"] as? NSNumber)?.intValue == 1500, "\(r)")

        let status = gateway.process.waitForExit(timeout: 10)
        #expect(status == 0, "exit status \(String(describing: status)); stderr:\n\(gateway.process.stderrTail())")
    }

    @Test("access lines still in the workers' buffers are written on SIGTERM: one per request, none lost")
    func accessLinesSurviveShutdown() throws {
        let bed = try Testbed.current
        let (gateway, _) = try bed.startGatewayWithBank(config: ["workers": 2, "shutdownTimeoutMs": 10_000])
        let client = try gateway.connect(timeout: 5)
        for i in 0..<50 {
            #expect(try client.request("GET", "/accounts", headers: [("X-Request-Id", "shutdown-line-\(i)")]).status == 200)
        }
        // At once: the lines are still in the buffer (they wait up to 100 ms), and go out on the way down.
        gateway.process.terminate()
        #expect(gateway.process.waitForExit(timeout: 10) == 0)
        let ids = Set(gateway.logLines().filter { $0["msg"] as? String == "access" }.compactMap { $0["request_id"] as? String })
        #expect(ids == Set((0..<50).map { "shutdown-line-\($0)" }), "stderr:\n\(gateway.process.stderrTail())")
        let lines = gateway.process.stderr.split(separator: "\n")
        #expect(lines.last?.contains(#""msg":"txgate stopped""#) == true, "the access lines come before 'txgate stopped'")
    }

    @Test("an idle keep-alive connection does not hold up shutdown")
    func idleConnectionDoesNotDelayExit() throws {
        let bed = try Testbed.current
        let (gateway, _) = try bed.startGatewayWithBank(config: ["shutdownTimeoutMs": 10_000])

        let client = try gateway.connect(timeout: 5)
        #expect(try client.request("GET", "/accounts").status == 200)
        gateway.process.terminate()
        let (status, elapsed) = Timing.measure { gateway.process.waitForExit(timeout: 8) }
        #expect(status == 0, "exit status \(String(describing: status))")
        #expect(elapsed < 3, "exit took \(elapsed) s with one idle keep-alive connection open")
        #expect(client.serverClosed(within: 1), "idle connection left open")
    }

    @Test("shutdown gives up on in-flight requests after shutdownTimeoutMs")
    func shutdownIsBounded() throws {
        let bed = try Testbed.current
        let (gateway, _) = try bed.startGatewayWithBank(config: ["shutdownTimeoutMs": 500])

        let client = try gateway.connect(timeout: 10)
        try client.sendRequest("GET", "/slow?ms=8000")
        Timing.sleep(0.2)
        gateway.process.terminate()
        let (status, elapsed) = Timing.measure { gateway.process.waitForExit(timeout: 8) }
        #expect(status == 0, "exit status \(String(describing: status))")
        #expect(elapsed < 3, "exit took \(elapsed) s with shutdownTimeoutMs 500")
    }

    @Test("SIGINT is handled like SIGTERM")
    func sigintExitsCleanly() throws {
        let bed = try Testbed.current
        let (gateway, _) = try bed.startGatewayWithBank()
        #expect(try gateway.fetch("GET", "/accounts").status == 200)
        gateway.process.signal(SIGINT)
        let status = gateway.process.waitForExit(timeout: 8)
        #expect(status == 0, "exit status \(String(describing: status))")
    }
}
