import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif
import TestSupport
import TxGateCore
import TxGateCrypto

/// A gateway with `pdp.type: "am"` in front of a fixture AM (Tests/Fixtures/am/fixture_am.py)
/// that answers AM 7.x/8.x's recorded decisions and malformed ones: what the client sees for
/// each, and which ones the gateway answers again from its cache.
@Suite(.testbed) struct FixtureAMTests {
    struct Case: Decodable {
        let name: String
        let outcome: String
        let cacheable: Bool?
    }

    static let folder = BinaryLocator.packageRoot.appendingPathComponent("Tests/Fixtures/am")

    static let cases: [Case] = {
        struct File: Decodable { let cases: [Case] }
        let data = (try? Data(contentsOf: folder.appendingPathComponent("evaluate-answers.json"))) ?? Data()
        return (try? JSONDecoder().decode(File.self, from: data).cases) ?? []
    }()

    /// The fixture AM (also the backend) on a free port, and a gateway asking it as its agent.
    static func start(pdp extra: [String: Any], config more: [String: Any] = [:]) throws -> (GatewayInstance, Int) {
        let bed = try Testbed.current
        let amPort = try Ports.free()
        let am = try bed.spawn(URL(fileURLWithPath: "/usr/bin/env"),
                               ["python3", folder.appendingPathComponent("fixture_am.py").path, "\(amPort)", "fixture-pw"],
                               name: "fixture-am")
        try am.waitForPort(amPort)
        _ = try bed.dir.write("agent.pw", "fixture-pw\n")
        let pdp: [String: Any] = ["type": "am", "url": "http://127.0.0.1:\(amPort)/am",
                                  "agent": ["username": "gateway-agent", "passwordFile": "agent.pw"]]
        let g = try bed.startGateway(upstream: "http://127.0.0.1:\(amPort)", config: ["pdp": pdp.merging(extra) { _, b in b }].merging(more) { a, _ in a })
        return (g, amPort)
    }

    @Test func recordedAnswersDecideAndMalformedOnesFailClosed() throws {
        let (g, amPort) = try Self.start(pdp: ["timeoutMs": 3_000])
        #expect(Self.cases.count >= 14)
        let headers = [("iPlanetDirectoryPro", "fixture-user-token"), ("x-authenticate-response", "header")]
        for c in Self.cases {
            for attempt in 1...2 {
                let r = try g.fetch("GET", "/case/\(c.name)", headers: headers)
                let expected = ["allow": 200, "deny": 403, "challenge": 401, "malformed": 503][c.outcome]
                #expect(r.status == expected, "\(c.name), attempt \(attempt):\n\(r)")
                if c.outcome == "allow" { #expect(r.bodyText.contains("\"upstream\""), "\(c.name): \(r)") } else {
                    #expect(!r.bodyText.contains("\"upstream\""), "\(c.name) reached the backend: \(r)")
                }
            }
            let count = try RawHTTPClient.fetch(port: amPort, "GET", "/-fixture/count/\(c.name)")
            let n = try JSONSerialization.jsonObject(with: Data(count.body)) as? [String: Any]
            let asked = (n?["count"] as? NSNumber)?.intValue
            // A repeat is answered from the cache only when AM's rules allow it.
            #expect(asked == (c.cacheable == true ? 1 : 2), "\(c.name): the fixture AM was asked \(asked ?? -1) times")
        }
    }

