import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif
import TestSupport

/// What the TLS listener negotiates (openssl s_client as the client), HSTS, and the
/// certificate reload on SIGHUP.
@Suite("TLS hardening", .testbed)
struct TLSHardeningTests {
    private func startTLSGateway(_ bed: Testbed, tls extra: [String: Any] = [:]) throws -> (GatewayInstance, DemoBankInstance) {
        try bed.makeSelfSignedCertificate()
        let tls = ["certificate": "cert.pem", "privateKey": "key.pem"].merging(extra) { $1 }
        return try bed.startGatewayWithBank(config: ["tls": tls])
    }

    /// A handshake with `openssl s_client` and these arguments; its status and output.
    private func handshake(_ bed: Testbed, _ g: GatewayInstance, _ args: [String]) throws -> CommandResult {
        try bed.runTool("openssl", ["s_client", "-connect", "127.0.0.1:\(g.port)", "-servername", "localhost"] + args, timeout: 20)
    }

    /// The cipher s_client reports ("Cipher    : X", or "New, TLSv1.3, Cipher is X").
    private func negotiatedCipher(_ r: CommandResult) -> String? {
        for line in r.stdout.split(separator: "\n") {
            let l = line.trimmingCharacters(in: .whitespaces)
            if l.hasPrefix("Cipher    :") { return l.split(separator: ":").last.map { $0.trimmingCharacters(in: .whitespaces) } }
            if l.hasPrefix("New, "), let r = l.range(of: "Cipher is ") { return String(l[r.upperBound...]) }
        }
        return nil
    }

    @Test("TLS 1.2: RSA key exchange and CBC suites are refused, ECDHE with AES-GCM is accepted")
    func tls12CipherSuites() throws {
        let bed = try Testbed.current
        let (g, _) = try startTLSGateway(bed)

        for weak in ["AES128-SHA256", "AES128-GCM-SHA256", "ECDHE-RSA-AES128-SHA256", "ECDHE-RSA-AES128-SHA", "AES256-SHA"] {
            let r = try handshake(bed, g, ["-tls1_2", "-cipher", weak])
            #expect(r.status != 0, "\(weak) was negotiated:\n\(r.stdout)")
            #expect(negotiatedCipher(r) != weak, "\(weak) was negotiated")
        }
        for strong in ["ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-RSA-CHACHA20-POLY1305"] {
            let r = try handshake(bed, g, ["-tls1_2", "-cipher", strong])
            #expect(r.status == 0, "\(strong) refused:\n\(r.stdout)\n\(r.stderr)")
            #expect(negotiatedCipher(r) == strong, "\(r.stdout)")
        }
        // TLS 1.3 as OpenSSL offers it.
        let t13 = try handshake(bed, g, ["-tls1_3"])
        #expect(t13.status == 0, "TLS 1.3 refused:\n\(t13.stdout)\n\(t13.stderr)")
        #expect(t13.stdout.contains("TLSv1.3"), "\(t13.stdout)")
        #expect(g.process.isRunning)
    }

    @Test("the server's order (AES-128-GCM first) wins over the client's, unless the client puts ChaCha20 first")
    func serverCipherPreference() throws {
        let bed = try Testbed.current
        let (g, _) = try startTLSGateway(bed)
        let cases: [(args: [String], expected: String)] = [
            (["-tls1_2", "-cipher", "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-AES128-GCM-SHA256"], "ECDHE-RSA-AES128-GCM-SHA256"),
            (["-tls1_3", "-ciphersuites", "TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256"], "TLS_AES_128_GCM_SHA256"),
            // OpenSSL's default order (AES-256 first), which curl and wrk send.
            (["-tls1_3"], "TLS_AES_128_GCM_SHA256"),
            // A client without AES instructions says so by its order: ChaCha20 is cheaper for it.
            (["-tls1_2", "-cipher", "ECDHE-RSA-CHACHA20-POLY1305:ECDHE-RSA-AES128-GCM-SHA256"], "ECDHE-RSA-CHACHA20-POLY1305"),
            (["-tls1_3", "-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256"], "TLS_CHACHA20_POLY1305_SHA256"),
            (["-tls1_3", "-ciphersuites", "TLS_AES_256_GCM_SHA384"], "TLS_AES_256_GCM_SHA384"),
        ]
        for (args, expected) in cases {
            let r = try handshake(bed, g, args)
            #expect(r.status == 0, "\(args): \(r.stdout)\n\(r.stderr)")
            #expect(negotiatedCipher(r) == expected, "\(args) negotiated \(negotiatedCipher(r) ?? "nothing"):\n\(r.stdout)")
        }
    }

