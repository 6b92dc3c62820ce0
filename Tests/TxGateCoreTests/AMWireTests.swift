import HTTPCore
import Foundation
import Testing
@testable import TxGateCore

/// AM's evaluate answers as AM 7.x and PingAM 8.x send them, and malformed ones
/// (Tests/Fixtures/am/evaluate-answers.json, also served by the fixture AM of the integration
/// tests): each recorded one reads as the decision it is, each malformed one is refused.
@Suite struct AMWireTests {
    struct Case: Decodable {
        let name: String
        let outcome: String
        let cacheable: Bool?
        let body: String
    }

    static let resource = "https://api.example.com/accounts?x=1"

    static let cases: [Case] = {
        struct File: Decodable { let cases: [Case] }
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../Fixtures/am/evaluate-answers.json").standardized
        return (try? JSONDecoder().decode(File.self, from: Data(contentsOf: url)).cases) ?? []
    }()

    @Test func fixtureHasRecordedAndMalformedAnswers() {
        #expect(Self.cases.filter { $0.outcome == "malformed" }.count >= 8)
        #expect(Self.cases.filter { $0.outcome != "malformed" }.count >= 6)
    }

    @Test(arguments: cases.map(\.name)) func answerReadsAsRecorded(_ name: String) throws {
        let c = try #require(Self.cases.first { $0.name == name })
        let body = Array(c.body.replacingOccurrences(of: "RESOURCE", with: Self.resource).utf8)
        let r = AMWire.decision(body, resource: Self.resource)
        switch (c.outcome, r) {
        case ("malformed", .failure): break
        case ("malformed", .success(let d)): Issue.record("\(name) must be refused, read as \(d)")
        case (_, .failure(let e)): Issue.record("\(name) refused: \(e)")
        case (let outcome, .success(let d)):
            #expect(d.outcome(for: "GET").rawValue == outcome, "\(name): \(d)")
            let cache = DecisionCache<String>(maxEntries: 10, defaultTtlMs: 60_000)
            cache.put("k", d, nowMs: 1_800_000_000_000)
            #expect((cache.get("k", nowMs: 1_800_000_000_001) != nil) == c.cacheable, "\(name): cacheable")
        }
    }

