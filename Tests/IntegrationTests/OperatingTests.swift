import Foundation
import Testing
import TxGateCore
import TestSupport

/// Issue 17, operating the gateway: readiness, the client address behind trusted proxies, and
/// what the access log says.
@Suite(.testbed) struct OperatingTests {
    typealias Kit = TransactionKit

    /// `/-/ready`'s answer, polled until it has `status` (the check runs in the background).
    static func waitReady(_ g: GatewayInstance, _ status: Int, timeout: Double = 10) throws -> HTTPResponse {
        var last: HTTPResponse?
        Timing.poll(timeout: timeout, interval: 0.05) {
            last = try? g.fetch("GET", "/-/ready")
            return last?.status == status
        }
        let r = try #require(last)
        #expect(r.status == status, "/-/ready:\n\(r)")
        return r
    }

    @Test(.timeLimit(.minutes(1)))
    func readinessFollowsTheUpstreamWhileHealthStaysLive() throws {
        let bed = try Testbed.current
        let bank = try bed.startDemoBank()
        let g = try bed.startGateway(upstream: bank.url, config: ["readiness": ["intervalMs": 200]])

        let ready = try Self.waitReady(g, 200)
        #expect(ready.bodyText == #"{"status":"ready","version":"\#(TxGateVersion.current)","workers":1,"upstream":"up"}"#)
        #expect(ready.header("Content-Type") == "application/json")

        bank.process.kill()
        let down = try Self.waitReady(g, 503)
        #expect(down.bodyText == #"{"status":"not ready","version":"\#(TxGateVersion.current)","workers":1,"upstream":"down"}"#)
        // Liveness is not readiness: the process is fine, so /-/health says so.
        #expect(try g.fetch("GET", "/-/health").status == 200)
        #expect(g.logLines().contains { $0["msg"] as? String == "readiness: the upstream refuses connections" })

        // The upstream comes back on the same port: ready again, by itself.
        let again = try bed.spawn(try BinaryLocator.demoBank, ["--listen", "127.0.0.1:\(bank.port)"], name: "demo-bank")
        try again.waitForPort(bank.port)
        #expect(try Self.waitReady(g, 200).bodyText == #"{"status":"ready","version":"\#(TxGateVersion.current)","workers":1,"upstream":"up"}"#)
        #expect(g.logLines().contains { $0["msg"] as? String == "readiness: ready again" })
        #expect(try g.fetch("POST", "/-/ready").status == 405)
    }

    @Test(.timeLimit(.minutes(1)))
    func readinessFollowsTheStore() throws {
        let bed = try Testbed.current
        let redis = try RedisServer.start(in: bed.dir.url)
        defer { redis.kill() }
        let bank = try bed.startDemoBank()
        let g = try bed.startGateway(upstream: bank.url, config: deepMerge(AuthTests.authConfig(), [
            "readiness": ["intervalMs": 200],
            "store": ["type": "redis", "url": redis.url, "timeoutMs": 500],
        ]))
        #expect(try Self.waitReady(g, 200).bodyText == #"{"status":"ready","version":"\#(TxGateVersion.current)","workers":1,"upstream":"up","store":"up"}"#)
        redis.kill()
        #expect(try Self.waitReady(g, 503).bodyText == #"{"status":"not ready","version":"\#(TxGateVersion.current)","workers":1,"upstream":"up","store":"down"}"#)
        try redis.start()
        #expect(try Self.waitReady(g, 200, timeout: 15).bodyText == #"{"status":"ready","version":"\#(TxGateVersion.current)","workers":1,"upstream":"up","store":"up"}"#)
    }

