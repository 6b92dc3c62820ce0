import Foundation
import Testing
import TestSupport

/// Issue 26: passkeys over the wire, driven by a software authenticator written against the
/// SDKs' outcome format (`webauthn/passkey_flows.py`, python-fido2's COSE and CBOR), and the
/// Txn-Token's evidence checked by an independent verifier (py_webauthn).
@Suite("Passkeys on the wire", .testbed)
struct PasskeyWireTests {
    typealias Kit = TransactionKit
    static let script = BinaryLocator.packageRoot.appendingPathComponent("Tests/IntegrationTests/webauthn/passkey_flows.py")

    /// demo-bank's users and policies, `/echo` approved with a passkey (its body bound and
    /// shown), `/echo-uv` with user verification required, on `http://localhost:PORT` (a
    /// passkey's relying party is a domain name).
    static func config(_ base: String) -> [String: Any] {
        let tx: (String) -> [String: Any] = { journey in
            ["journey": journey, "bind": ["body": ["/amount", "/currency", "/payee"]], "display": "Send {amount} {currency} to {payee}?"]
        }
        return Kit.config([
            "publicUrl": base,
            "webauthn": ["rpName": "Demo Bank", "algorithms": ["ES256", "EdDSA", "RS256"],
                         "securePaymentConfirmation": ["payee": "/payee", "instrumentName": "Demo Bank account"]],
            "txnTokens": ["enabled": true, "audience": "demo-bank"],
            "journeys": [
                "Login": [["type": "UsernamePassword"]],
                "ConfirmTransaction": [["type": "TOTP"]],
                "RegisterPasskey": [["type": "WebAuthnRegistration"]],
                "PasskeyTx": [["type": "WebAuthnAuthentication"]],
                "PasskeyTxUV": [["type": "WebAuthnAuthentication", "userVerification": "required"]],
                "PasskeyLogin": [["type": "WebAuthnAuthentication", "usernameless": true]],
                "PasskeyOrCode": [["type": "WebAuthnAuthentication", "fallback": "TOTP"]],
            ],
            "policies": [
                ["name": "echo", "resources": ["/echo"], "actions": ["POST"], "subjects": "authenticated", "transaction": tx("PasskeyTx")],
                ["name": "echo-uv", "resources": ["/echo-uv"], "actions": ["POST"], "subjects": "authenticated", "transaction": tx("PasskeyTxUV")],
                ["name": "echo-fallback", "resources": ["/echo-fallback"], "actions": ["POST"], "subjects": "authenticated",
                 "transaction": tx("PasskeyOrCode")],
                ["name": "transfer", "resources": ["/transfer"], "actions": ["POST"], "subjects": "authenticated",
                 "transaction": tx("PasskeyOrCode")],
            ],
        ])
    }

    /// What the script reported, and the gateway's log.
    func run(_ flow: String) throws -> [String: Any] { try runLogged(flow).report }

    func runLogged(_ flow: String, gateway: GatewayInstance? = nil) throws -> (report: [String: Any], log: String) {
        let bed = try Testbed.current
        let g = try gateway ?? start()
        let r = try bed.runTool("python3", [Self.script.path, "--base", "http://localhost:\(g.port)", flow], timeout: 90)
        let last = r.stdout.split(separator: "\n").last.map(String.init) ?? ""
        guard r.status == 0, let obj = (try? JSONSerialization.jsonObject(with: Data(last.utf8))) as? [String: Any] else {
            if r.stderr.contains("No module named") {
                throw HarnessError("fido2 or webauthn is not installed: run scripts/install-deps.sh (it installs them with pip)\n\(r)")
            }
            throw HarnessError("passkey_flows.py \(flow) failed:\n\(r)\n\(g.process.stderrTail(40))")
        }
        return (obj, g.process.stdout + g.process.stderr)
    }

    func start() throws -> GatewayInstance {
        let bed = try Testbed.current
        let bank = try bed.startDemoBank()
        return try bed.startGateway { port in
            Testbed.gatewayConfig(port: port, upstream: bank.url, overrides: Self.config("http://localhost:\(port)"))
        }
    }

