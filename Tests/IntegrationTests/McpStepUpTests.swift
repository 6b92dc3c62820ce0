import Foundation
import Testing
import TestSupport
import TxGateCore

/// Issue 28 item 3: an MCP server behind TxGate, and the Python MCP SDK's own client with its
/// OAuth provider, unchanged (`mcp/agent.py`; only the person is automated). The SDK finds the
/// gateway by RFC 9728 and RFC 8414 metadata, registers itself (RFC 7591), gets a token for the
/// MCP resource (RFC 8707), and steps up on the gateway's `403 insufficient_scope` asking for
/// `transaction:<TxId>`: the tool call that moves money runs once, after the person approved
/// exactly that call.
@Suite("MCP clients step up unchanged", .testbed)
struct McpStepUpTests {
    static let folder = BinaryLocator.packageRoot.appendingPathComponent("Tests/IntegrationTests/mcp")
    typealias Kit = TransactionKit

    struct Bank {
        let gateway: GatewayInstance
        let calls: URL
        var executed: [[String: Any]] {
            ((try? String(contentsOf: calls, encoding: .utf8)) ?? "").split(separator: "\n").compactMap {
                (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
            }
        }
    }

    /// The MCP server (its own process) and the gateway in front, on `http://localhost:PORT`:
    /// `tools/call` of `transfer` needs its own approval (a Confirm step), bound to its arguments.
    func start(oauth2: [String: Any] = ["resources": [["path": "/mcp", "scopes": ["bank"]]],
                                        "dynamicRegistration": ["open": true, "consentJourney": "ConfirmTransaction"]]) throws -> Bank {
        let bed = try Testbed.current
        let port = try Ports.free()
        let calls = bed.dir.url.appendingPathComponent("calls.jsonl")
        let server = try bed.spawn(URL(fileURLWithPath: "/usr/bin/env"), ["python3", Self.folder.appendingPathComponent("bank_server.py").path,
                                                                           String(port), calls.path], name: "mcp-server")
        try server.waitForPort(port, timeout: 30)
        let g = try bed.startGateway { p in
            Testbed.gatewayConfig(port: p, upstream: "http://127.0.0.1:\(port)", overrides: Kit.config([
                "publicUrl": "http://localhost:\(p)",
                "journeys": ["Login": [["type": "UsernamePassword"]], "ConfirmTransaction": [["type": "Confirm"]]],
                "oauth2": oauth2,
                "policies": [["name": "mcp", "resources": ["/mcp"], "actions": ["POST", "GET", "DELETE"], "subjects": "authenticated",
                              "transaction": ["journey": "ConfirmTransaction",
                                              "when": ["/method": "tools/call", "/params/name": "transfer"],
                                              "bind": ["body": ["/params/arguments/amount", "/params/arguments/currency", "/params/arguments/payee"]],
                                              "display": "Send {/params/arguments/amount} {/params/arguments/currency} to {/params/arguments/payee}?"]]],
            ]))
        }
        return Bank(gateway: g, calls: calls)
    }

    /// `metadataURL`: the SDK's `client_metadata_url` (Client ID Metadata Documents).
    func agent(_ bank: Bank, _ steps: String, metadataURL: String? = nil) throws -> [String: Any] {
        let env = metadataURL.map { ["AGENT_CLIENT_METADATA_URL=\($0)"] } ?? []
        let r = try Testbed.current.runTool("env", env + ["python3", Self.folder.appendingPathComponent("agent.py").path,
                                                          "http://localhost:\(bank.gateway.port)", steps], timeout: 120)
        let last = r.stdout.split(separator: "\n").last.map(String.init) ?? ""
        guard r.status == 0, let obj = (try? JSONSerialization.jsonObject(with: Data(last.utf8))) as? [String: Any] else {
            throw HarnessError("agent.py failed:\n\(r)\n\(bank.gateway.process.stderrTail(30))")
        }
        return obj
    }

