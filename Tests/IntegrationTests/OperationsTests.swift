import Foundation
import Testing
import TestSupport
import TxGateCore

/// Operating it (issue 17, item 1): which version runs.
@Suite("operations: version", .testbed)
struct OperationsTests {
    @Test("txgate --version prints the version constant and the commit (or 'unknown commit'); exit 0")
    func versionFlag() throws {
        let r = try Testbed.current.runTxgate(["--version"], timeout: 15)
        #expect(r.status == 0, "\(r)")
        #expect(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "txgate \(TxGateVersion.description)", "\(r)")
        #expect(r.stdout.hasPrefix("txgate \(TxGateVersion.current) ("), "\(r)")
    }

    @Test("the version is in the 'txgate started' log line and in /-/health")
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
    }
}