    @Test("the command line, asked for a passkey, takes the one-time code the step offers; without one it says to use a browser")
    func commandLine() throws {
        let bed = try Testbed.current
        let g = try start()
        let r = try runLogged("register", gateway: g).report
        #expect(r["status"] as? Int == 200, "\(r)")
        let base = "http://localhost:\(g.port)", session = ["--session-file", bed.dir.url.appendingPathComponent("cli.json").path]
        let login = try bed.runTxgate(["login", base, "--answer", "User Name=demo", "--answer", "Password=\(Kit.password)"] + session)
        #expect(login.status == 0, "\(login)")
        var codes = Kit.Codes()
        let request = try bed.runTxgate(["request", base + "/transfer", "-d", #"{"amount":5,"currency":"EUR","payee":"Bob"}"#,
                                         "--answer", "One Time Password=\(codes.next(Kit.demoSecret))"] + session)
        #expect(request.status == 0 && request.stdout.contains("executed"), "\(request)")
        #expect(request.stderr.contains("asks for a passkey, which needs a browser: choosing \"Use a one-time code instead\""), "\(request)")
        let noFallback = try bed.runTxgate(["request", base + "/echo", "-d", #"{"amount":5,"currency":"EUR","payee":"Bob"}"#] + session)
        #expect(noFallback.status != 0 && noFallback.stderr.contains("approve it in a browser"), "\(noFallback)")
    }

    @Test("a passkey approves a transaction once, and the Txn-Token's evidence verifies with py_webauthn")
    func approve() throws {
        let g = try start()
        let r = try runLogged("approve", gateway: g).report
        // The audit trail keeps the assertion with the approval.
        let audit = try Testbed.current.runTxgate(["audit", "--config", g.configURL.path, "--since", "1h", "--format", "jsonl"])
        let approval = audit.stdout.split(separator: "\n").first { $0.contains(#""event":"approved""#) }.map(String.init) ?? ""
        let evidence = (try? JSONSerialization.jsonObject(with: Data(approval.utf8)) as? [String: Any])?["passkey"] as? [String: Any]
        #expect(evidence?["alg"] as? String == "webauthn-tx-v1" && evidence?["signature"] is String, "\(audit)")
        #expect(r["register"] as? Int == 200, "\(r)")
        #expect(r["status"] as? Int == 200, "\(r)")
        #expect(r["retry"] as? Int == 200, "the approved request was not executed: \(r)")
        #expect(r["second_retry"] as? Int == 401, "the approval opened a second request: \(r)")
        #expect(r["independently_verified"] as? Bool == true, "\(r)")
        #expect(r["tampered_verified"] as? Bool == false, "evidence for another amount verified: \(r)")
        let approved = try #require(r["approved"] as? [String: Any])
        #expect(approved["display"] as? String == "Send 250 EUR to Bob?", "\(approved)")
        #expect(approved["method"] as? String == "POST" && (approved["resource"] as? String)?.hasSuffix("/echo") == true, "\(approved)")
        let bound = try #require(approved["bound"] as? [String: Any])
        #expect(bound["/amount"] as? Int == 250 && bound["/payee"] as? String == "Bob", "\(bound)")
        // The allow list in AM's JSON form (ids as signed bytes) and its script form.
        let allow = try #require(r["allowCredentials"] as? [[String: Any]])
        #expect(allow.count == 1 && (allow.first?["id"] as? [Int])?.count == 32, "\(allow)")
        #expect((r["allowCredentialsScript"] as? String)?.hasPrefix(#"allowCredentials: [{ "type": "public-key", "id": new Int8Array(["#) == true)
    }

    @Test("an Ed25519 passkey (EdDSA, where the configuration allows it) approves, and its evidence verifies independently")
    func eddsa() throws {
        let r = try run("eddsa")
        #expect(r["register"] as? Int == 200 && r["status"] as? Int == 200 && r["retry"] as? Int == 200, "\(r)")
        #expect(r["independently_verified"] as? Bool == true, "\(r)")
    }

    @Test("Secure Payment Confirmation: the browser's dialog must have shown the transaction's amount and payee")
    func securePaymentConfirmation() throws {
        let (r, log) = try runLogged("spc")
        let shown = try #require(r["shown"] as? [String: Any], "\(r)")
        #expect((shown["total"] as? [String: String]) == ["currency": "EUR", "value": "250"], "\(shown)")
        #expect(shown["payeeName"] as? String == "Bob" && (shown["instrument"] as? [String: String])?["displayName"] == "Demo Bank account")
        #expect(r["other_total"] as? Int == 401 && r["other_payee"] as? Int == 401, "\(r)")
        #expect(log.contains("payment.total is not what the transaction binds") && log.contains("payment.payeeName"), "\(log.suffix(3000))")
        #expect(r["status"] as? Int == 200 && r["retry"] as? Int == 200, "\(r)")
        #expect(r["evidence_type"] as? String == "payment.get", "\(r)")
    }

    /// Each refusal: the approval fails with 401 and the request is not executed.
    @Test("refused: wrong origin, wrong RP ID, a counter that goes back, another transaction's, a replay, an unknown or another user's passkey",
          arguments: ["wrong_origin", "wrong_rp", "counter", "other_transaction", "replay", "unknown_credential", "other_user"])
    func refused(_ flow: String) throws {
        let (r, log) = try runLogged(flow)
        // Refused for the reason the case is about (the log names it), not by accident.
        let reason = ["wrong_origin": "wrongOrigin", "wrong_rp": "wrongRPIDHash", "counter": "counterRegression",
                      "other_transaction": "challengeMismatch", "replay": "already answered", "unknown_credential": "unknown passkey",
                      "other_user": "another user's"][flow]!
        #expect(log.contains(reason), "\(flow): no '\(reason)' in the gateway's log:\n\(log.suffix(3000))")
        #expect(r["register"] as? Int == 200, "\(r)")
        #expect(r["status"] as? Int == 401, "\(flow) was not refused: \(r)")
        #expect(r["retry"] as? Int == 401, "\(flow): the request was executed: \(r)")
        switch flow {
        case "counter": #expect(r["first"] as? Int == 200, "\(r)")
        case "replay":
            #expect(r["first"] as? Int == 200, "\(r)")
            #expect(r["other_step"] as? Int == 401, "a used assertion approved another transaction: \(r)")
            #expect(log.contains("challengeMismatch"), "\(log.suffix(3000))")
        case "other_transaction": #expect(r["b_retry"] as? Int == 401, "\(r)")
        case "other_user": #expect(r["other_register"] as? Int == 200, "\(r)")
        default: break
        }
    }

    @Test("user verification required: an assertion without UV is refused, one with it passes")
    func userVerification() throws {
        let (r, log) = try runLogged("uv_required")
        #expect(log.contains("userNotVerified"), "\(log.suffix(3000))")
        #expect(r["without_uv"] as? Int == 401, "\(r)")
        #expect(r["with_uv"] as? Int == 200, "\(r)")
    }

    @Test("a registration whose attestation object is not CBOR is refused, and the next one works")
    func malformedCBOR() throws {
        let (r, log) = try runLogged("malformed_cbor")
        #expect(log.contains("attestationObject"), "\(log.suffix(3000))")
        #expect(r["status"] as? Int == 401, "\(r)")
        #expect(r["after"] as? Int == 200, "\(r)")
    }

    @Test("a discoverable passkey signs in with no user name: the user handle names the user")
    func usernameless() throws {
        let r = try run("usernameless")
        #expect(r["status"] as? Int == 200, "\(r)")
        #expect(r["android_status"] as? Int == 200, "the Android SDK's form of the user handle: \(r)")
        #expect((r["allowCredentials"] as? [Any])?.isEmpty == true, "\(r)")
        let session = try #require(r["session"] as? [String: Any])
        #expect(session["uid"] as? String == "demo", "\(session)")
    }

    @Test("a passkey step with a TOTP fallback: no passkey gets the code page, a passkey's owner may choose it")
    func fallback() throws {
        let r = try run("fallback")
        #expect(r["no_passkey_types"] as? [String] == ["TextOutputCallback", "PasswordCallback"], "\(r)")
        #expect(r["no_passkey"] as? Int == 200, "\(r)")
        #expect(r["passkey_types"] as? [String] == ["TextOutputCallback", "MetadataCallback", "HiddenValueCallback", "ConfirmationCallback"], "\(r)")
        #expect(r["choice"] as? [String] == ["Use a one-time code instead"], "\(r)")
        #expect(r["chosen_types"] as? [String] == ["TextOutputCallback", "PasswordCallback"], "\(r)")
        #expect(r["status"] as? Int == 200, "\(r)")
    }

    @Test("the passkeys API lists and removes the session's own passkeys only; a removed one approves nothing")
    func account() throws {
        let r = try run("account")
        let list = try #require(r["list"] as? [Any])
        #expect(list.first as? Int == 200, "\(r)")
        let items = try #require((list.last as? [String: Any])?["result"] as? [[String: Any]])
        #expect(items.count == 1 && items.first?["name"] as? String == "phone" && items.first?["createdS"] is Int, "\(items)")
        #expect(r["delete_others"] as? Int == 404, "another user's passkey was removable: \(r)")
        #expect(r["no_session"] as? Int == 401, "\(r)")
        #expect(r["as_form"] as? Int == 415, "\(r)")
        #expect((r["delete"] as? [Any])?.first as? Int == 200, "\(r)")
        #expect(((r["after"] as? [Any])?.last as? [String: Any])?["result"] as? [Any] != nil)
        #expect((((r["after"] as? [Any])?.last as? [String: Any])?["result"] as? [Any])?.isEmpty == true, "\(r)")
        #expect(((r["other_after"] as? [String: Any])?["result"] as? [Any])?.count == 1, "\(r)")
        let approval = try #require(r["approval_after_removal"] as? [Any])
        #expect(approval.first as? Int == 401, "\(r)")
        #expect(((approval.last as? [String: Any])?["detail"] as? [String: Any])?["reason"] as? String == "no_passkey", "\(r)")
    }
}
