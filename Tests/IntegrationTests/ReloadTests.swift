import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif
import TestSupport

/// SIGHUP: the configuration file is read again; a valid one applies to new requests without
/// dropping connections or sessions, an invalid one changes nothing; either way it is logged.
@Suite("Reload on SIGHUP", .testbed)
struct ReloadTests {
    typealias Kit = TransactionKit

    /// The transaction suite's configuration, plus `/slow` open to anyone (to hold a request
    /// in flight across the reload).
    static func config(_ extra: [String: Any] = [:]) -> [String: Any] {
        var c = Kit.config(extra)
        var policies = c["policies"] as? [[String: Any]] ?? []
        policies.append(["name": "slow", "resources": ["/slow"], "actions": ["GET"], "subjects": "anyone"])
        c["policies"] = policies
        return c
    }

    /// Rewrites the running gateway's file: its start-up configuration changed by `change`.
    static func rewrite(_ g: GatewayInstance, _ change: (inout [String: Any]) -> Void) throws {
        var c = g.config
        change(&c)
        let data = try JSONSerialization.data(withJSONObject: c, options: [.prettyPrinted, .sortedKeys])
        try data.write(to: g.configURL)
    }

    /// Sends SIGHUP and waits for the log line that ends the reload.
    static func reload(_ g: GatewayInstance, until message: String) throws -> [String: Any] {
        // The signals are watched from before "txgate started" (the port may accept earlier).
        Timing.poll(timeout: 10, interval: 0.02) { g.logLines().contains { $0["msg"] as? String == "txgate started" } }
        let before = g.logLines().count
        g.process.signal(SIGHUP)
        var found: [String: Any]?
        Timing.poll(timeout: 10, interval: 0.05) {
            found = g.logLines().dropFirst(before).first { $0["msg"] as? String == message }
            return found != nil
        }
        return try #require(found, "no '\(message)' log line after SIGHUP; stderr:\n\(g.process.stderrTail(40))")
    }

