import Foundation
import Testing
import TxGateCore
import TxGateCrypto
import TestSupport

/// The embedded authentication service on the wire: AM's /json/authenticate and
/// /json/sessions exactly as SDKs and curl scripts expect them (WIRE.md §4).
/// The login journey's shapes, the authId's lifetime, session and lockout expiry are
/// TxGateTests' LoginFlowTests.
@Suite(.testbed) struct AuthTests: JourneyClient {
    static let password = "Ch4ngeMe!"
    static let totpSecret = "JBSWY3DPEHPK3PXP"
    static let hash = PasswordHash.hash(password)

    static func authConfig(_ extra: [String: Any] = [:]) -> [String: Any] {
        deepMerge([
            "publicUrl": "http://127.0.0.1:1",
            "users": [
                ["username": "demo", "passwordHash": hash, "email": "demo@example.com", "totpSecret": totpSecret],
                ["username": "other", "passwordHash": hash, "totpSecret": "GEZDGNBVGY3TQOJQ"],
            ],
            "journeys": [
                "Login": [["type": "UsernamePassword"]],
                "ConfirmTransaction": [["type": "TOTP"]],
            ],
            "realms": ["alpha"],
        ], extra)
    }

    /// Logs in through the whole journey and returns the session token.
    static func login(_ g: GatewayInstance, user: String = "demo", password: String = password) throws -> String {
        let step = try post(g, authPath, nil).json()
        let done = try post(g, authPath, answer(step, [user, password]))
        guard done.status == 200, let token = try done.json()["tokenId"] as? String else {
            throw HarnessError("login failed: \(done)")
        }
        return token
    }

    static func totp(_ secret: String = totpSecret, offset: Int = 0) -> String {
        TOTP(secret: Base32.decode(secret)!).code(at: Int(Date().timeIntervalSince1970) + offset)
    }