    @Test func severalAdvicesReachTheClientAsOneChallenge() throws {
        let (g, _) = try Self.start(pdp: ["publicUrl": "https://am.example.com/am"])
        let r = try g.fetch("GET", "/case/am8-several-advices", headers: [("iPlanetDirectoryPro", "fixture-user-token"),
                                                                          ("x-authenticate-response", "header")])
        #expect(r.status == 401, "\(r)")
        let header = try #require(r.header("WWW-Authenticate"))
        let params = try TransactionKit.ssoAdviceParams(header)
        #expect(params["am_uri"] == "https://am.example.com/am/", "pdp.publicUrl names the AM clients reach")
        let advices = try TransactionKit.decodeAdviceJSON(try #require(params["advices"]))
        #expect(advices == ["AuthLevelConditionAdvice": ["3"], "AuthenticateToServiceConditionAdvice": ["/alpha:ConfirmPassword"],
                            "AuthSchemeConditionAdvice": ["DataStore"]])
        // A browser goes to the AM's login page, not to the gateway's.
        let browser = try g.fetch("GET", "/case/am8-several-advices", headers: [("Cookie", "iPlanetDirectoryPro=fixture-user-token")])
        #expect(browser.status == 307)
        #expect(browser.header("Location")?.hasPrefix("https://am.example.com/am/XUI/?goto=") == true, "\(browser.headerSummary)")
    }

    /// Issue 23 item 1: a JWT the gateway did not verify names nobody. A forged one (`alg: none`,
    /// `sub: admin`) is no subject: the AM is not asked with it, and neither the access log nor
    /// forward-auth's `X-TxGate-User` says `admin`. One from an issuer in `bearer.issuers`,
    /// verified, goes to the AM as `subject.jwt`, and the log names it as `sub@iss`.
    @Test func onlyAVerifiedJWTIsASubject() throws {
        let bed = try Testbed.current
        let ec = try #require(ECSigningKey.generate())
        let idpPort = try ExternalIssuerTests.serveJWKS(bed, ExternalIssuerTests.ecJWKS(ec, kid: "k1"))
        let iss = "https://idp.example.com"
        let (g, amPort) = try Self.start(pdp: [:], config: [
            "bearer": ["issuers": [["issuer": iss, "jwksUri": "http://127.0.0.1:\(idpPort)/jwks.json", "audience": "txgate"]]],
            "forwardAuth": ["trustedProxies": ["127.0.0.1/32"]],
        ])
        func asked(_ name: String) throws -> [String: Any]? {
            let r = try RawHTTPClient.fetch(port: amPort, "GET", "/-fixture/count/\(name)")
            return try JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any]
        }

        let forged = Base64URL.encode(Array(#"{"alg":"none","typ":"JWT"}"#.utf8)) + "."
            + Base64URL.encode(Array(#"{"sub":"admin","iss":"https://idp.example.com","aud":"txgate"}"#.utf8)) + "."
        let r = try g.fetch("GET", "/case/am8-allow-with-attributes", headers: [("Authorization", "Bearer \(forged)")])
        #expect(r.status != 200, "\(r)")
        #expect((try asked("am8-allow-with-attributes"))?["count"] as? Int == 0, "the AM was asked with an unverified JWT")
        let authz = try g.fetch("GET", "/-/authz", headers: [("X-Original-URI", "/case/am8-allow-with-attributes"),
                                                             ("X-Original-Method", "GET"), ("Authorization", "Bearer \(forged)")])
        #expect(authz.header("X-TxGate-User") == nil, "\(authz)")

        let now = Int(Date().timeIntervalSince1970)
        let jwt = JWS.sign(["sub": "alice", "iss": .string(iss), "aud": "txgate", "exp": .number(now + 300)], typ: "JWT", kid: "k1", key: ec)
        let ok = try g.fetch("GET", "/case/am8-allow-with-attributes", headers: [("Authorization", "Bearer \(jwt)")])
        #expect(ok.status == 200, "\(ok)")
        let o = try asked("am8-allow-with-attributes")
        #expect((o?["subject"] as? [String: Any])?["jwt"] as? String == jwt)
        #expect((o?["subject"] as? [String: Any])?["ssoToken"] == nil)
        #expect(Timing.poll(timeout: 5, interval: 0.05) { g.logLines().contains { $0["user"] as? String == "alice@" + iss } },
                "the access log does not name the verified subject")
        #expect(!g.logLines().contains { ($0["user"] as? String) == "admin" }, "the log names the forged subject")
    }
}