    @Test("a valid change: new requests follow it, a request in flight finishes, sessions survive")
    func validChangeApplies() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Self.config())
        let token = try Kit.login(g)
        #expect(try g.fetch("GET", "/accounts", headers: Kit.apiHeaders(token)).status == 200)

        // In flight across the reload, on a kept-alive connection.
        let client = try g.connect(timeout: 10)
        try client.sendRequest("GET", "/slow?ms=1500")
        Timing.sleep(0.2)

        // The `accounts` policy goes: /accounts is no longer covered by any policy.
        try Self.rewrite(g) { c in
            c["policies"] = (c["policies"] as? [[String: Any]] ?? []).filter { $0["name"] as? String != "accounts" }
        }
        let line = try Self.reload(g, until: "config reloaded")
        #expect((line["changed"] as? String)?.split(separator: ",").contains("policies") == true, "\(line)")
        #expect(line["level"] as? String == "info", "\(line)")

        let after = try g.fetch("GET", "/accounts", headers: Kit.apiHeaders(token))
        #expect(after.status == 403, "the removed policy still applies:\n\(after)")

        // The session from before the reload still identifies its user: a transfer is a
        // transaction challenge, not a login one.
        let transfer = try Kit.transfer(g, token: token, body: Kit.transferBody)
        #expect(transfer.status == 401, "\(transfer)")
        #expect(transfer.header("WWW-Authenticate")?.contains("SSOADVICE") == true, "\(transfer)")
        let advices = try Kit.decodeAdviceJSON(try #require(try Kit.ssoAdviceParams(transfer.header("WWW-Authenticate") ?? "")["advices"]))
        #expect(Array(advices.keys) == ["TransactionConditionAdvice"], "the session was lost: \(advices)")

        let slow = try client.readResponse()
        #expect(slow.status == 200, "the request in flight: \(slow)")
        #expect((try? slow.json()["slept"] as? NSNumber)?.intValue == 1500, "\(slow)")
        // The same connection serves the next request, under the new policies.
        let next = try client.request("GET", "/accounts")
        #expect(next.status == 403 || next.status == 401, "\(next)")
        #expect(g.process.isRunning)
    }

    /// Policies added by a reload are counted under their own names (the metrics' policy
    /// labels used to be fixed at start-up: a policy beyond the start-up list indexed past
    /// the worker's counters and stopped the gateway).
    @Test("policies added by a reload are counted under their names")
    func reloadedPoliciesAreCountedByName() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Self.config())
        #expect(try g.fetch("GET", "/health").status == 200)
        try Self.rewrite(g) { c in
            var policies = c["policies"] as? [[String: Any]] ?? []
            policies.insert(["name": "first", "resources": ["/first"], "actions": ["GET"], "subjects": "anyone"], at: 0)
            policies.append(["name": "extra1", "resources": ["/extra1"], "actions": ["GET"], "subjects": "anyone"])
            policies.append(["name": "extra2", "resources": ["/extra2"], "actions": ["GET"], "subjects": "anyone"])
            c["policies"] = policies
        }
        _ = try Self.reload(g, until: "config reloaded")
        for path in ["/extra2", "/extra2", "/extra1", "/health"] {
            #expect(try g.fetch("GET", path).status != 403, "\(path)")
        }
        #expect(g.process.isRunning, "stderr:\n\(g.process.stderrTail(20))")
        let r = try g.fetch("GET", "/-/metrics")
        let s = MetricsTests.samples(r.bodyText)
        func v(_ policy: String, _ status: String) -> Double? {
            MetricsTests.value(s, "txgate_requests_total", ["policy": policy, "method": "GET", "status": status])
        }
        #expect(v("extra2", "4xx") == 2, "\(r.bodyText)")
        #expect(v("extra1", "4xx") == 1, "\(r.bodyText)")
        #expect(v("health", "2xx") == 2, "before and after the reload, under one series: \(r.bodyText)")
        #expect(s.filter { $0.name == "txgate_requests_total" }.reduce(0) { $0 + $1.value } == 5, "\(r.bodyText)")
    }

    @Test("an invalid file changes nothing: every error logged, the old configuration serves")
    func invalidChangeIsRefused() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Self.config())
        let token = try Kit.login(g)

        try Self.rewrite(g) { c in
            c["bogus"] = true
            c["policies"] = (c["policies"] as? [[String: Any]] ?? []).filter { $0["name"] as? String != "accounts" }
            c["loginJourney"] = "Nope"
        }
        let summary = try Self.reload(g, until: "config reload failed: still running the previous configuration")
        #expect(summary["level"] as? String == "error", "\(summary)")
        let errors = g.logLines().filter { $0["msg"] as? String == "config reload failed" }.compactMap { $0["error"] as? String }
        #expect(errors.contains { $0.hasPrefix("bogus:") }, "\(errors)")
        #expect(errors.contains { $0.hasPrefix("loginJourney:") }, "\(errors)")
        #expect(!g.logLines().contains { $0["msg"] as? String == "config reloaded" })

        // The old policies still apply, the session is still valid, the process still runs.
        let r = try g.fetch("GET", "/accounts", headers: Kit.apiHeaders(token))
        #expect(r.status == 200, "\(r)")
        #expect(g.process.isRunning)

        // A syntax error, too.
        try "{ \"listen\": ".write(to: g.configURL, atomically: true, encoding: .utf8)
        _ = try Self.reload(g, until: "config reload failed: still running the previous configuration")
        #expect(try g.fetch("GET", "/accounts", headers: Kit.apiHeaders(token)).status == 200)
        #expect(g.process.isRunning)
    }

    @Test("listen and workers changes need a restart: a warning names them, the listener stays")
    func listenChangeWarns() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank()
        let other = try Ports.free()
        try Self.rewrite(g) { c in
            c["listen"] = "127.0.0.1:\(other)"
            c["workers"] = 2
            c["log"] = ["level": "info", "access": false]
        }
        let reloaded = try Self.reload(g, until: "config reloaded")
        let warning = try #require(g.logLines().first {
            $0["msg"] as? String == "config reload: these changes need a restart and are not applied"
        }, "no restart warning; stderr:\n\(g.process.stderrTail(20))")
        #expect(warning["level"] as? String == "warning")
        #expect(warning["restart_needed"] as? String == "listen,workers", "\(warning)")
        #expect(reloaded["changed"] as? String == "log", "\(reloaded)")

        #expect(try g.fetch("GET", "/accounts").status == 200)
        #expect(Ports.probe(other) == .refused, "the new address was bound without a restart")
        // `log.access: false` applied: no access line for that request.
        let id = "reload-no-access-log"
        #expect(try g.fetch("GET", "/accounts", headers: [("X-Request-Id", id)]).status == 200)
        Timing.sleep(0.2)
        #expect(!g.logLines().contains { $0["msg"] as? String == "access" && $0["request_id"] as? String == id })
    }
}