    /// Issue 22, item 5: a Redis that answers pings but refuses writes (out of memory under
    /// `noeviction`, or `min-replicas-to-write` unmet) fails every stateful request, so the
    /// gateway is not ready, and says the store is not writable; it is ready again by itself.
    @Test(.timeLimit(.minutes(1)))
    func readinessSaysWhenTheStoreRefusesWrites() throws {
        let bed = try Testbed.current
        let redis = try RedisServer.start(in: bed.dir.url)
        defer { redis.kill() }
        let bank = try bed.startDemoBank()
        let g = try bed.startGateway(upstream: bank.url, config: deepMerge(AuthTests.authConfig(), [
            "readiness": ["intervalMs": 200],
            "store": ["type": "redis", "url": redis.url, "timeoutMs": 500],
        ]))
        let v = TxGateVersion.current
        let ready = #"{"status":"ready","version":"\#(v)","workers":1,"upstream":"up","store":"up"}"#
        let notWritable = #"{"status":"not ready","version":"\#(v)","workers":1,"upstream":"up","store":"not writable"}"#
        #expect(try Self.waitReady(g, 200).bodyText == ready)

        // Out of memory: about 1 MB of data, then a limit below what Redis uses (filling up to a
        // limit instead is at the mercy of client buffers, which count too and come and go).
        var fillers: [String] = []
        for batch in 0..<20 {
            let keys = (0..<50).map { "filler:\(batch):\($0)" }
            _ = try redis.commands(keys.map { ["SET", $0, String(repeating: "x", count: 1024)] })
            fillers += keys
        }
        guard case .bulk(let info) = try redis.command(["INFO", "memory"]),
              let line = String(decoding: info, as: UTF8.self).split(separator: "\r\n").first(where: { $0.hasPrefix("used_memory:") }),
              let used = Int(line.dropFirst("used_memory:".count)) else { Issue.record("INFO memory has no used_memory"); return }
        _ = try redis.commands([["CONFIG", "SET", "maxmemory-policy", "noeviction"], ["CONFIG", "SET", "maxmemory", String(used - (256 << 10))]])
        if case .error(let e) = try redis.command(["SET", "probe", "1"]) { #expect(e.hasPrefix("OOM"), "\(e)") } else {
            Issue.record("redis accepted a write past maxmemory")
        }
        #expect(try Self.waitReady(g, 503).bodyText == notWritable)
        #expect(try g.fetch("GET", "/-/health").status == 200, "liveness: the process and the store still answer")
        #expect(g.logLines().contains { $0["msg"] as? String == "readiness: the store answers but refuses writes" && ($0["error"] as? String ?? "").contains("OOM") })
        _ = try redis.commands([["DEL"] + fillers, ["CONFIG", "SET", "maxmemory", "0"]])
        #expect(try Self.waitReady(g, 200).bodyText == ready)

        // A primary told to refuse writes without a replica.
        _ = try redis.command(["CONFIG", "SET", "min-replicas-to-write", "1"])
        #expect(try Self.waitReady(g, 503).bodyText == notWritable)
        _ = try redis.command(["CONFIG", "SET", "min-replicas-to-write", "0"])
        #expect(try Self.waitReady(g, 200).bodyText == ready)
    }

    static func accessLines(_ g: GatewayInstance) -> [[String: Any]] {
        g.logLines().filter { $0["log"] as? String == "access" }
    }

    /// The access line of the request with this id (the line is written as the response ends).
    static func accessLine(_ g: GatewayInstance, _ r: HTTPResponse) throws -> [String: Any] {
        let id = try #require(r.header("X-Request-Id"))
        var line: [String: Any]?
        Timing.poll(timeout: 5) {
            line = accessLines(g).first { $0["request_id"] as? String == id }
            return line != nil
        }
        return try #require(line, "no access line for \(id)")
    }

