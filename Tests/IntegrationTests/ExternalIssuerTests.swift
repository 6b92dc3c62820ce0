import Foundation
import Testing
import TxGateCore
import TxGateCrypto
import TestSupport

/// `bearer.issuers`: access tokens from another OpenID provider (here a JWK Set served by
/// Python's http.server, with an ES256 key made by TxGateCrypto and an RS256 key made and used
/// by the openssl command line) are subjects when signed by its keys, in time and for this
/// gateway's audience.
@Suite(.testbed) struct ExternalIssuerTests {
    static let issuer = "https://idp.example/realms/demo"

    struct RSAKey {
        let pem: URL
        let n: [UInt8]
    }

    static func rsaKey(_ bed: Testbed) throws -> RSAKey {
        let gen = try bed.runTool("openssl", ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "rsa.pem"])
        guard gen.status == 0 else { throw HarnessError("openssl genpkey failed: \(gen)") }
        let mod = try bed.runTool("openssl", ["rsa", "-in", "rsa.pem", "-noout", "-modulus"])
        guard let hex = mod.stdout.split(separator: "=").last.map({ $0.trimmingCharacters(in: .whitespacesAndNewlines) }),
              let n = Crypto.fromHex(hex) else { throw HarnessError("no modulus: \(mod)") }
        return RSAKey(pem: bed.dir.url.appendingPathComponent("rsa.pem"), n: n)
    }

    /// A JWT signed with the openssl command line (RS256).
    static func rs256(_ bed: Testbed, _ key: RSAKey, kid: String, claims: [String: Any]) throws -> String {
        let header = Base64URL.encode(Array(#"{"alg":"RS256","kid":"\#(kid)","typ":"JWT"}"#.utf8))
        let body = Base64URL.encode(Array(try JSONSerialization.data(withJSONObject: claims)))
        _ = try bed.dir.write("input.txt", header + "." + body)
        let sign = try bed.runTool("openssl", ["dgst", "-sha256", "-sign", key.pem.path, "-out", "sig.bin", "input.txt"])
        guard sign.status == 0, let sig = FileManager.default.contents(atPath: bed.dir.url.appendingPathComponent("sig.bin").path) else {
            throw HarnessError("openssl dgst failed: \(sign)")
        }
        return header + "." + body + "." + Base64URL.encode(Array(sig))
    }

    static func es256(_ key: ECSigningKey, kid: String, claims: [String: JSONValue]) -> String {
        JWS.sign(claims, typ: "JWT", kid: kid, key: key)
    }

    /// Serves `jwks` at `http://127.0.0.1:<port>/jwks.json` (Python's http.server); returns the port.
    static func serveJWKS(_ bed: Testbed, _ jwks: [String: Any]) throws -> Int {
        let site = bed.dir.url.appendingPathComponent("idp")
        try FileManager.default.createDirectory(at: site, withIntermediateDirectories: true)
        try JSONSerialization.data(withJSONObject: jwks).write(to: site.appendingPathComponent("jwks.json"))
        let idpPort = try Ports.free()
        let python = try #require(BinaryLocator.onPath("python3"))
        let idp = try bed.spawn(python, ["-m", "http.server", "\(idpPort)", "--bind", "127.0.0.1", "--directory", site.path], name: "idp")
        try idp.waitForPort(idpPort)
        return idpPort
    }

    static func ecJWKS(_ key: ECSigningKey, kid: String) -> [String: Any] {
        ["keys": [["kty": "EC", "crv": "P-256", "kid": kid, "use": "sig", "x": Base64URL.encode(key.publicKey.x), "y": Base64URL.encode(key.publicKey.y)]]]
    }

    @Test(.timeLimit(.minutes(1))) func tokensOfAConfiguredIssuerAreSubjects() throws {
        let bed = try Testbed.current
        let ec = try #require(ECSigningKey.generate())
        let rsa = try Self.rsaKey(bed)
        let jwks: [String: Any] = ["keys": [
            ["kty": "EC", "crv": "P-256", "kid": "ec1", "use": "sig", "x": Base64URL.encode(ec.publicKey.x), "y": Base64URL.encode(ec.publicKey.y)],
            ["kty": "RSA", "kid": "rsa1", "use": "sig", "alg": "RS256", "n": Base64URL.encode(rsa.n), "e": "AQAB"],
        ]]
        let idpPort = try Self.serveJWKS(bed, jwks)

        let (g, _) = try bed.startGatewayWithBank(config: TransactionKit.config(["bearer": ["issuers": [
            ["issuer": Self.issuer, "jwksUri": "http://127.0.0.1:\(idpPort)/jwks.json", "audience": "txgate-api"],
        ]]]))
        let now = Int(Date().timeIntervalSince1970)
        let good: [String: JSONValue] = ["iss": .string(Self.issuer), "aud": "txgate-api", "sub": "demo", "exp": .number(now + 300)]
        func status(_ token: String) throws -> Int {
            try g.fetch("GET", "/accounts", headers: [("Authorization", "Bearer \(token)")]).status
        }
        #expect(try status(Self.es256(ec, kid: "ec1", claims: good)) == 200)
        // The access line is written as the response ends: wait for it.
        #expect(Timing.poll(timeout: 5, interval: 0.05) {
            g.logLines().contains { $0["path"] as? String == "/accounts" && $0["user"] as? String == "demo@" + Self.issuer }
        })
        let rsaClaims: [String: Any] = ["iss": Self.issuer, "aud": ["txgate-api", "other"], "sub": "demo", "exp": now + 300]
        #expect(try status(Self.rs256(bed, rsa, kid: "rsa1", claims: rsaClaims)) == 200)

        var otherAudience = good
        otherAudience["aud"] = "another-api"
        #expect(try status(Self.es256(ec, kid: "ec1", claims: otherAudience)) == 401)
        var expired = good
        expired["exp"] = .number(now - 5)
        #expect(try status(Self.es256(ec, kid: "ec1", claims: expired)) == 401)
        var otherIssuer = good
        otherIssuer["iss"] = "https://evil.example"
        #expect(try status(Self.es256(ec, kid: "ec1", claims: otherIssuer)) == 401)
        let stranger = try #require(ECSigningKey.generate())
        #expect(try status(Self.es256(stranger, kid: "ec1", claims: good)) == 401, "signed by a key the issuer does not publish")
        // The RSA key cannot be used to check an ES256 token (no algorithm confusion).
        #expect(try status(Self.es256(ec, kid: "rsa1", claims: good)) == 401)
    }

    /// Issue 23 item 2: an external token's `sub` is not the local user of that name, and two
    /// issuers' subjects are not each other; `mapTo: localUsers` says so explicitly.
    @Test(.timeLimit(.minutes(1)), arguments: [false, true])
    func externalSubjectsDoNotShareTheLocalNamespace(mapped: Bool) throws {
        let bed = try Testbed.current
        let ec = try #require(ECSigningKey.generate())
        let idpPort = try Self.serveJWKS(bed, Self.ecJWKS(ec, kid: "ec1"))
        let corp = "https://corp.example"
        var issuers: [[String: Any]] = [["issuer": Self.issuer, "jwksUri": "http://127.0.0.1:\(idpPort)/jwks.json", "audience": "txgate-api"]]
        if mapped {
            issuers.append(["issuer": corp, "jwksUri": "http://127.0.0.1:\(idpPort)/jwks.json", "audience": "txgate-api",
                            "mapTo": "localUsers", "usernameClaim": "preferred_username"])
        }
        var config = TransactionKit.config(["bearer": ["issuers": issuers]])
        config["policies"] = (config["policies"] as! [[String: Any]]) + [
            ["name": "other-only", "resources": ["/echo"], "actions": ["GET"], "subjects": ["other"]],
        ]
        let (g, _) = try bed.startGatewayWithBank(config: config)
        let now = Int(Date().timeIntervalSince1970)
        func token(_ iss: String, _ claims: [String: JSONValue]) -> String {
            var c: [String: JSONValue] = ["iss": .string(iss), "aud": "txgate-api", "exp": .number(now + 300)]
            c.merge(claims) { _, b in b }
            return Self.es256(ec, kid: "ec1", claims: c)
        }
        let bearer = { (t: String) in [("Authorization", "Bearer \(t)"), ("x-authenticate-response", "header")] }

        // A policy that names the local user `other` does not open to another provider's `other`...
        let foreignOther = token(Self.issuer, ["sub": "other"])
        #expect(try g.fetch("GET", "/echo", headers: bearer(foreignOther)).status == 403)
        if mapped {
            // ...but does to a provider mapped to local users (`mapTo`), for the user its claim names.
            let local = token(corp, ["sub": "x-123", "preferred_username": "other"])
            #expect(try g.fetch("GET", "/echo", headers: bearer(local)).status == 200)
        }

        // A transaction the local demo approved cannot be spent by another provider's `demo`.
        let session = try TransactionKit.login(g)
        var codes = TransactionKit.Codes()
        let txid = try TransactionKit.approvedTransfer(g, token: session, codes: &codes)
        let foreignDemo = token(Self.issuer, ["sub": "demo"])
        let spent = try g.fetch("POST", "/transfer?_txid=\(txid)", headers: bearer(foreignDemo) + [("Content-Type", "application/json")],
                                body: TransactionKit.transferBody)
        #expect(spent.status != 201, "another provider's demo spent the local demo's approval:\n\(spent)")
        #expect(!spent.bodyText.contains("executed"))
        // The approval is still the local demo's to spend.
        #expect(try TransactionKit.transfer(g, token: session, body: TransactionKit.transferBody, query: "?_txid=\(txid)").status == 201)
    }
}
