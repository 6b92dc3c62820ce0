import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif
import TestSupport
import TxGateCore

/// `pdp.type: "am"` (WIRE.md §1): gateway A decides nothing itself and asks gateway B (in the
/// AM role: users, journeys, policies, transactions) over AM's REST evaluate, as an agent.
/// Everything is asserted on what clients of A and B see on the wire.
@Suite(.testbed) struct RemotePDPTests {
    typealias Kit = TransactionKit

    // MARK: The SDK flow through A, with the journey on B

    @Test func sdkFlowThroughRemotePDPAllowsExactlyOneOfFiftyRetries() throws {
        let bed = try Testbed.current
        let pair = try TwoGateways.start(bed)
        let (a, b) = (pair.a, pair.b)
        let token = try Kit.login(b)
        var codes = Kit.Codes()

        // An allowed GET through A: B decided, demo-bank answered, A's access log names the user.
        let accounts = try a.fetch("GET", "/accounts", headers: [("iPlanetDirectoryPro", token)])
        #expect(accounts.status == 200, "GET /accounts through A:\n\(accounts)")
        #expect(try waitForLog(a) { $0["path"] as? String == "/accounts" && $0["user"] as? String == "demo" },
                "A's access log does not name the user")

        // The transaction challenge comes from B's policy, with am_uri pointing at B.
        let first = try TwoGateways.transfer(a, token: token, amount: 100)
        let txid = try Kit.challengeTxid(first)
        let params = try Kit.ssoAdviceParams(try #require(first.header("WWW-Authenticate")))
        #expect(params["am_uri"] == "http://127.0.0.1:\(b.port)/am/", "\(first.headerSummary)")
        try Kit.approve(b, txid: txid, token: token, code: codes.next(Kit.demoSecret))

        // 50 concurrent retries on A: B consumes the transaction once.
        let port = a.port
        let burst = Burst.simultaneous(50, within: 60, connect: { _ in try RawHTTPClient(port: port, timeout: 20) }) { _, client in
            try client.request("POST", "/transfer?amount=100&_txid=\(txid)", headers: Kit.apiHeaders(token), body: Kit.transferBody)
        }
        #expect(burst.finished)
        let statuses = burst.results.map { (try? $0.get().status) ?? -1 }
        #expect(statuses.filter { $0 == 201 }.count == 1, "statuses: \(statuses)")
        #expect(statuses.filter { $0 == 401 }.count == 49, "statuses: \(statuses)")

        // A changed amount with an approved TxId is refused (a new challenge, never an allow).
        let second = try Kit.challengeTxid(try TwoGateways.transfer(a, token: token, amount: 100))
        try Kit.approve(b, txid: second, token: token, code: codes.next(Kit.demoSecret))
        let changed = try TwoGateways.transfer(a, token: token, amount: 9_999, txid: second)
        #expect(changed.status == 401, "a changed amount:\n\(changed)")
        #expect(try Kit.challengeTxid(changed) != second)
        #expect(!changed.bodyText.contains("executed"))
    }

    @Test func noSessionGetsLoginChallengeAndUnknownPathIsDenied() throws {
        let bed = try Testbed.current
        let pair = try TwoGateways.start(bed)
        let anonymous = try pair.a.fetch("GET", "/accounts", headers: [("x-authenticate-response", "header")])
        #expect(anonymous.status == 401, "\(anonymous)")
        #expect(anonymous.header("WWW-Authenticate")?.contains("am_uri=\"http://127.0.0.1:\(pair.b.port)/am/\"") == true)
        let browser = try pair.a.fetch("GET", "/accounts")
        #expect(browser.status == 307)
        #expect(browser.header("Location")?.hasPrefix("http://127.0.0.1:\(pair.b.port)/am/XUI/?goto=") == true, "\(browser.headerSummary)")
        let token = try Kit.login(pair.b)
        let denied = try pair.a.fetch("GET", "/admin", headers: [("iPlanetDirectoryPro", token)])
        #expect(denied.status == 403, "\(denied)")
        // The agent's password never reaches a log.
        #expect(!pair.a.process.stderr.contains(TwoGateways.agentPassword))
        #expect(!pair.b.process.stderr.contains(TwoGateways.agentPassword))
        #expect(pair.a.process.stderr.contains("policy decisions from a remote AM"))
    }

    // MARK: B away: fail closed within timeoutMs, heal when it returns