    @Test func wrongPasswordThenLockoutWithTheSameAnswer() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Self.authConfig(["security": ["maxFailedAttempts": 3, "lockoutWindowS": 60, "lockoutDurationS": 60]]))
        let failure = #"{"code":401,"reason":"Unauthorized","message":"Login failure","detail":{"failureUrl":""}}"#
        for _ in 0..<3 {
            let step = try Self.post(g, Self.authPath, nil).json()
            let r = try Self.post(g, Self.authPath, Self.answer(step, ["demo", "wrong-password"]))
            #expect(r.status == 401)
            #expect(r.bodyText == failure)
        }
        // Locked out: the right password gets the same answer.
        let step = try Self.post(g, Self.authPath, nil).json()
        let locked = try Self.post(g, Self.authPath, Self.answer(step, ["demo", Self.password]))
        #expect(locked.status == 401)
        #expect(locked.bodyText == failure)
        // An unknown user: same answer too.
        let s2 = try Self.post(g, Self.authPath, nil).json()
        let unknown = try Self.post(g, Self.authPath, Self.answer(s2, ["nobody", "x"]))
        #expect(unknown.status == 401 && unknown.bodyText == failure)
        // The guessing client is locked out, for every account; another client is not.
        let other = try Self.post(g, Self.authPath, Self.answer(try Self.post(g, Self.authPath, nil).json(), ["other", Self.password]))
        #expect(other.bodyText == failure)
        let elsewhere = try Self.post(g, Self.authPath, nil, source: "127.0.0.2").json()
        #expect(try Self.post(g, Self.authPath, Self.answer(elsewhere, ["other", Self.password]), source: "127.0.0.2").status == 200)
        let logs = g.logLines()
        #expect(logs.contains { $0["msg"] as? String == "locked out after repeated failures" && $0["locked"] as? String == "source"
            && $0["user"] as? String == "demo" })
        #expect(!g.process.stderr.contains("wrong-password"))
        #expect(!g.process.stderr.contains(Self.password))
    }

    @Test func logoutEndsTheSession() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Self.authConfig())
        let token = try Self.login(g)
        let out = try Self.post(g, "/am/json/realms/root/sessions?_action=logout", nil, headers: [("iPlanetDirectoryPro", token)])
        #expect(out.status == 200)
        #expect(out.header("Set-Cookie")?.contains("Max-Age=0") == true)
        let valid = try Self.post(g, "/am/json/realms/root/sessions?_action=validate", ["tokenId": token])
        #expect(valid.bodyText == #"{"valid":false}"#)
        #expect(try Self.post(g, "/am/json/realms/root/sessions?_action=logout", nil, headers: [("iPlanetDirectoryPro", token)]).status == 401)
    }

    /// Sessions read in the last second come from the gateway's session cache; a logout on
    /// this instance must end the session at once on every worker, cached or not.
    @Test func logoutEndsACachedSessionAtOnceOnEveryWorker() throws {
        let bed = try Testbed.current
        let policies: [[String: Any]] = [["name": "accounts", "resources": ["/accounts"], "actions": ["GET"]]]
        let (g, _) = try bed.startGatewayWithBank(config: Self.authConfig(["workers": 2, "policies": policies]))
        let token = try Self.login(g)
        let auth = [("iPlanetDirectoryPro", token), ("x-authenticate-response", "header")]
        // Several connections, so that both workers read (and cache) the session.
        for _ in 0..<6 { #expect(try g.fetch("GET", "/accounts", headers: auth).status == 200) }
        #expect(try Self.post(g, "/am/json/realms/root/sessions?_action=validate", ["tokenId": token]).bodyText.contains(#""valid":true"#))
        #expect(try Self.post(g, "/am/json/realms/root/sessions?_action=logout", nil, headers: [("iPlanetDirectoryPro", token)]).status == 200)
        for _ in 0..<6 {
            let r = try g.fetch("GET", "/accounts", headers: auth)
            #expect(r.status == 401, "a logged-out session still served from a cache:\n\(r)")
        }
        #expect(try Self.post(g, "/am/json/realms/root/sessions?_action=validate", ["tokenId": token]).bodyText == #"{"valid":false}"#)
    }

    @Test func sessionsSurviveARestart() throws {
        let bed = try Testbed.current
        let bank = try bed.startDemoBank()
        let g1 = try bed.startGateway(upstream: bank.url, config: Self.authConfig())
        let token = try Self.login(g1)
        g1.process.terminate()
        #expect(g1.process.waitForExit(timeout: 10) == 0)
        #expect(FileManager.default.fileExists(atPath: bed.dir.url.appendingPathComponent("var/txgate.db").path))
        let key = bed.dir.url.appendingPathComponent("var/signing.key").path
        let perms = try FileManager.default.attributesOfItem(atPath: key)[.posixPermissions] as? Int
        #expect(perms == 0o600)

        let g2 = try bed.startGateway(upstream: bank.url, config: Self.authConfig())
        let valid = try Self.post(g2, "/am/json/realms/root/sessions?_action=validate", nil, headers: [("iPlanetDirectoryPro", token)])
        #expect(try valid.json()["valid"] as? Bool == true)
    }

    @Test func aTOTPCodeIsAcceptedOnceThenRefused() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Self.authConfig())
        let token = try Self.login(g)
        let code = Self.totp()
        func confirm() throws -> HTTPResponse {
            let start = try Self.post(g, Self.authPath + "?authIndexType=service&authIndexValue=ConfirmTransaction", nil,
                                      headers: [("iPlanetDirectoryPro", token)])
            let step = try start.json()
            let cbs = step["callbacks"] as! [[String: Any]]
            #expect(cbs.map { $0["type"] as? String } == ["PasswordCallback"])
            #expect(((cbs[0]["output"] as! [[String: Any]])[0]["value"]) as? String == "One Time Password")
            return try Self.post(g, Self.authPath, Self.answer(step, [code]), headers: [("iPlanetDirectoryPro", token)])
        }
        #expect(try confirm().status == 200)
        let again = try confirm()
        #expect(again.status == 401)
        #expect(!g.process.stderr.contains(code))
        #expect(!g.process.stderr.contains(token))
    }

    @Test func realmsAndUnknownEndpoints() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Self.authConfig())
        #expect(try Self.post(g, "/am/json/realms/root/realms/alpha/authenticate", nil).status == 200)
        let missing = try Self.post(g, "/am/json/realms/root/realms/nope/authenticate", nil)
        #expect(missing.status == 404)
        #expect(missing.bodyText.contains("realm '/nope' is not configured"))
        #expect(try Self.post(g, Self.authPath + "?authIndexType=service&authIndexValue=Nope", nil).status == 400)
        #expect(try g.fetch("GET", Self.authPath).status == 405)
        // A session from the root realm is not valid in another realm.
        let token = try Self.login(g)
        let v = try Self.post(g, "/am/json/realms/root/realms/alpha/sessions?_action=validate", nil, headers: [("iPlanetDirectoryPro", token)])
        #expect(v.bodyText == #"{"valid":false}"#)
    }

    @Test func gotoMustStayOnTheGatewaysOrigin() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Self.authConfig())
        let bad = try Self.post(g, Self.authPath + "?goto=" + Query.encode("https://evil.example.com/"), nil)
        #expect(bad.status == 400)
        #expect(try g.fetch("GET", "/am/XUI/?goto=" + Query.encode("//evil.example.com/")).status == 400)
        let page = try g.fetch("GET", "/am/XUI/?goto=%2Faccounts")
        #expect(page.status == 200)
        #expect(page.header("Content-Type")?.hasPrefix("text/html") == true)
        #expect(page.header("Content-Security-Policy")?.contains("script-src 'sha256-") == true)
        let step = try Self.post(g, Self.authPath + "?goto=%2Faccounts", nil).json()
        let done = try Self.post(g, Self.authPath, Self.answer(step, ["demo", Self.password]))
        #expect(try done.json()["successUrl"] as? String == "/accounts")
    }
}
