import Foundation
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import TxGateClient

/// AM's documented answers (WIRE.md §4–§5), read into steps, successes and failures; resume
/// links checked before sending; the session file's mode.
@Suite struct JourneyParsingTests {
    static func response(_ status: Int, _ body: String) -> ClientResponse {
        ClientResponse(status: status, headers: [], body: Data(body.utf8))
    }

    static func outcome(_ status: Int, _ body: String) throws -> JourneyOutcome {
        try TxGateClient.outcome(response(status, body), tree: "Login", treeType: "service")
    }

    @Test func theDocumentedStepWithEveryCallbackType() throws {
        let body = #"""
        {"authId":"eyJ0eXAi","callbacks":[
         {"type":"NameCallback","output":[{"name":"prompt","value":"User Name"}],"input":[{"name":"IDToken1","value":""}],"_id":0},
         {"type":"PasswordCallback","output":[{"name":"prompt","value":"Password"}],"input":[{"name":"IDToken2","value":""}],"_id":1},
         {"type":"TextOutputCallback","output":[{"name":"message","value":"Approve 100 EUR to Bob?"},{"name":"messageType","value":"0"}]},
         {"type":"ConfirmationCallback","output":[{"name":"prompt","value":"Do you approve?"},{"name":"messageType","value":0},{"name":"options","value":["Yes","No"]},{"name":"optionType","value":-1},{"name":"defaultOption","value":1}],"input":[{"name":"IDToken4","value":1}]},
         {"type":"ChoiceCallback","output":[{"name":"prompt","value":"Pick"},{"name":"choices","value":["a","b"]},{"name":"defaultChoice","value":0}],"input":[{"name":"IDToken5","value":0}]},
         {"type":"HiddenValueCallback","output":[{"name":"value","value":"x"},{"name":"id","value":"webAuthnOutcome"}],"input":[{"name":"IDToken6","value":"x"}]},
         {"type":"ValidatedCreatePasswordCallback","output":[{"name":"prompt","value":"New"},{"name":"policies","value":{}}],"input":[{"name":"IDToken7","value":""},{"name":"IDToken7validateOnly","value":false}]},
         {"type":"DeviceProfileCallback","output":[{"name":"metadata","value":true}],"input":[{"name":"IDToken8","value":""}]}]}
        """#
        guard case .step(var step) = try Self.outcome(200, body) else { Issue.record("not a step"); return }
        #expect(step.callbacks.map(\.kind) == [.name, .password, .textOutput, .confirmation, .choice, .hiddenValue,
                                                .validatedCreatePassword, .unknown("DeviceProfileCallback")])
        #expect(step.displayedMessages == ["Approve 100 EUR to Bob?"])
        #expect(step.callbacks[3].options == ["Yes", "No"] && step.callbacks[3].defaultOption == 1)
        #expect(step.callbacks[4].options == ["a", "b"])
        #expect(step.callbacks[5].hiddenId == "webAuthnOutcome" && !step.callbacks[5].needsInput)
        #expect(!step.callbacks[2].needsInput && step.callbacks[0].needsInput)
        step.callbacks[0].answer("demo")
        step.callbacks[3].answer("Yes")
        step.callbacks[4].answer("1")
        step.callbacks[7].answer("{}")
        let sent = try #require(JSONValue.parse(Array(step.body.utf8)))
        let list = try #require(sent["callbacks"]?.arrayValue)
        #expect(sent["authId"] == "eyJ0eXAi")
        #expect(list[0]["input"]?.arrayValue?.first?["value"] == "demo")
        #expect(list[3]["input"]?.arrayValue?.first?["value"] == .number(0))
        #expect(list[4]["input"]?.arrayValue?.first?["value"] == .number(1))
        // The unknown callback goes back whole, with its input set.
        #expect(list[7]["output"] == JSONValue.parse(Array(#"[{"name":"metadata","value":true}]"#.utf8)))
        #expect(list[7]["input"]?.arrayValue?.first?["value"] == "{}")
        #expect(list[6]["input"]?.arrayValue?.count == 2)
    }

    @Test func successFailureTimeoutAndSuspendedNotFound() throws {
        #expect(try Self.outcome(200, #"{"tokenId":"AQIC5w","successUrl":"/console","realm":"/"}"#)
                == .success(JourneySuccess(tokenId: "AQIC5w", successUrl: "/console", realm: "/")))
        guard case .failure(let f) = try Self.outcome(401, #"{"code":401,"reason":"Unauthorized","message":"Login failure","detail":{"failureUrl":""}}"#) else {
            Issue.record("not a failure"); return
        }
        #expect(f.message == "Login failure" && !f.isTimeout && f.failureUrl == "")
        guard case .failure(let t) = try Self.outcome(401, #"{"code":401,"reason":"Unauthorized","message":"Session has timed out","detail":{"errorCode":"110"}}"#) else {
            Issue.record("not a failure"); return
        }
        #expect(t.isTimeout && t.errorCode == "110")
        guard case .failure(let n) = try Self.outcome(401, #"{"code":401,"reason":"Unauthorized","message":"org.forgerock.openam.auth.nodes.framework.token.SuspendedAuthSessionException: Token not found. It may have expired."}"#) else {
            Issue.record("not a failure"); return
        }
        #expect(n.isSuspendedSessionNotFound)
        #expect(throws: TxGateClientError.self) { try Self.outcome(502, "<html>bad gateway</html>") }
        guard case .step(let s) = try Self.outcome(200, #"{"authId":"x","callbacks":[{"type":"SuspendedTextOutputCallback","output":[{"name":"message","value":"An email has been sent."},{"name":"messageType","value":"0"}]}]}"#) else {
            Issue.record("not a step"); return
        }
        #expect(s.isSuspended && s.displayedMessages == ["An email has been sent."])
    }

    /// docs/WIRE-EXTENSIONS.md §4b: inside a live session, `detail` says which failure it was
    /// and, for a wrong code, the attempts left before the lockout.
    @Test func aFailureInsideASessionCarriesItsReasonAndTheAttemptsLeft() throws {
        func failure(_ detail: String) throws -> AuthFailure? {
            guard case .failure(let f) = try Self.outcome(401, #"{"code":401,"reason":"Unauthorized","message":"Login failure","detail":"# + detail + "}") else {
                return nil
            }
            return f
        }
        let wrong = try #require(try failure(#"{"failureUrl":"","reason":"wrong_code","attemptsLeft":3}"#))
        #expect(wrong.failureReason == "wrong_code" && wrong.attemptsLeft == 3 && wrong.retryAfterS == nil)
        #expect(wrong.explanation == "the code is not right: 3 attempts left")
        #expect(wrong.description == "401 Unauthorized: Login failure (the code is not right: 3 attempts left)")
        #expect(try failure(#"{"failureUrl":"","reason":"wrong_code","attemptsLeft":1}"#)?.explanation == "the code is not right: 1 attempt left")
        let last = try #require(try failure(#"{"failureUrl":"","reason":"wrong_code","attemptsLeft":0,"retryAfterS":900}"#))
        #expect(last.attemptsLeft == 0 && last.retryAfterS == 900)
        #expect(last.explanation?.hasPrefix("the code is not right, and that was the last attempt") == true)
        let locked = try #require(try failure(#"{"failureUrl":"","reason":"locked_out","retryAfterS":900}"#))
        #expect(locked.attemptsLeft == nil && locked.retryAfterS == 900 && locked.explanation == "too many wrong codes: try again later")
        // A server that does not say (AM, an older TxGate): as before.
        let plain = try #require(try failure(#"{"failureUrl":"","reason":"wrong_code"}"#))
        #expect(plain.attemptsLeft == nil && plain.explanation == "the code is not right")
    }

    @Test func resumeURIsAreCheckedAgainstTheServer() throws {
        let server = ClientConfiguration(serverURL: URL(string: "https://gw.example.com")!)
        #expect(try ResumeURI.suspendedId("https://gw.example.com/am/XUI/?realm=/&suspendedId=6IIIUln3ajONR4ySwZt15qzh8X4", server: server)
                == "6IIIUln3ajONR4ySwZt15qzh8X4")
        #expect(try ResumeURI.suspendedId("https://GW.example.com:443/resume?suspendedId=abc", server: server) == "abc")
        for bad in ["https://app.example.com/resume?realm=/&suspendedId=x", "http://gw.example.com/resume?suspendedId=x",
                    "https://gw.example.com:8443/resume?suspendedId=x", "https://gw.example.com/resume?realm=/",
                    "https://gw.example.com/resume?suspendedId=", "https://gw.example.com/r?suspendedId=a&suspendedId=b",
                    "/resume?suspendedId=x", "https://gw.example.com/resume?suspendedId=a%20b", "not a uri at all", "javascript:alert(1)"] {
            #expect(throws: TxGateClientError.self, "\(bad)") { try ResumeURI.suspendedId(bad, server: server) }
        }
    }

    @Test func theAuthenticateURLForARealm() throws {
        var c = ClientConfiguration(serverURL: URL(string: "http://127.0.0.1:8080/ignored/path")!)
        #expect(try c.amURL("authenticate").absoluteString == "http://127.0.0.1:8080/am/json/realms/root/authenticate")
        c.realm = "/alpha"
        c.amPath = "/openam/"
        #expect(try c.amURL("authenticate", query: [("suspendedId", "a b")]).absoluteString
                == "http://127.0.0.1:8080/openam/json/realms/root/realms/alpha/authenticate?suspendedId=a%20b")
    }

    /// A server URL without a scheme or host, or an amPath that is no path, used to trap in
    /// `URL(string:)!` on the first journey call; now the call throws, and nothing is sent.
    @Test(arguments: [("gw.example.com", "/am", "serverURL gw.example.com"), ("file:///tmp/gw", "/am", "serverURL file:///tmp/gw"),
                      ("https://gw.example.com", "am", "amPath am "), ("https://gw.example.com", "/am?x=1", "amPath /am?x=1 "),
                      ("https://gw.example.com", "/am#top", "amPath /am#top ")])
    func aConfigurationThatCannotAddressTheServerThrows(server: String, amPath: String, named: String) async throws {
        let client = TxGateClient(configuration: ClientConfiguration(serverURL: try #require(URL(string: server)), amPath: amPath))
        await #expect {
            _ = try await client.start(journey: "Login")
        } throws: { error in
            guard case TxGateClientError.invalidConfiguration(let why) = error else { return false }
            return why.contains(named)
        }
        let store = MemoryTokenStore(StoredSession(server: server, tokenId: "t"))
        let withSession = TxGateClient(configuration: ClientConfiguration(serverURL: try #require(URL(string: server)), amPath: amPath),
                                       tokenStore: store)
        await #expect(throws: TxGateClientError.self) { try await withSession.validate() }
    }

    @Test func theSessionTokenOnlyGoesToTheConfiguredOrigin() throws {
        let store = MemoryTokenStore(StoredSession(server: "https://gw.example.com", tokenId: "secret-token"))
        let client = TxGateClient(configuration: ClientConfiguration(serverURL: URL(string: "https://gw.example.com")!), tokenStore: store)
        let own = try client.prepared(URLRequest(url: URL(string: "https://gw.example.com/transfer?a=1")!), txid: "T1")
        #expect(own.value(forHTTPHeaderField: "iPlanetDirectoryPro") == "secret-token")
        #expect(own.value(forHTTPHeaderField: "x-authenticate-response") == "header")
        #expect(own.url?.absoluteString == "https://gw.example.com/transfer?a=1&_txid=T1")
        for other in ["https://evil.example.com/x", "http://gw.example.com/x", "https://gw.example.com:8443/x"] {
            let r = try client.prepared(URLRequest(url: URL(string: other)!), txid: nil)
            #expect(r.value(forHTTPHeaderField: "iPlanetDirectoryPro") == nil, "\(other)")
        }
        // A session stored for another server is not this client's.
        let foreign = TxGateClient(configuration: ClientConfiguration(serverURL: URL(string: "https://other.example.com")!), tokenStore: store)
        #expect(try foreign.currentToken() == nil)
    }

    @Test func theSessionFileIsOwnerOnly() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("txgate-client-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = FileTokenStore(path: dir.appendingPathComponent("sub/session.json").path)
        #expect(try store.load() == nil)
        let s = StoredSession(server: "http://127.0.0.1:1", tokenId: "t0k", successUrl: "/", realm: "/")
        try store.save(s)
        try store.save(s)
        #expect(try store.load() == s)
        let mode = try FileManager.default.attributesOfItem(atPath: store.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let folder = try FileManager.default.attributesOfItem(atPath: dir.appendingPathComponent("sub").path)[.posixPermissions] as? Int
        #expect(folder == 0o700)
        try store.remove()
        try store.remove()
        #expect(try store.load() == nil)
    }
}
