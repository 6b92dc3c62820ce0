import Foundation
import Testing
import TestSupport
import TxGateCore

/// Operating it (issue 17, items 1 and 2): which version runs, and one instance per address.
@Suite("operations: version, one instance per address", .testbed)
struct OperationsTests {
    @Test("txgate --version prints the version constant and the commit (or 'unknown commit'); exit 0")
    func versionFlag() throws {
        let r = try Testbed.current.runTxgate(["--version"], timeout: 15)
        #expect(r.status == 0, "\(r)")
        #expect(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "txgate \(TxGateVersion.description)", "\(r)")
        #expect(r.stdout.hasPrefix("txgate \(TxGateVersion.current) ("), "\(r)")
    }

    @Test("the version is in the 'txgate started' log line and in /-/health; the line names the allocator, mimalloc")
    func versionInLogAndHealth() throws {
        let (gateway, _) = try Testbed.current.startGatewayWithBank()
        let health = try gateway.fetch("GET", "/-/health")
        #expect(health.status == 200, "\(health)")
        #expect(try health.json()["version"] as? String == TxGateVersion.current, "\(health)")
        let startedLine = { gateway.logLines().first { $0["msg"] as? String == "txgate started" } }
        _ = Timing.poll(timeout: 5) { startedLine() != nil }  // logged just after the workers accept
        let started = startedLine()
        #expect(started?["version"] as? String == TxGateVersion.current, "\(gateway.process.stderr)")
        #expect(started?["commit"] as? String == TxGateVersion.commit, "\(gateway.process.stderr)")
        // The binary links mimalloc (Package.swift's CMimalloc): the version comes from the library itself.
        #expect((started?["allocator"] as? String)?.hasPrefix("mimalloc 2.") == true, "\(gateway.process.stderr)")
    }

    @Test("a second txgate serve on the same address exits 1 naming the address; the first keeps serving all connections")
    func secondGatewayRefused() throws {
        let bed = try Testbed.current
        let (first, _) = try bed.startGatewayWithBank()
        let second = try bed.runTxgate(["serve", "--config", first.configURL.path], timeout: 15)
        #expect(second.status == 1, "\(second)")
        let address = "127.0.0.1:\(first.port)"
        let line = second.stderr.split(separator: "\n").first { $0.hasPrefix("txgate: cannot start:") }
        #expect(line == "txgate: cannot start: cannot listen on \(address): address already in use (another process listens on it)",
                "\(second)")
        #expect(!second.stderr.contains("txgate started"), "\(second)")
        // The first still answers, and every new connection reaches it (none is split off to
        // a second listener): 20 connections, 20 answers, all logged by the first.
        #expect(first.process.isRunning)
        for _ in 0..<20 {
            let r = try first.fetch("GET", "/health")
            #expect(r.status == 200, "\(r)")
        }
        let logged = { first.logLines().filter { $0["msg"] as? String == "access" && $0["path"] as? String == "/health" }.count }
        _ = Timing.poll(timeout: 5) { logged() >= 20 }
        #expect(logged() == 20, "\(first.process.stderr)")
    }

    @Test("a second demo-bank on the same address exits non-zero naming the address; the first keeps serving")
    func secondDemoBankRefused() throws {
        let bed = try Testbed.current
        let first = try bed.startDemoBank()
        let second = try SpawnedProcess.run(try BinaryLocator.demoBank, ["--listen", "127.0.0.1:\(first.port)"],
                                            directory: bed.dir.url, timeout: 15)
        #expect(second.status != 0, "\(second)")
        #expect(second.stderr.contains("cannot listen on 127.0.0.1:\(first.port): address already in use"), "\(second)")
        #expect(first.process.isRunning)
        let r = try RawHTTPClient.fetch(port: first.port, "GET", "/health")
        #expect(r.status == 200, "\(r)")
    }
}
