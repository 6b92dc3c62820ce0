import Foundation
import Testing
import TestSupport

/// The listener speaks TLS with the configured certificate.
@Suite("TLS listener", .testbed)
struct TLSTests {
    /// demo-bank, a self-signed certificate in the temp dir, and txgate with `tls` pointing at
    /// it by relative path (resolved against the config file's folder).
    private func startTLSGateway(_ bed: Testbed) throws -> (GatewayInstance, DemoBankInstance) {
        try bed.makeSelfSignedCertificate()
        return try bed.startGatewayWithBank(config: ["tls": ["certificate": "cert.pem", "privateKey": "key.pem"]])
    }

    @Test("curl over https gets the proxied /accounts, certificate verified")
    func httpsGetAccounts() throws {
        let bed = try Testbed.current
        let (gateway, bank) = try startTLSGateway(bed)
        let direct = try RawHTTPClient.fetch(port: bank.port, "GET", "/accounts")

        let result = try bed.curl(["https://127.0.0.1:\(gateway.port)/accounts"])
        #expect(result.command.status == 0, "curl failed: \(result.command)")
        let t = try #require(result.transfers.first, "no transfer: \(result.command)")
        #expect(t.status == 200, "\(t.rawHeaders)")
        #expect(t.bodyText == direct.bodyText)
        #expect(t.header("X-Request-Id") != nil, "\(t.rawHeaders)")
    }

    @Test("over https the backend sees X-Forwarded-Proto: https")
    func httpsForwardedProto() throws {
        let bed = try Testbed.current
        let (gateway, _) = try startTLSGateway(bed)

        let result = try bed.curl(["https://localhost:\(gateway.port)/echo"],
                                  extra: ["--resolve", "localhost:\(gateway.port):127.0.0.1"])
        let t = try #require(result.transfers.first, "no transfer: \(result.command)")
        #expect(t.status == 200, "\(result.command)")
        let obj = try t.json()
        let headers = (obj["headers"] as? [[String: String]]) ?? []
        func values(_ n: String) -> [String] {
            headers.filter { $0["name"]?.caseInsensitiveCompare(n) == .orderedSame }.compactMap { $0["value"] }
        }
        #expect(values("X-Forwarded-Proto") == ["https"], "\(headers)")
        #expect(values("X-Forwarded-Host") == ["localhost:\(gateway.port)"], "\(headers)")
    }

    @Test("several https requests reuse one TLS connection")
    func httpsKeepAlive() throws {
        let bed = try Testbed.current
        let (gateway, _) = try startTLSGateway(bed)
        let base = "https://127.0.0.1:\(gateway.port)"

        let result = try bed.curl(["\(base)/accounts", "\(base)/-/health", "\(base)/stream?chunks=20&size=500"])
        #expect(result.transfers.map(\.status) == [200, 200, 200], "\(result.command)")
        #expect(result.transfers.map(\.newConnections) == [1, 0, 0], "connections opened per transfer")
        #expect(result.transfers.last?.body.count == 10_000)
    }

    @Test("a plain-HTTP request on the TLS port gets no proxied answer")
    func plainHTTPOnTLSPort() throws {
        let bed = try Testbed.current
        let (gateway, _) = try startTLSGateway(bed)

        let client = try gateway.connect(timeout: 5)
        do {
            let r = try client.request("GET", "/accounts")
            #expect(r.status != 200, "a cleartext request was served on the TLS listener:\n\(r)")
        } catch {
            // Closed, reset or garbage: all fine, as long as it ends.
        }
        #expect(gateway.process.isRunning)
        let ok = try bed.curl(["https://127.0.0.1:\(gateway.port)/accounts"])
        #expect(ok.transfers.first?.status == 200, "\(ok.command)")
    }
}