    @Test func xForwardedForFromATrustedProxyNamesTheClientForTheLogTheLockoutAndTheBackend() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: AuthTests.authConfig([
            "trustedProxies": ["127.0.0.2/32", "10.0.0.0/8"],
            "security": ["maxFailedAttempts": 2, "lockoutWindowS": 60, "lockoutDurationS": 60],
        ]))

        // Through the trusted proxy (127.0.0.2): the right-most untrusted entry is the client.
        let viaProxy = try g.fetch("GET", "/echo", headers: [("X-Forwarded-For", "6.6.6.6, 198.51.100.7, 10.1.2.3")],
                                   source: "127.0.0.2")
        #expect(viaProxy.status == 200)
        let echo = try EchoedRequest(viaProxy)
        #expect(echo.headerValues("X-Forwarded-For") == ["6.6.6.6, 198.51.100.7, 10.1.2.3, 127.0.0.2"], "\(echo)")
        let line = try Self.accessLine(g, viaProxy)
        #expect(line["client"] as? String == "198.51.100.7", "\(line)")
        #expect(line["peer"] as? String == "127.0.0.2", "\(line)")

        // From a peer that is not trusted, X-Forwarded-For is ignored, and not passed on.
        let direct = try g.fetch("GET", "/echo", headers: [("X-Forwarded-For", "198.51.100.7")])
        #expect(try EchoedRequest(direct).headerValues("X-Forwarded-For") == ["127.0.0.1"])
        let directLine = try Self.accessLine(g, direct)
        #expect(directLine["client"] as? String == "127.0.0.1", "\(directLine)")
        #expect(directLine["peer"] == nil, "\(directLine)")

        // The lockout counts the client behind the proxy, not the proxy.
        func login(_ password: String, client: String?, source: String) throws -> HTTPResponse {
            let xff = client.map { [("X-Forwarded-For", $0)] } ?? []
            let step = try AuthTests.post(g, AuthTests.authPath, nil, headers: xff, source: source).json()
            return try AuthTests.post(g, AuthTests.authPath, AuthTests.answer(step, ["demo", password]), headers: xff, source: source)
        }
        for _ in 0..<2 { #expect(try login("wrong", client: "198.51.100.7", source: "127.0.0.2").status == 401) }
        #expect(try login(AuthTests.password, client: "198.51.100.7", source: "127.0.0.2").status == 401, "locked out")
        // Another client behind the same proxy is not locked out.
        #expect(try login(AuthTests.password, client: "198.51.100.8", source: "127.0.0.2").status == 200)
        // Nor is a direct client that claims the locked address.
        #expect(try login(AuthTests.password, client: "198.51.100.7", source: "127.0.0.1").status == 200)
        #expect(g.logLines().contains { $0["msg"] as? String == "locked out after repeated failures"
            && $0["source"] as? String == "198.51.100.7" })
    }

    @Test func theAccessLogNamesTheUserAgentThePolicyAndTheDecision() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config())
        let ua = ("User-Agent", "ops-test/1.0 (access log)")

        let open = try g.fetch("GET", "/health", headers: [ua])
        #expect(open.status == 200)
        let openLine = try Self.accessLine(g, open)
        #expect(openLine["user_agent"] as? String == "ops-test/1.0 (access log)", "\(openLine)")
        #expect(openLine["policy"] as? String == "health", "\(openLine)")
        #expect(openLine["decision"] as? String == "allow", "\(openLine)")

        let noSession = try g.fetch("GET", "/accounts", headers: [ua, ("x-authenticate-response", "header")])
        #expect(noSession.status == 401)
        let challenged = try Self.accessLine(g, noSession)
        #expect(challenged["policy"] as? String == "accounts", "\(challenged)")
        #expect(challenged["decision"] as? String == "challenge", "\(challenged)")

        let unmatched = try g.fetch("GET", "/nowhere")
        #expect(unmatched.status == 403)
        let denied = try Self.accessLine(g, unmatched)
        #expect(denied["policy"] == nil, "\(denied)")
        #expect(denied["decision"] as? String == "deny", "\(denied)")
        #expect(denied["user_agent"] == nil, "\(denied)")

        let token = try Kit.login(g)
        let transfer = try Kit.transfer(g, token: token, body: Kit.transferBody)
        #expect(transfer.status == 401)
        let approval = try Self.accessLine(g, transfer)
        #expect(approval["policy"] as? String == "transfer" && approval["decision"] as? String == "challenge", "\(approval)")
        #expect(approval["user"] as? String == "demo", "\(approval)")
        #expect(approval["details"] as? String == "challenge", "\(approval)")

        // The gateway's own endpoints decide nothing.
        let health = try Self.accessLine(g, try g.fetch("GET", "/-/health"))
        #expect(health["policy"] == nil && health["decision"] == nil, "\(health)")
        #expect(health["details"] as? String == "gateway_endpoint", "\(health)")

        // The documented example (docs/LOGS-METRICS-AUDIT.md) is a line of this very kind: the same
        // fields, no more, no fewer.
        let accounts = try g.fetch("GET", "/accounts", headers: [ua, ("iPlanetDirectoryPro", token)])
        #expect(accounts.status == 200)
        let real = try Self.accessLine(g, accounts)
        let example = try Self.documentedAccessExample()
        #expect(Set(example.keys) == Set(real.keys), "docs: \(example.keys.sorted())\nreal: \(real.keys.sorted())")
        #expect(example["policy"] as? String == "accounts" && example["decision"] as? String == "allow")
        #expect(real["details"] as? String == "via_upstream", "\(real)")
    }

    /// The access-log example in docs/LOGS-METRICS-AUDIT.md (it was the README's).
    static func documentedAccessExample() throws -> [String: Any] {
        let page = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/LOGS-METRICS-AUDIT.md")
        let text = try String(contentsOf: page, encoding: .utf8)
        let line = try #require(text.split(separator: "\n").first { $0.hasPrefix(#"{"ts":"#) && $0.contains(#""msg":"access""#) })
        return try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    }
}