    @Test("a tool call runs once after its approval; the same call again needs a new one; other arguments are refused")
    func approvedOnce() throws {
        let bank = try start()
        let r = try agent(bank, #"[["call","balance",{}],["call","transfer",{"amount":25,"currency":"EUR","payee":"Bob"}],"#
                                + #"["call","transfer",{"amount":25,"currency":"EUR","payee":"Bob"}],"#
                                + #"["forge",{"amount":5,"currency":"EUR","payee":"Bob"},{"amount":5000,"currency":"EUR","payee":"Mallory"}]]"#)
        let calls = try #require(r["calls"] as? [[String: Any]], "\(r)")
        #expect(calls.map { $0["ok"] as? Bool } == [true, true, true], "\(r)")
        // Registered dynamically; each transfer approved on its own, showing what it sends.
        #expect(r["client_id_prefix"] as? String == "dyn.", "\(r)")
        // The person allowed the registered client once (its first authorization), then approved
        // each transfer on its own, shown what it sends.
        let approvals = try #require(r["approvals"] as? [[String]], "\(r)")
        #expect(approvals == [["Allow test agent to act for you?"], ["Send 25 EUR to Bob?"], ["Send 25 EUR to Bob?"], ["Send 5 EUR to Bob?"]],
                "\(approvals)")
        let forge = try #require(r["forge"] as? [String: Any], "\(r)")
        #expect(forge["challenge_status"] as? Int == 403, "\(forge)")
        let challenge = forge["challenge"] as? String ?? ""
        #expect(challenge.hasPrefix(#"Bearer error="insufficient_scope", scope="bank transaction:"#)
                && challenge.hasSuffix(#"resource_metadata="http://localhost:\#(bank.gateway.port)/.well-known/oauth-protected-resource/mcp""#),
                "\(challenge)")
        #expect(forge["token_aud"] as? String == "http://localhost:\(bank.gateway.port)/mcp" && forge["token_txn"] as? Bool == true, "\(forge)")
        #expect(forge["forged_status"] as? Int == 403, "the approval of 5 EUR to Bob opened 5000 EUR to Mallory: \(forge)")
        #expect(forge["approved_status"] as? Int == 200 && forge["again_status"] as? Int == 403, "\(forge)")
        // Executed: the two approved calls and the approved forge target, once each; never Mallory.
        let executed = bank.executed.map { "\($0["amount"] ?? "") \($0["payee"] ?? "")" }
        #expect(executed == ["25.0 Bob", "25.0 Bob", "5.0 Bob"], "\(executed)")
    }