    @Test func killedOrHungAMFailsClosedWithinTimeoutAndHeals() throws {
        let bed = try Testbed.current
        // One worker, so that the agent's session that the new B refuses is the one A holds.
        let pair = try TwoGateways.start(bed, timeoutMs: 800, cacheS: 0, workers: 1)
        let token = try Kit.login(pair.b)
        let headers = [("iPlanetDirectoryPro", token)]
        // The agent's first login may take longer than 800 ms (B hashes its password): it goes on
        // after the request that started it has failed closed, and later requests use its token.
        #expect(try eventually { try pair.a.fetch("GET", "/accounts", headers: headers).status == 200 })

        // Hung (SIGSTOP): every request answers 503 within the timeout, none allowed.
        _ = Glibc.kill(pair.b.pid, SIGSTOP)
        #expect(try eventually(2) { Self.processState(pair.b.pid) == "T" }, "B did not stop")
        for _ in 0..<3 {
            let started = Date()
            let r = try pair.a.fetch("GET", "/accounts", headers: headers)
            let ms = Date().timeIntervalSince(started) * 1000
            #expect(r.status == 503, "B stopped (state \(Self.processState(pair.b.pid))):\n\(r)\nB: \(pair.b.process.stderrTail(5))")
            #expect(r.header("Content-Type") == "application/json")
            #expect(ms < 800 + 700, "503 after \(Int(ms)) ms")
        }
        _ = Glibc.kill(pair.b.pid, SIGCONT)
        #expect(try eventually { try pair.a.fetch("GET", "/accounts", headers: headers).status == 200 }, "A did not heal after SIGCONT")

        // Killed: refused connections fail closed at once. A new B on the same port, with a new
        // store, no longer knows the agent's session: A logs its agent in again and heals.
        pair.b.process.kill()
        try FileManager.default.removeItem(at: bed.dir.url.appendingPathComponent("b/var"))
        let down = try pair.a.fetch("GET", "/accounts", headers: headers)
        #expect(down.status == 503, "B killed:\n\(down)")
        let b2 = try TwoGateways.startB(bed, port: pair.b.port, upstream: pair.bank.url)
        let token2 = try Kit.login(b2)
        #expect(try eventually { try pair.a.fetch("GET", "/accounts", headers: [("iPlanetDirectoryPro", token2)]).status == 200 },
                "A did not heal with a new B (the agent must log in again)")
        #expect(pair.a.process.stderr.contains("pdp agent token refused, logging in again"))
        #expect(try pair.a.fetch("GET", "/accounts", headers: headers).status != 200, "a session of the old B was allowed")
    }

    // MARK: HTTPS to the AM, verified with pdp.caFile; txgate check

    @Test func httpsToTheAMIsVerifiedWithCaFile() throws {
        let bed = try Testbed.current
        try bed.makeSelfSignedCertificate()
        let pair = try TwoGateways.start(bed, tls: true)
        // The user logs in at B over HTTPS (curl verifies B with the same CA).
        let login = try bed.curl(["https://127.0.0.1:\(pair.b.port)/am/json/realms/root/authenticate"], extra: ["-X", "POST"])
        let step = try login.transfers[0].json()
        let body = try JSONSerialization.data(withJSONObject: Kit.answer(step, ["demo", Kit.password]))
        let done = try bed.curl(["https://127.0.0.1:\(pair.b.port)/am/json/realms/root/authenticate"],
                                extra: ["-X", "POST", "-H", "Content-Type: application/json", "--data-binary", String(decoding: body, as: UTF8.self)])
        let token = try #require(try done.transfers[0].json()["tokenId"] as? String)
        #expect(try eventually { try pair.a.fetch("GET", "/accounts", headers: [("iPlanetDirectoryPro", token)]).status == 200 })

        // Without the CA, the AM's certificate is not trusted: fail closed, never an allow.
        let c = try bed.startGateway(name: "gateway-c", directory: bed.dir.url.appendingPathComponent("a")) { port in
            Testbed.gatewayConfig(port: port, upstream: pair.bank.url, overrides: [
                "pdp": ["type": "am", "url": "https://127.0.0.1:\(pair.b.port)/am", "timeoutMs": 1_500,
                        "agent": ["username": "gateway-agent", "passwordFile": "agent.pw"]],
            ])
        }
        let untrusted = try c.fetch("GET", "/accounts", headers: [("iPlanetDirectoryPro", token)])
        #expect(untrusted.status == 503, "\(untrusted)")
    }

    @Test func checkValidatesThePDPBlock() throws {
        let bed = try Testbed.current
        func check(_ pdp: [String: Any], _ extra: [String: Any] = [:]) throws -> CommandResult {
            let config = Testbed.gatewayConfig(port: 8080, upstream: "http://127.0.0.1:9", overrides: extra.merging(["pdp": pdp]) { a, _ in a })
            return try bed.check(configText: String(decoding: try JSONSerialization.data(withJSONObject: config), as: UTF8.self))
        }
        _ = try bed.dir.write("agent.pw", "pw")
        let agent: [String: Any] = ["username": "gateway-agent", "passwordFile": "agent.pw"]
        #expect(try check(["type": "am", "url": "http://127.0.0.1:1/am", "agent": agent]).status == 0)
        let noURL = try check(["type": "am", "agent": agent])
        #expect(noURL.status != 0 && noURL.description.contains("pdp.url"), "\(noURL)")
        let noFile = try check(["type": "am", "url": "http://127.0.0.1:1/am", "agent": ["username": "a", "passwordFile": "missing.pw"]])
        #expect(noFile.status != 0 && noFile.description.contains("pdp.agent.passwordFile"), "\(noFile)")
        let badType = try check(["type": "opa"])
        #expect(badType.status != 0 && badType.description.contains("pdp.type"), "\(badType)")
        let withPolicies = try check(["type": "am", "url": "http://127.0.0.1:1/am", "agent": agent], Kit.config())
        #expect(withPolicies.status != 0 && withPolicies.description.contains("remove policies"), "\(withPolicies)")
        let badCA = try check(["type": "am", "url": "https://127.0.0.1:1/am", "caFile": "agent.pw", "agent": agent])
        #expect(badCA.status != 0 && badCA.description.contains("pdp.caFile"), "\(badCA)")
    }

    /// The state letter of /proc/PID/stat ("T": stopped).
    static func processState(_ pid: Int32) -> String {
        let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
        return stat.range(of: ") ").map { String(stat[$0.upperBound...].prefix(1)) } ?? "?"
    }

    private func eventually(_ seconds: Double = 10, _ check: () throws -> Bool) throws -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            if try check() { return true }
            usleep(100_000)
        }
        return false
    }

    private func waitForLog(_ g: GatewayInstance, _ match: ([String: Any]) -> Bool) throws -> Bool {
        try eventually(5) { g.logLines().contains(where: match) }
    }
}

