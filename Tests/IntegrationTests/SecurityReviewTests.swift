import Foundation
import Testing
import TestSupport

/// The security review's findings (issue 11), as a client sees them on the wire: each test
/// failed on the gateway before the fix.
@Suite("Security review", .testbed)
struct SecurityReviewTests {
    typealias Kit = TransactionKit

    /// A gateway with TransactionKit's users, journeys and policies in front of demo-bank.
    func kitGateway(_ extra: [String: Any] = [:]) throws -> GatewayInstance {
        try Testbed.current.startGatewayWithBank(config: Kit.config(extra)).0
    }
}

// MARK: item 4: method overrides, Forwarded, underscores, Host

extension SecurityReviewTests {
    @Test("method overrides, Forwarded and underscore headers do not reach the backend")
    func overridesAreDropped() throws {
        let r = try Testbed.current.startGatewayWithBank().0.fetch("GET", "/echo", headers: [
            ("X-HTTP-Method-Override", "DELETE"), ("X-HTTP-Method", "DELETE"), ("X-Method-Override", "DELETE"),
            ("Forwarded", "for=10.0.0.1;host=admin.internal"), ("X_Forwarded_For", "10.0.0.1"), ("X-User_Id", "root"),
            ("X-Custom", "kept"),
        ])
        #expect(r.status == 200, "\(r)")
        let echo = try EchoedRequest(r)
        for name in ["X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override", "Forwarded", "X_Forwarded_For", "X-User_Id"] {
            #expect(!echo.hasHeader(name), "\(name) reached the backend:\n\(echo)")
        }
        #expect(echo.headerValues("X-Custom") == ["kept"], "\(echo)")
    }

    @Test("an HTTP/1.1 request without Host, or with two, is a 400 and never proxied")
    func hostMustBeUnambiguous() throws {
        let bed = try Testbed.current
        let (gateway, _) = try bed.startGatewayWithBank()
        let c = try gateway.connect()
        defer { c.close() }
        try c.send("GET /echo HTTP/1.1\r\nX-Test: none\r\n\r\n")
        let none = try c.readResponse()
        #expect(none.status == 400, "\(none)")
        #expect(none.bodyText.contains("Host"), "\(none.bodyText)")

        let two = try gateway.fetch("GET", "/echo", headers: [("Host", "a.example"), ("Host", "b.example")])
        #expect(two.status == 400, "\(two)")
        #expect(two.bodyText.contains("2 Host headers"), "\(two.bodyText)")

        // HTTP/1.0 without Host is still fine.
        let old = try gateway.connect()
        defer { old.close() }
        try old.send("GET /echo HTTP/1.0\r\n\r\n")
        #expect(try old.readResponse().status == 200)
    }
}

// MARK: item 6: policies?_action=evaluate about others only for security.policyEvaluators

extension SecurityReviewTests {
    static let evaluatePath = "/am/json/realms/root/policies?_action=evaluate"

    static func ask(_ g: GatewayInstance, caller: String, subject: [String: Any]) throws -> HTTPResponse {
        try Kit.post(g, evaluatePath, ["resources": [Kit.publicURL(g) + "/transfer"], "subject": subject],
                     headers: [("iPlanetDirectoryPro", caller)])
    }

    @Test("a user cannot fill another user's pending transactions or probe who exists")
    func onlyEvaluatorsMayAskForOthers() throws {
        let g = try kitGateway(["security": ["maxPendingTransactions": 2, "policyEvaluators": ["other"]]])
        let demo = try Kit.login(g, user: "demo")
        for sub in ["other", "nobody-by-this-name"] {
            let r = try Self.ask(g, caller: demo, subject: ["claims": ["sub": sub]])
            expectGatewayError(r, 403)
        }
        // For themselves: an answer (a transaction advice, demo's first pending transaction:
        // the refused attempts above created none).
        let own = try Self.ask(g, caller: demo, subject: ["claims": ["sub": "demo"]])
        #expect(own.status == 200, "\(own)")
        #expect(own.bodyText.contains("TransactionConditionAdvice"), "\(own.bodyText)")
        // The configured evaluator may ask about demo (the same question: the same transaction)…
        let agent = try Kit.login(g, user: "other")
        let forDemo = try Self.ask(g, caller: agent, subject: ["claims": ["sub": "demo"]])
        #expect(forDemo.status == 200, "\(forDemo)")
        #expect(forDemo.bodyText.contains("TransactionConditionAdvice"), "\(forDemo.bodyText)")
        // …so demo's own transfer is the second, and another the third, over the limit.
        #expect(try Kit.transfer(g, token: demo, body: Kit.transferBody).status == 401)
        expectGatewayError(try Kit.transfer(g, token: demo, body: IdempotentChallengeTests.amount(7)), 429)
    }
}

// MARK: item 13: authIds in base64url without padding only: TxGateTests' LoginFlowTests.onlyBase64URL
// (in process: the authId changes each second, and the clock is moved instead of waited for)

// MARK: item 9: login CSRF

extension SecurityReviewTests {