    @Test("a declined approval runs nothing")
    func declined() throws {
        let bank = try start()
        let r = try agent(bank, #"[["call","balance",{}],["deny_next"],["call","transfer",{"amount":30,"currency":"EUR","payee":"Eve"}]]"#)
        #expect((r["session_error"] as? String)?.contains("declined") == true, "\(r)")
        #expect((r["approvals"] as? [[String]])?.last == ["Send 30 EUR to Eve?"], "\(r)")
        #expect(bank.executed.isEmpty, "\(bank.executed)")
    }

    @Test("the metadata documents, and the challenges of a request without a usable token")
    func discovery() throws {
        let bank = try start()
        let g = bank.gateway, base = "http://localhost:\(bank.gateway.port)"
        let prm = try g.fetch("GET", "/.well-known/oauth-protected-resource/mcp")
        let doc = try prm.json()
        #expect(doc["resource"] as? String == base + "/mcp" && doc["authorization_servers"] as? [String] == [base + "/am/oauth2/realms/root"], "\(prm)")
        #expect(doc["scopes_supported"] as? [String] == ["bank"], "\(prm)")
        let asm = try g.fetch("GET", "/.well-known/oauth-authorization-server/am/oauth2/realms/root").json()
        #expect(asm["registration_endpoint"] as? String == base + "/am/oauth2/realms/root/register", "\(asm)")
        #expect(asm["resource_indicators_supported"] as? Bool == true && (asm["scopes_supported"] as? [String])?.contains("bank") == true)
        let none = try g.fetch("POST", "/mcp", headers: [("Content-Type", "application/json")], body: Array(#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#.utf8))
        #expect(none.status == 401 && none.header("WWW-Authenticate") == #"Bearer scope="bank", resource_metadata="\#(base)/.well-known/oauth-protected-resource/mcp""#, "\(none)")
        let bad = try g.fetch("POST", "/mcp", headers: [("Authorization", "Bearer a.b.c"), ("Content-Type", "application/json")], body: Array("{}".utf8))
        #expect(bad.status == 401 && bad.header("WWW-Authenticate")?.contains(#"error="invalid_token""#) == true, "\(bad)")
        // Registration refuses a redirect URI that is neither https nor loopback.
        let reg = try g.fetch("POST", "/am/oauth2/realms/root/register", headers: [("Content-Type", "application/json")],
                              body: Array(#"{"redirect_uris":["http://evil.example/cb"]}"#.utf8))
        #expect(reg.status == 400 && reg.bodyText.contains("invalid_redirect_uri"), "\(reg)")
    }
}

extension McpStepUpTests {
    /// Anyone may register a client; none gets a token for a signed-in person without that
    /// person's consent in the authorization itself (remembered for the rest of the session).
    @Test("a registered client gets no code silently: the person consents first, and a consent is for its own client")
    func consent() throws {
        let bank = try start()
        let g = bank.gateway
        func register(_ name: String) throws -> String {
            let r = try g.fetch("POST", "/am/oauth2/realms/root/register", headers: [("Content-Type", "application/json")],
                                body: Array(#"{"redirect_uris":["https://\#(name).example/cb"],"client_name":"\#(name)","scope":"bank"}"#.utf8))
            return try #require(try r.json()["client_id"] as? String, "\(r)")
        }
        let evil = try register("evil"), good = try register("good")
        let session = try Kit.login(g)
        let cookie = [("Cookie", "iPlanetDirectoryPro=\(session)")]
        func authorize(_ client: String, _ extra: String = "") throws -> HTTPResponse {
            let host = client == evil ? "evil" : "good"
            return try g.fetch("GET", "/am/oauth2/realms/root/authorize?response_type=code&client_id=\(client)&redirect_uri="
                + Query.encode("https://\(host).example/cb") + "&scope=bank&state=s&code_challenge=\(PKCE.s256(OAuthKit.verifier))"
                + "&code_challenge_method=S256" + extra, headers: cookie)
        }
        let silent = try authorize(evil)
        let location = silent.header("Location") ?? ""
        #expect(silent.status == 302 && location.contains("/am/XUI/") && location.contains("composite_advice")
                && !location.hasPrefix("https://evil.example"), "a code without consent: \(silent)")
        // The consent asked of the person names the client; completing it for one client does not let another through.
        let goto = try #require(Query(target: location)["goto"])
        let consentTxid = try #require(Query(target: goto)["consent"])
        let step = try Kit.startComposite(g, txid: consentTxid, session: .header(session))
        #expect(step.bodyText.contains("Allow evil to act for you?"), "\(step)")
        let done = try Kit.post(g, Kit.authPath, Kit.answer(try step.json(), [0]), headers: [("iPlanetDirectoryPro", session)])
        #expect(done.status == 200, "\(done)")
        let stolen = try authorize(good, "&consent=\(consentTxid)")
        #expect(stolen.header("Location")?.hasPrefix("https://good.example/cb?code=") != true, "another client's consent was used: \(stolen)")
        let allowed = try authorize(evil, "&consent=\(consentTxid)")
        #expect(allowed.header("Location")?.hasPrefix("https://evil.example/cb?code=") == true, "\(allowed)")
        // Remembered for the session: the next authorization of that client needs no consent; the other client's still does.
        #expect(try authorize(evil).header("Location")?.hasPrefix("https://evil.example/cb?code=") == true)
        #expect(try authorize(good).header("Location")?.contains("composite_advice") == true)
    }
}

/// RFC 9126 pushed authorization requests (issue 28 item 2): the parameters pushed first, the
/// `request_uri` used once, by the client that pushed them.
@Suite("Pushed authorization requests", .testbed)
struct PushedAuthorizationRequestTests {
    @Test("a pushed request is authorized once, for its own client; a bad one is refused when pushed")
    func pushedOnce() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: OAuthKit.config())
        let token = try TransactionKit.login(g)
        let form = "client_id=app&response_type=code&redirect_uri=http%3A%2F%2F127.0.0.1%2Fcallback&scope=openid&state=s1"
            + "&code_challenge=\(PKCE.s256(OAuthKit.verifier))&code_challenge_method=S256"
        let formHeaders = [("Content-Type", "application/x-www-form-urlencoded")]
        let pushed = try g.fetch("POST", OAuthKit.issuerPath + "/par", headers: formHeaders, body: Array(form.utf8))
        #expect(pushed.status == 201 && pushed.header("Cache-Control") == "no-store", "\(pushed)")
        let answer = try pushed.json()
        let uri = try #require(answer["request_uri"] as? String)
        #expect(uri.hasPrefix("urn:ietf:params:oauth:request_uri:") && answer["expires_in"] as? Int == 60)
        let cookie = [("Cookie", "iPlanetDirectoryPro=\(token)")]
        // Another client cannot use it (and the attempt spends it: one use, whoever asks).
        let other = try g.fetch("GET", OAuthKit.issuerPath + "/authorize?client_id=other&request_uri=" + Query.encode(uri), headers: cookie)
        #expect(other.status == 400, "\(other)")
        let pushedAgain = try g.fetch("POST", OAuthKit.issuerPath + "/par", headers: formHeaders, body: Array(form.utf8))
        let uri2 = try #require(try pushedAgain.json()["request_uri"] as? String)
        let ok = try g.fetch("GET", OAuthKit.issuerPath + "/authorize?client_id=app&request_uri=" + Query.encode(uri2), headers: cookie)
        #expect(ok.status == 302 && ok.header("Location")?.hasPrefix("http://127.0.0.1/callback?code=") == true
                && ok.header("Location")?.contains("state=s1") == true, "\(ok)")
        let replay = try g.fetch("GET", OAuthKit.issuerPath + "/authorize?client_id=app&request_uri=" + Query.encode(uri2), headers: cookie)
        #expect(replay.status == 400 && replay.bodyText.contains("request_uri"), "\(replay)")
        // Checked when pushed: an unregistered redirect URI is an error to the client, at once.
        let bad = try g.fetch("POST", OAuthKit.issuerPath + "/par", headers: formHeaders,
                              body: Array(form.replacingOccurrences(of: "127.0.0.1%2Fcallback", with: "evil.example%2Fcb").utf8))
        #expect(bad.status == 400 && bad.bodyText.contains("redirect_uri"), "\(bad)")
        let discovery = try g.fetch("GET", OAuthKit.issuerPath + "/.well-known/openid-configuration").json()
        #expect(discovery["pushed_authorization_request_endpoint"] as? String == g.baseURL + OAuthKit.issuerPath + "/par")
    }

    @Test("a confidential client pushing with HTTP Basic need not repeat its client_id in the body")
    func confidentialPush() throws {
        let bed = try Testbed.current
        let secretFile = try bed.dir.write("conf.secret", "conf-secret-0123456789")
        let (g, _) = try bed.startGatewayWithBank(config: TransactionKit.config(["oauth2": ["clients": [[
            "clientId": "conf", "clientSecretFile": secretFile.path, "redirectUris": ["https://conf.example/cb"], "scopes": ["openid"],
        ]]]]))
        let form = "response_type=code&redirect_uri=https%3A%2F%2Fconf.example%2Fcb&scope=openid&state=s2"
            + "&code_challenge=\(PKCE.s256(OAuthKit.verifier))&code_challenge_method=S256"
        let basic = ("Authorization", "Basic " + Data("conf:conf-secret-0123456789".utf8).base64EncodedString())
        let pushed = try g.fetch("POST", OAuthKit.issuerPath + "/par", headers: [("Content-Type", "application/x-www-form-urlencoded"), basic],
                                 body: Array(form.utf8))
        let uri = try #require(try pushed.json()["request_uri"] as? String, "\(pushed)")
        let token = try TransactionKit.login(g)
        let ok = try g.fetch("GET", OAuthKit.issuerPath + "/authorize?client_id=conf&request_uri=" + Query.encode(uri),
                             headers: [("Cookie", "iPlanetDirectoryPro=\(token)")])
        #expect(ok.status == 302 && ok.header("Location")?.hasPrefix("https://conf.example/cb?code=") == true, "\(ok)")
    }
}

/// Client ID Metadata Documents: the SDK's `client_metadata_url` is its client ID; the gateway
/// fetches the document (https, verified, from where it is allowed to), and the person consents
/// to the client named by it and by its host.
extension McpStepUpTests {
    struct MetadataHost {
        let url: String
        let log: URL
        let caFile: URL
        var fetched: [String] { ((try? String(contentsOf: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init) }
    }

    /// The agent's metadata document on `https://localhost:PORT/agent.json`, with a certificate of its own.
    func metadataHost() throws -> MetadataHost {
        let bed = try Testbed.current
        let port = try Ports.free()
        let url = "https://localhost:\(port)/agent.json"
        let cert = bed.dir.url.appendingPathComponent("meta.crt"), key = bed.dir.url.appendingPathComponent("meta.key")
        let made = try bed.runTool("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
                                               "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                                               "-keyout", key.path, "-out", cert.path])
        guard made.status == 0 else { throw HarnessError("openssl: \(made)") }
        let doc = try bed.dir.write("agent.json", #"{"client_id":"\#(url)","client_name":"test agent","redirect_uris":["http://localhost:9/callback"],"#
            + #""grant_types":["authorization_code","refresh_token"],"response_types":["code"],"token_endpoint_auth_method":"none"}"#)
        let log = bed.dir.url.appendingPathComponent("fetched.log")
        let server = try bed.spawn(URL(fileURLWithPath: "/usr/bin/env"), ["python3", Self.folder.appendingPathComponent("metadata_server.py").path,
                                                                           String(port), cert.path, key.path, doc.path, log.path], name: "metadata-host")
        try server.waitForPort(port, timeout: 30)
        return MetadataHost(url: url, log: log, caFile: cert)
    }

    @Test("the SDK's client_metadata_url is its client: fetched once, consented to by name and host, its transfer runs once; a missing document is refused")
    func metadataDocument() throws {
        let host = try metadataHost()
        let bank = try start(oauth2: ["resources": [["path": "/mcp", "scopes": ["bank"]]],
                                      "clientIdMetadataDocuments": ["consentJourney": "ConfirmTransaction", "allowPrivateAddresses": true,
                                                                    "caFile": host.caFile.path]])
        let asm = try bank.gateway.fetch("GET", "/.well-known/oauth-authorization-server/am/oauth2/realms/root").json()
        #expect(asm["client_id_metadata_document_supported"] as? Bool == true && asm["registration_endpoint"] == nil, "\(asm)")
        let r = try agent(bank, #"[["call","balance",{}],["call","transfer",{"amount":25,"currency":"EUR","payee":"Bob"}]]"#, metadataURL: host.url)
        #expect((r["calls"] as? [[String: Any]])?.map { $0["ok"] as? Bool } == [true, true], "\(r)")
        #expect(r["client_id"] as? String == host.url, "\(r)")
        #expect(r["approvals"] as? [[String]] == [["Allow test agent (localhost) to act for you?"], ["Send 25 EUR to Bob?"]], "\(r)")
        #expect(bank.executed.map { "\($0["amount"] ?? "") \($0["payee"] ?? "")" } == ["25.0 Bob"])
        #expect(host.fetched == ["/agent.json"], "kept, not fetched again: \(host.fetched)")
        // A document that is not there (or any answer but 200: a redirect is not followed).
        let missing = host.url.replacingOccurrences(of: "agent.json", with: "missing.json")
        let refused = try bank.gateway.fetch("GET", "/am/oauth2/realms/root/authorize?response_type=code&client_id=\(Query.encode(missing))"
            + "&redirect_uri=" + Query.encode("http://localhost:9/callback") + "&code_challenge=\(PKCE.s256(OAuthKit.verifier))&code_challenge_method=S256")
        #expect(refused.status == 400 && refused.bodyText.contains("answered 404, not 200"), "\(refused)")
    }

    @Test("a document on a private address is not fetched unless allowed: the client is unknown at authorize and at the token endpoint")
    func metadataDocumentRefused() throws {
        let host = try metadataHost()
        let bank = try start(oauth2: ["resources": [["path": "/mcp", "scopes": ["bank"]]],
                                      "clientIdMetadataDocuments": ["consentJourney": "ConfirmTransaction", "caFile": host.caFile.path]])
        let session = try Kit.login(bank.gateway)
        func authorize(_ client: String) throws -> HTTPResponse {
            try bank.gateway.fetch("GET", "/am/oauth2/realms/root/authorize?response_type=code&client_id=\(Query.encode(client))&redirect_uri="
                + Query.encode("http://localhost:9/callback") + "&scope=bank&code_challenge=\(PKCE.s256(OAuthKit.verifier))"
                + "&code_challenge_method=S256", headers: [("Cookie", "iPlanetDirectoryPro=\(session)")])
        }
        let refused = try authorize(host.url)
        #expect(refused.status == 400 && refused.bodyText.contains("resolves to 127.0.0.1, which is not a public address"), "\(refused)")
        let token = try bank.gateway.fetch("POST", "/am/oauth2/realms/root/access_token", headers: [("Content-Type", "application/x-www-form-urlencoded")],
                                           body: Array("grant_type=authorization_code&code=x&code_verifier=\(OAuthKit.verifier)&client_id=\(Query.encode(host.url))".utf8))
        #expect(token.status == 401 && token.bodyText.contains("invalid_client"), "\(token)")
        #expect(host.fetched.isEmpty, "the gateway connected to a private address: \(host.fetched)")
    }
}
