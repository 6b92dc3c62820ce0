import Foundation
import Testing
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

    @Test func recordedAnswersDecideAndMalformedOnesFailClosed() throws {
        let bed = try Testbed.current
        let amPort = try Ports.free()
        let am = try bed.spawn(URL(fileURLWithPath: "/usr/bin/env"),
                               ["python3", Self.folder.appendingPathComponent("fixture_am.py").path, "\(amPort)", "fixture-pw"],
                               name: "fixture-am")
        try am.waitForPort(amPort)
        _ = try bed.dir.write("agent.pw", "fixture-pw\n")
        let g = try bed.startGateway(upstream: "http://127.0.0.1:\(amPort)", config: [
            "pdp": ["type": "am", "url": "http://127.0.0.1:\(amPort)/am", "timeoutMs": 3_000,
                    "agent": ["username": "gateway-agent", "passwordFile": "agent.pw"]],
        ])
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
        let bed = try Testbed.current
        let amPort = try Ports.free()
        let am = try bed.spawn(URL(fileURLWithPath: "/usr/bin/env"),
                               ["python3", Self.folder.appendingPathComponent("fixture_am.py").path, "\(amPort)", "fixture-pw"],
                               name: "fixture-am")
        try am.waitForPort(amPort)
        _ = try bed.dir.write("agent.pw", "fixture-pw")
        let g = try bed.startGateway(upstream: "http://127.0.0.1:\(amPort)", config: [
            "pdp": ["type": "am", "url": "http://127.0.0.1:\(amPort)/am", "publicUrl": "https://am.example.com/am",
                    "agent": ["username": "gateway-agent", "passwordFile": "agent.pw"]],
        ])
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
}