    @Test func longMaxTtlAndSeveralAdvicesAndAttributes() throws {
        let allow = try AMWire.decision(Array(#"[{"resource":"r","actions":{"GET":true},"attributes":{"dept":["a","b"]},"ttl":9223372036854775807}]"#.utf8), resource: "r").get()
        #expect(allow.ttl == Int64.max)
        #expect(allow.attributes["dept"] == ["a", "b"])
        let advice = try AMWire.decision(Array(#"[{"resource":"r","actions":{},"advices":{"B":["2"],"A":["1"]}}]"#.utf8), resource: "r").get()
        #expect(advice.advices.entries.map(\.name) == ["A", "B"])
        #expect(advice.advices["B"] == ["2"])
    }

    @Test func evaluateRequestAndRealmPath() throws {
        let body = AMWire.evaluateRequest(resource: "https://gw/x?a=\"1\"", application: "iPlanetAMWebAgentService", ssoToken: "AQIC5",
                                          txid: "7b8bfd4c-60fe-4271-928d-d09b94496f84")
        let o = try #require(JSONValue.parse(Array(body.utf8)))
        #expect(o["resources"]?.arrayValue?.first?.stringValue == "https://gw/x?a=\"1\"")
        #expect(o["subject"]?["ssoToken"]?.stringValue == "AQIC5")
        #expect(o["environment"]?["TxId"]?.arrayValue?.first?.stringValue == "7b8bfd4c-60fe-4271-928d-d09b94496f84")
        #expect(AMWire.realmPath("/") == "/json/realms/root")
        #expect(AMWire.realmPath("/alpha/branch") == "/json/realms/root/realms/alpha/realms/branch")
    }

    @Test func sessionValidation() throws {
        #expect(try AMWire.validatedUser(Array(#"{"valid":true,"uid":"demo","realm":"/alpha"}"#.utf8)).get()?.uid == "demo")
        #expect(try AMWire.validatedUser(Array(#"{"valid":false}"#.utf8)).get() == nil)
        #expect(throws: AMWire.Malformed.self) { try AMWire.validatedUser(Array(#"{"valid":"yes"}"#.utf8)).get() }
        #expect(throws: AMWire.Malformed.self) { try AMWire.validatedUser(Array(#"{"valid":true}"#.utf8)).get() }
    }

    /// The agent answers an AM login step (Name and Password callbacks) and nothing else.
    @Test func agentLoginAnswersNameAndPasswordOnly() throws {
        let login = AgentLogin(username: "gateway-agent", password: "pw\"1")
        let step = #"{"authId":"eyJ0","callbacks":[{"type":"NameCallback","output":[{"name":"prompt","value":"User Name"}],"input":[{"name":"IDToken1","value":""}],"_id":0},{"type":"PasswordCallback","output":[{"name":"prompt","value":"Password"}],"input":[{"name":"IDToken2","value":""}],"_id":1}]}"#
        guard case .answer(let body) = login.next(status: 200, body: Array(step.utf8)) else { Issue.record("no answer"); return }
        let o = try #require(JSONValue.parse(Array(body.utf8)))
        #expect(o["authId"]?.stringValue == "eyJ0")
        let cbs = try #require(o["callbacks"]?.arrayValue)
        #expect(cbs[0]["input"]?.arrayValue?.first?["value"]?.stringValue == "gateway-agent")
        #expect(cbs[1]["input"]?.arrayValue?.first?["value"]?.stringValue == "pw\"1")
        #expect(cbs[1]["input"]?.arrayValue?.first?["name"]?.stringValue == "IDToken2")
        #expect(login.next(status: 200, body: Array(#"{"tokenId":"AQIC","successUrl":"/"}"#.utf8)) == .loggedIn(token: "AQIC"))
        let otp = #"{"authId":"x","callbacks":[{"type":"ChoiceCallback","input":[{"name":"IDToken1","value":0}]}]}"#
        guard case .refused = login.next(status: 200, body: Array(otp.utf8)) else { Issue.record("a ChoiceCallback was answered"); return }
        guard case .refused = login.next(status: 401, body: Array(#"{"code":401,"message":"Login failure"}"#.utf8)) else {
            Issue.record("a 401 was not a refusal"); return
        }
    }

    @Test func forwardedRequestFromNginxAndTraefik() throws {
        func headers(_ pairs: [(String, String)]) -> HTTPHeaders {
            var h = HTTPHeaders()
            for (n, v) in pairs { h.add(n, v) }
            return h
        }
        let nginx = try ForwardedRequest.parse(headers([("X-Original-URI", "/accounts?x=1"), ("X-Original-Method", "POST")]), fallbackMethod: "GET").get()
        #expect(nginx == ForwardedRequest(proxy: .nginx, method: "POST", target: "/accounts?x=1"))
        let nginxNoMethod = try ForwardedRequest.parse(headers([("X-Original-URI", "/a")]), fallbackMethod: "GET").get()
        #expect(nginxNoMethod.method == "GET")
        let traefik = try ForwardedRequest.parse(headers([("X-Forwarded-Uri", "/t"), ("X-Forwarded-Method", "DELETE")]), fallbackMethod: "GET").get()
        #expect(traefik == ForwardedRequest(proxy: .traefik, method: "DELETE", target: "/t"))
        #expect(throws: ForwardedRequest.Invalid.self) { try ForwardedRequest.parse(headers([]), fallbackMethod: "GET").get() }
        #expect(throws: ForwardedRequest.Invalid.self) {
            try ForwardedRequest.parse(headers([("X-Original-URI", "/a"), ("X-Original-URI", "/b")]), fallbackMethod: "GET").get()
        }
        #expect(throws: ForwardedRequest.Invalid.self) {
            try ForwardedRequest.parse(headers([("X-Original-URI", "http://evil/a")]), fallbackMethod: "GET").get()
        }
        #expect(throws: ForwardedRequest.Invalid.self) {
            try ForwardedRequest.parse(headers([("X-Original-URI", "/a"), ("X-Original-Method", "get x")]), fallbackMethod: "GET").get()
        }
    }
}