/// B (the AM role) and A (`pdp.type: "am"` pointing at B), each in its own folder, in front of
/// one demo-bank.
struct TwoGateways {
    static let agentPassword = "Ag3nt-S3cret-pw"
    let a: GatewayInstance
    let b: GatewayInstance
    let bank: DemoBankInstance

    /// `tls`: B serves HTTPS with the testbed's self-signed cert.pem, which A trusts as `pdp.caFile`.
    static func start(_ bed: Testbed, timeoutMs: Int = 2_000, cacheS: Int = 30, workers: Int = 2, tls: Bool = false) throws -> TwoGateways {
        let bank = try bed.startDemoBank()
        let b = try startB(bed, port: nil, upstream: bank.url, tls: tls)
        let aDir = bed.dir.url.appendingPathComponent("a")
        try FileManager.default.createDirectory(at: aDir, withIntermediateDirectories: true)
        try Data(agentPassword.utf8).write(to: aDir.appendingPathComponent("agent.pw"))
        let a = try bed.startGateway(name: "gateway-a", directory: aDir) { port in
            Testbed.gatewayConfig(port: port, upstream: bank.url, overrides: [
                "workers": workers,
                "pdp": ["type": "am", "url": "\(tls ? "https" : "http")://127.0.0.1:\(b.port)/am", "timeoutMs": timeoutMs,
                        "agent": ["username": "gateway-agent", "passwordFile": "agent.pw", "journey": "Login"]]
                    .merging(tls ? ["caFile": bed.dir.file("cert.pem").path] : [:]) { a, _ in a },
                "cache": ["defaultTtlS": cacheS],
            ])
        }
        return TwoGateways(a: a, b: b, bank: bank)
    }

    /// B: demo-bank's users and an agent, the Login and ConfirmTransaction journeys, and a
    /// transfer policy bound to the resource (its query carries the amount: AM sees no body).
    static func startB(_ bed: Testbed, port: Int?, upstream: String, tls: Bool = false) throws -> GatewayInstance {
        let dir = bed.dir.url.appendingPathComponent("b")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        var config = Kit.config()
        config["users"] = (config["users"] as? [[String: Any]] ?? [])
            + [["username": "gateway-agent", "passwordHash": PasswordHashes.agent]]
        config["policies"] = [
            ["name": "accounts", "resources": ["/accounts", "/accounts/*"], "actions": ["GET"], "subjects": "authenticated"],
            ["name": "transfer", "resources": ["/transfer"], "actions": ["POST"], "subjects": "authenticated",
             "transaction": ["journey": "ConfirmTransaction"]],
        ]
        // A pending limit high enough that 49 refused retries are challenges, not 429s.
        config["security"] = ["policyEvaluators": ["gateway-agent"], "maxPendingTransactions": 200]
        if tls { config["tls"] = ["certificate": bed.dir.file("cert.pem").path, "privateKey": bed.dir.file("key.pem").path] }
        return try bed.startGateway(name: "gateway-b", port: port, directory: dir) { Testbed.gatewayConfig(port: $0, upstream: upstream, overrides: config) }
    }

    static func transfer(_ g: GatewayInstance, token: String, amount: Int, txid: String? = nil) throws -> HTTPResponse {
        try g.fetch("POST", "/transfer?amount=\(amount)" + (txid.map { "&_txid=\($0)" } ?? ""), headers: Kit.apiHeaders(token),
                    body: Array(#"{"amount":\#(amount),"currency":"EUR","payee":"Bob"}"#.utf8))
    }

    typealias Kit = TransactionKit
}

enum PasswordHashes {
    static let agent = PasswordHash.hash(TwoGateways.agentPassword)
}
