import Foundation
import Testing
import TxGateCrypto
@testable import TxGateCore

/// Issue 28's pure parts: a transaction policy's `when`, the transaction scope and `resource` at
/// `authorize`, and dynamically registered clients' IDs.
@Suite struct McpAuthorizationTests {
    static let tool = TransactionRule(journey: "Confirm", bindFields: ["/params/arguments/amount"])
    static var mcpRule: TransactionRule {
        var r = tool
        r.when = ["/method": "tools/call", "/params/name": "transfer"]
        return r
    }
    let decider = PolicyDecider(policies: PolicySet([
        Policy(name: "mcp", resources: [ResourcePattern("/mcp")!], actions: ["POST"], subjects: .authenticated,
               requirement: .transaction(mcpRule)),
    ]), loginJourney: "Login", maxPending: 5, newTxId: { "3f2b8c1e-0000-4000-8000-000000000001" })
    static let t0: Int64 = 1_800_000_000_000
    static let alice = Subject(uid: "alice", realm: "/", journeys: ["Login"], attributes: [:], token: "tok")

    func plan(_ body: String, type: String = "application/json") -> PolicyDecider.Plan {
        decider.decide(DecisionQuery(realm: "/", path: "/mcp", resource: "https://gw/mcp", method: "POST", subject: Self.alice,
                                     txid: nil, body: { Array(body.utf8) }, contentType: type), nowMs: Self.t0)
    }

    @Test("when: the named tool call needs its transaction; any other request is allowed, and never cached")
    func whenSelectsTheCall() throws {
        guard case .open = plan(#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"transfer","arguments":{"amount":5}}}"#) else {
            Issue.record("the tool call was not challenged"); return
        }
        for other in [#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#,
                      #"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"balance","arguments":{}}}"#] {
            guard case .decided(let d) = plan(other) else { Issue.record("\(other) was not decided"); continue }
            #expect(d.allows("POST") && d.ttl.map { $0 < Self.t0 } == true, "an allow that could be cached: \(d)")
        }
    }

    @Test("when: a body the gateway cannot read as one JSON object is refused, not let through", arguments: [
        (#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"transfer"}}]"#, "application/json"),   // a batch
        (#"{"method":"initialize","method":"tools/call","params":{"name":"transfer"}}"#, "application/json"),      // two readings
        (#"{"method":"tools/call","params":{"name":"transfer"}}"#, "text/plain"),
        ("not json", "application/json"),
    ])
    func unreadableBodiesAreRefused(_ body: String, _ type: String) {
        guard case .failed(let f) = plan(body, type: type) else { Issue.record("\(body) was not refused"); return }
        #expect("\(f)".contains("one JSON object"), "\(f)")
    }

    static let config: OAuth2Config = {
        var c = OAuth2Config()
        c.clients = [OAuthClient(clientId: "app", redirectUris: ["https://app.example/cb"], scopes: ["openid", "bank"])]
        return c
    }()
    static let challenge = PKCE.s256(String(repeating: "v", count: 43))

    func authorize(_ extra: String) -> Result<AuthorizationRequest, AuthorizationRequest.Refusal> {
        let q = Query(string: "client_id=app&redirect_uri=https%3A%2F%2Fapp.example%2Fcb&response_type=code&state=s"
            + "&code_challenge=\(Self.challenge)&code_challenge_method=S256" + extra)
        return AuthorizationRequest.parse(q, config: Self.config, clients: Self.config.client, resources: ["https://gw/mcp"],
                                          journeys: ["Login", "Confirm"])
    }

    @Test("authorize: transaction:<TxId> names the transaction (the newest of several), and is no grant")
    func transactionScope() throws {
        let a = "3f2b8c1e-0000-4000-8000-00000000000a", b = "3f2b8c1e-0000-4000-8000-00000000000b"
        let r = try authorize("&scope=bank+transaction%3A\(a)+transaction%3A\(b)&resource=https%3A%2F%2Fgw%2Fmcp").get()
        #expect(r.txid == b && r.scope == ["bank"] && r.resource == "https://gw/mcp", "\(r)")
        guard case .failure(.toClient(_, let e, _)) = authorize("&scope=transaction%3A\(a)&txid=\(b)") else { Issue.record("two transactions"); return }
        #expect(e.code == "invalid_request")
        guard case .failure(.toClient(_, let t, _)) = authorize("&scope=bank&resource=https%3A%2F%2Fevil%2Fmcp") else { Issue.record("resource"); return }
        #expect(t.code == "invalid_target")
        guard case .failure(.toClient(_, let n, _)) = authorize("&scope=transaction%3Anot-a-txid") else { Issue.record("bad txid"); return }
        #expect(n.code == "invalid_request")
    }

    @Test("a dynamic client's ID is its metadata, MACed: tampered or foreign IDs name no client")
    func dynamicClientIDs() throws {
        let key = Crypto.randomBytes(32)
        let m = try DynamicClientID.metadata(.object(["redirect_uris": ["http://localhost:5173/cb"], "scope": "bank transaction:x",
                                                      "client_name": "agent"]), allowedScopes: ["bank"]).get()
        #expect(m.scopes == ["bank"])
        let id = DynamicClientID.issue(m, key: key)
        let c = try #require(DynamicClientID.client(id, key: key, allowedScopes: ["bank"]))
        #expect(c.isPublic && c.redirectUris == ["http://localhost:5173/cb"] && c.scopes == ["bank"])
        #expect(DynamicClientID.client(id, key: Crypto.randomBytes(32), allowedScopes: ["bank"]) == nil)
        var tampered = Array(id.utf8)
        tampered[8] = tampered[8] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        #expect(DynamicClientID.client(String(decoding: tampered, as: UTF8.self), key: key, allowedScopes: ["bank"]) == nil)
        for (body, code) in [(#"{"redirect_uris":["http://app.example/cb"]}"#, "invalid_redirect_uri"),
                             (#"{"redirect_uris":[]}"#, "invalid_redirect_uri"),
                             (#"{"redirect_uris":["https://a/cb"],"grant_types":["client_credentials"]}"#, "invalid_client_metadata"),
                             (#"{"redirect_uris":["https://a/cb"],"scope":"admin"}"#, "invalid_client_metadata")] {
            guard case .failure(let e) = DynamicClientID.metadata(JSONValue.parse(Array(body.utf8))!, allowedScopes: ["bank"]) else {
                Issue.record("\(body) was registered"); continue
            }
            #expect(e.code == code, "\(body): \(e)")
        }
    }
}