    @Test("tls.hsts: Strict-Transport-Security on proxied answers, the gateway's own, and its errors")
    func hstsOnEveryTLSResponse() throws {
        let bed = try Testbed.current
        let (g, _) = try startTLSGateway(bed, tls: ["hsts": ["maxAgeS": 31_536_000, "includeSubDomains": true]])
        let base = "https://127.0.0.1:\(g.port)"
        let r = try bed.curl(["\(base)/accounts", "\(base)/-/health", "\(base)/a%2Fb"])
        #expect(r.transfers.map(\.status) == [200, 200, 400], "\(r.command)")
        for t in r.transfers {
            #expect(t.header("Strict-Transport-Security") == "max-age=31536000; includeSubDomains", "\(t.rawHeaders)")
        }
    }

    @Test("tls.hsts as a number is the max-age; without it, no header")
    func hstsNumberAndAbsent() throws {
        let bed = try Testbed.current
        let (g, _) = try startTLSGateway(bed, tls: ["hsts": 600])
        let r = try bed.curl(["https://127.0.0.1:\(g.port)/accounts"])
        #expect(r.transfers.first?.header("Strict-Transport-Security") == "max-age=600", "\(r.command)")

        let bed2 = try Testbed()
        defer { bed2.cleanup() }
        let (plain, _) = try startTLSGateway(bed2)
        let p = try bed2.curl(["https://127.0.0.1:\(plain.port)/accounts"])
        #expect(p.transfers.first?.status == 200)
        #expect(p.transfers.first?.header("Strict-Transport-Security") == nil, "\(p.transfers.first?.rawHeaders ?? "")")
    }

    @Test("tls.hsts is strict: unknown keys and bad values are named")
    func hstsStrictDecoding() throws {
        let bed = try Testbed.current
        let base = #""upstream": {"url": "http://127.0.0.1:9"}, "tls": {"certificate": "c.pem", "privateKey": "k.pem", "hsts": "#
        try bed.makeSelfSignedCertificate(cert: "c.pem", key: "k.pem")
        let unknown = try bed.check(configText: "{" + base + #"{"maxAgeS": 60, "includeSubdomains": true}}}"#)
        #expect(unknown.status != 0)
        #expect(unknown.stderr.contains("tls.hsts.includeSubdomains: unknown key"), "\(unknown.stderr)")
        let negative = try bed.check(configText: "{" + base + "-1}}")
        #expect(negative.stderr.contains("tls.hsts"), "\(negative.stderr)")
        #expect(negative.status != 0)
        let missing = try bed.check(configText: "{" + base + #"{"includeSubDomains": true}}}"#)
        #expect(missing.stderr.contains("tls.hsts.maxAgeS"), "\(missing.stderr)")
        let ok = try bed.check(configText: "{" + base + #"{"maxAgeS": 60, "includeSubDomains": true}}}"#)
        #expect(ok.status == 0, "\(ok.stderr)")
    }

    @Test("SIGHUP reads the certificate and key again: new connections get the new certificate")
    func certificateReload() throws {
        let bed = try Testbed.current
        let (g, _) = try startTLSGateway(bed)
        let kept = try bed.curl(["https://127.0.0.1:\(g.port)/accounts"])
        #expect(kept.transfers.first?.status == 200)
        let before = try handshake(bed, g, [])
        let oldCert = try String(contentsOf: bed.dir.file("cert.pem"), encoding: .utf8)

        try bed.makeSelfSignedCertificate()
        let newCert = try String(contentsOf: bed.dir.file("cert.pem"), encoding: .utf8)
        #expect(oldCert != newCert)
        _ = try ReloadTests.reload(g, until: "config reloaded")

        let after = try handshake(bed, g, [])
        #expect(after.status == 0, "\(after.stderr)")
        let body = { (pem: String) in pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined() }
        func served(_ r: CommandResult) -> String {
            guard let s = r.stdout.range(of: "-----BEGIN CERTIFICATE-----"),
                  let e = r.stdout.range(of: "-----END CERTIFICATE-----") else { return "" }
            return body(String(r.stdout[s.lowerBound..<e.upperBound]))
        }
        #expect(served(before) == body(oldCert), "\(before.stdout)")
        #expect(served(after) == body(newCert), "the old certificate is still served after SIGHUP")
        // Verified against the new certificate by curl.
        let r = try bed.curl(["https://127.0.0.1:\(g.port)/accounts"])
        #expect(r.transfers.first?.status == 200, "\(r.command)")

        // A broken certificate file: the reload is refused, the working certificate stays.
        _ = try bed.dir.write("cert.pem", "not a certificate\n")
        _ = try ReloadTests.reload(g, until: "config reload failed: still running the previous configuration")
        let errors = g.logLines().filter { $0["msg"] as? String == "config reload failed" }.compactMap { $0["error"] as? String }
        #expect(errors.contains { $0.contains("tls.certificate") }, "\(errors)")
        let still = try handshake(bed, g, [])
        #expect(served(still) == body(newCert), "\(still.stdout)")
        #expect(g.process.isRunning)
    }
}