    @Test("authenticate refuses non-JSON bodies and foreign origins, and still takes an empty body")
    func crossSiteLoginIsRefused() throws {
        let g = try kitGateway()
        // Start a journey properly, then try to finish it as a cross-site form would.
        var step = try Kit.post(g, Kit.authPath, nil).json()
        step = Kit.answer(step, ["demo", Kit.password])
        let json = try JSONSerialization.data(withJSONObject: step)
        for type in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"] {
            let r = try g.fetch("POST", Kit.authPath, headers: [("Content-Type", type)], body: Array(json))
            expectGatewayError(r, 415)
            #expect(!r.hasHeader("Set-Cookie"), "\(type):\n\(r)")
        }
        let foreign = try g.fetch("POST", Kit.authPath, headers: [("Content-Type", "application/json"), ("Origin", "https://evil.example")],
                                  body: Array(json))
        expectGatewayError(foreign, 403)
        #expect(!foreign.hasHeader("Set-Cookie"))
        // The gateway's own origin, and no body at all (the Android SDK), still work.
        let own = try g.fetch("POST", Kit.authPath, headers: [("Content-Type", "application/json"), ("Origin", Kit.publicURL(g))],
                              body: Array(json))
        #expect(own.status == 200 && own.hasHeader("Set-Cookie"), "\(own)")
        let empty = try g.fetch("POST", Kit.authPath)
        #expect(empty.status == 200, "\(empty)")
    }
}

// MARK: item 14: error detail stays in the log

extension SecurityReviewTests {
    @Test("a TLS failure upstream is a plain 502; /-/health does not name the upstream")
    func noDetailToClients() throws {
        // The bank speaks plain HTTP: the TLS handshake fails with an OpenSSL error.
        let bank = try Testbed.current.startDemoBank()
        let g = try Testbed.current.startGateway(upstream: "https://127.0.0.1:\(bank.port)")
        let r = try g.fetch("GET", "/health")
        expectGatewayError(r, 502)
        for leak in ["SSL", "error:", "127.0.0.1", "\(bank.port)"] {
            #expect(!r.bodyText.contains(leak), "the 502 tells the client '\(leak)':\n\(r.bodyText)")
        }
        let health = try g.fetch("GET", "/-/health")
        #expect(health.status == 200, "\(health)")
        #expect(!health.bodyText.contains("127.0.0.1") && !health.bodyText.contains("upstream"), "\(health.bodyText)")
        // The operator still reads what went wrong.
        var logged: [String: Any]?
        Timing.poll(timeout: 5) {
            logged = g.logLines().first { $0["msg"] as? String == "upstream request failed" }
            return logged != nil
        }
        #expect((logged?["error"] as? String)?.isEmpty == false, "\(String(describing: logged))")
    }
}

// MARK: item 11: a failed login logs the name only when it is an account

extension SecurityReviewTests {

    @Test("a password typed into the name field never reaches the log")
    func unknownNamesAreNotLogged() throws {
        let g = try kitGateway()
        let secret = "Correct-Horse-Battery-9"
        let step = try Kit.post(g, Kit.authPath, nil).json()
        let r = try Kit.post(g, Kit.authPath, Kit.answer(step, [secret, "whatever"]))
        #expect(r.status == 401, "\(r)")
        let known = try Kit.post(g, Kit.authPath, Kit.answer(try Kit.post(g, Kit.authPath, nil).json(), ["demo", "wrong"]))
        #expect(known.status == 401, "\(known)")
        var failures: [[String: Any]] = []
        Timing.poll(timeout: 5) {
            failures = g.logLines().filter { $0["msg"] as? String == "login failed" }
            return failures.count >= 2
        }
        #expect(failures.count == 2, "\(failures)")
        #expect(!g.process.stderr.contains(secret), "the typed secret is in the log")
        #expect(failures.contains { $0["user"] as? String == "demo" }, "\(failures)")
    }
}

// MARK: item 7: lockout is not a weapon

extension SecurityReviewTests {
    static func login(from source: String, _ g: GatewayInstance, password: String) throws -> HTTPResponse {
        let start = try Kit.post(g, Kit.authPath, nil, source: source)
        return try Kit.post(g, Kit.authPath, Kit.answer(try start.json(), ["demo", password]), source: source)
    }

    @Test("wrong passwords from one source lock that source, not the account, and never a live session's approvals")
    func failuresCountPerSourceAndSession() throws {
        let g = try kitGateway()
        let victim = try Kit.login(g)
        var codes = Kit.Codes()
        for _ in 0..<6 {
            #expect(try Self.login(from: "127.0.0.3", g, password: "wrong").status == 401)
        }
        // The guessing source is locked, even with the right password…
        #expect(try Self.login(from: "127.0.0.3", g, password: Kit.password).status == 401)
        // …the account is not: the user logs in from elsewhere…
        let elsewhere = try Self.login(from: "127.0.0.4", g, password: Kit.password)
        #expect(elsewhere.status == 200, "\(elsewhere)")
        // …and approves a transfer in the session they already had.
        let txid = try Kit.challengeTxid(try Kit.transfer(g, token: victim, body: Kit.transferBody))
        try Kit.approve(g, txid: txid, token: victim, code: codes.next(Kit.demoSecret))
        #expect(try Kit.transfer(g, token: victim, body: Kit.transferBody, query: "?_txid=\(txid)").status == 201)
    }
}

// MARK: item 10: the store's files are private

extension SecurityReviewTests {
    @Test("txgate.db and its -wal and -shm files are readable by the gateway's user only")
    func storeFilesAreOwnerOnly() throws {
        let g = try kitGateway()
        _ = try Kit.login(g)  // writes a session: the WAL and shared-memory files exist now
        let folder = try Testbed.current.dir.url.appendingPathComponent("var")
        for name in ["txgate.db", "txgate.db-wal", "txgate.db-shm"] {
            let path = folder.appendingPathComponent(name).path
            let mode = (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue
            #expect(mode == 0o600, "\(name) has mode \(String(mode ?? 0, radix: 8))")
        }
    }
}
