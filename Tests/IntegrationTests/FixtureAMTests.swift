import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif
import TestSupport

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
    static func start(pdp extra: [String: Any]) throws -> (GatewayInstance, Int) {
        let bed = try Testbed.current
        let amPort = try Ports.free()
        let am = try bed.spawn(URL(fileURLWithPath: "/usr/bin/env"),
                               ["python3", folder.appendingPathComponent("fixture_am.py").path, "\(amPort)", "fixture-pw"],
                               name: "fixture-am")
        try am.waitForPort(amPort)
        _ = try bed.dir.write("agent.pw", "fixture-pw\n")
        let pdp: [String: Any] = ["type": "am", "url": "http://127.0.0.1:\(amPort)/am",
                                  "agent": ["username": "gateway-agent", "passwordFile": "agent.pw"]]
        let g = try bed.startGateway(upstream: "http://127.0.0.1:\(amPort)", config: ["pdp": pdp.merging(extra) { _, b in b }])
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

    /// An OIDC bearer token goes to the AM as `subject.jwt` (the AM verifies it); the access log
    /// names its `sub`.
    @Test func bearerJWTIsAskedAsSubjectJWT() throws {
        let (g, amPort) = try Self.start(pdp: [:])
        let payload = Data(#"{"sub":"alice","iss":"https://idp.example.com"}"#.utf8).base64EncodedString()
            .replacingOccurrences(of: "=", with: "").replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        let jwt = "eyJhbGciOiJSUzI1NiJ9.\(payload).c2lnbmF0dXJl"
        let r = try g.fetch("GET", "/case/am8-allow-with-attributes", headers: [("Authorization", "Bearer \(jwt)")])
        #expect(r.status == 200, "\(r)")
        let asked = try RawHTTPClient.fetch(port: amPort, "GET", "/-fixture/count/am8-allow-with-attributes")
        let o = try JSONSerialization.jsonObject(with: Data(asked.body)) as? [String: Any]
        #expect((o?["subject"] as? [String: Any])?["jwt"] as? String == jwt, "\(asked.bodyText)")
        #expect((o?["subject"] as? [String: Any])?["ssoToken"] == nil)
        #expect(try waitForLine(g), "the access log does not name the JWT's subject")
    }

    private func waitForLine(_ g: GatewayInstance) throws -> Bool {
        for _ in 0..<50 {
            if g.logLines().contains(where: { $0["user"] as? String == "alice" }) { return true }
            usleep(100_000)
        }
        return false
    }
}
