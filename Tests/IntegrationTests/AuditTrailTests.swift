import Foundation
import Testing
import TxGateCore
import TestSupport

/// Issue 22, item 7: the audit trail survives kill -9. Approvals, a denial, consumptions and
/// refusals run through the gateway in front of demo-bank; the gateway is killed with SIGKILL
/// right after the last answer; `txgate audit` then exports a trail that matches demo-bank's
/// executions one for one.
@Suite(.testbed) struct AuditTrailTests {
    typealias Kit = TransactionKit

    /// Transfers of 2, 4, 8, ... EUR: the balance's drop names exactly which ones executed.
    /// (Not 1: demo-bank reads a JSON 1 as a boolean on Linux, and refuses it.)
    static func body(_ amount: Int) -> [UInt8] { Array(#"{"amount":\#(amount),"currency":"EUR","payee":"Bob"}"#.utf8) }

    /// Runs the Confirm journey for `txid` and answers Yes (0) or No (1).
    static func answer(_ g: GatewayInstance, txid: String, token: String, yes: Bool) throws -> HTTPResponse {
        let start = try Kit.startComposite(g, txid: txid, session: .header(token))
        guard start.status == 200 else { throw HarnessError("approval of \(txid) did not start: \(start)") }
        return try Kit.post(g, Kit.authPath, Kit.answer(try start.json(), [yes ? 0 : 1]), headers: [("iPlanetDirectoryPro", token)])
    }

    static func balance(_ bank: DemoBankInstance) throws -> Decimal {
        let r = try RawHTTPClient.fetch(port: bank.port, "GET", "/accounts")
        let accounts = try #require(try r.json()["accounts"] as? [[String: Any]])
        let everyday = try #require(accounts.first { $0["id"] as? String == "acc-001" })
        return try #require(Decimal(string: "\(everyday["balance"]!)"))
    }

    @Test(.timeLimit(.minutes(2)), arguments: ["sqlite", "redis"])
    func theTrailMatchesTheBanksExecutionsAfterKill9(store: String) throws {
        let bed = try Testbed.current
        var redis: RedisServer?
        defer { redis?.kill() }
        var storeConfig: [String: Any] = [:]
        if store == "redis" {
            let r = try RedisServer.start(in: bed.dir.url)
            redis = r
            storeConfig = ["store": ["type": "redis", "url": r.url]]
        }
        let bank = try bed.startDemoBank()
        let g = try bed.startGateway(upstream: bank.url, config: deepMerge(Kit.config(["journeys": [
            "ConfirmTransaction": [["type": "Confirm"]],
        ], "audit": ["retentionDays": 30]]), storeConfig))
        let opening = try Self.balance(bank)
        let token = try Kit.login(g)

        // Five approvals and one denial; four approvals are spent, each exactly once.
        var approved: [(txid: String, amount: Int)] = []
        for i in 0..<5 {
            let amount = 2 << i
            let txid = try Kit.challengeTxid(try Kit.transfer(g, token: token, body: Self.body(amount)))
            let done = try Self.answer(g, txid: txid, token: token, yes: true)
            #expect(done.status == 200, "\(done)")
            approved.append((txid, amount))
        }
        let declinedTxid = try Kit.challengeTxid(try Kit.transfer(g, token: token, body: Self.body(128)))
        #expect(try Self.answer(g, txid: declinedTxid, token: token, yes: false).status == 401)

        // Refused first: another amount under an approval, then an unknown TxId.
        #expect(try Kit.transfer(g, token: token, body: Self.body(999), query: "?_txid=\(approved[0].txid)").status == 401)
        #expect(try Kit.transfer(g, token: token, body: Self.body(2), query: "?_txid=00000000-0000-4000-8000-000000000000").status == 401)
        var executed = 0
        for (txid, amount) in approved.prefix(4) {
            let r = try Kit.transfer(g, token: token, body: Self.body(amount), query: "?_txid=\(txid)")
            #expect(r.status == 201, "\(r)")
            executed += amount
        }
        // Spent: a second retry is refused, and the declined one never opens.
        #expect(try Kit.transfer(g, token: token, body: Self.body(approved[0].amount), query: "?_txid=\(approved[0].txid)").status == 401)
        let last = try Kit.transfer(g, token: token, body: Self.body(128), query: "?_txid=\(declinedTxid)")
        #expect(last.status == 401)

        // Killed right after the last answer: nothing is flushed, nothing is shut down.
        g.process.signal(SIGKILL)
        _ = g.process.waitForExit(timeout: 10)

        let bankDrop = opening - (try Self.balance(bank))
        #expect(bankDrop == Decimal(executed))

        let r = try bed.runTxgate(["audit", "--config", g.configURL.path, "--since", "1h", "--format", "jsonl"])
        #expect(r.status == 0, "\(r)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        let events = try lines.map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
        }
        func of(_ kind: String) -> [[String: Any]] { events.filter { $0["event"] as? String == kind } }

        // One for one: every consumed record is an executed transfer, by its amount.
        let consumed = of("consumed")
        let consumedAmounts = consumed.compactMap { ($0["bound"] as? [String: Any])?["/amount"] as? Int }
        #expect(consumed.count == 4, "\(r.stdout)")
        #expect(Decimal(consumedAmounts.reduce(0, +)) == bankDrop)
        #expect(Set(consumed.compactMap { $0["txid"] as? String }) == Set(approved.prefix(4).map(\.txid)))
        #expect(consumed.allSatisfy { $0["display"] as? String != nil && $0["journey"] as? String == "ConfirmTransaction" })
        #expect(consumed.allSatisfy { $0["subject"] as? String == "demo" && ($0["requestId"] as? String)?.isEmpty == false })

        #expect(Set(of("approved").compactMap { $0["txid"] as? String }) == Set(approved.map(\.txid)))
        let third = of("approved").first { $0["txid"] as? String == approved[2].txid }
        #expect(third?["display"] as? String == "Approve 8 EUR to Bob?")
        let declined = of("declined")
        #expect(declined.count == 1 && declined.first?["txid"] as? String == declinedTxid)
        #expect((declined.first?["bound"] as? [String: Any])?["/amount"] as? Int == 128)
        let refusals = of("refused").compactMap { $0["reason"] as? String }
        #expect(refusals.sorted() == ["not completed", "the bound body fields differ", "unknown, expired or consumed",
                                      "unknown, expired or consumed"], "\(r.stdout)")
        #expect(events.count == 5 + 1 + 4 + 4, "\(r.stdout)")
        // Time-ordered.
        let times = events.compactMap { $0["time"] as? String }
        #expect(times.count == events.count && times == times.sorted())
        // No secrets: no session token, no password.
        #expect(!r.stdout.contains(token) && !r.stdout.contains(Kit.password))

        // A window that ends before the run holds nothing.
        let before = try bed.runTxgate(["audit", "--config", g.configURL.path, "--since", "2h", "--until", "1h"])
        #expect(before.status == 0 && before.stdout.isEmpty, "\(before)")
        let bad = try bed.runTxgate(["audit", "--config", g.configURL.path, "--since", "yesterday"])
        #expect(bad.status == 2 && bad.stderr.contains("--since 'yesterday'"), "\(bad)")
    }

    /// `/-/metrics` counts what the trail holds, by event.
    @Test(.timeLimit(.minutes(1)))
    func metricsCountAuditEvents() throws {
        let bed = try Testbed.current
        let bank = try bed.startDemoBank()
        let g = try bed.startGateway(upstream: bank.url, config: Kit.config(["journeys": ["ConfirmTransaction": [["type": "Confirm"]]]]))
        let token = try Kit.login(g)
        let txid = try Kit.challengeTxid(try Kit.transfer(g, token: token, body: Self.body(3)))
        #expect(try Self.answer(g, txid: txid, token: token, yes: true).status == 200)
        #expect(try Kit.transfer(g, token: token, body: Self.body(3), query: "?_txid=\(txid)").status == 201)
        #expect(try Kit.transfer(g, token: token, body: Self.body(3), query: "?_txid=\(txid)").status == 401)
        let metrics = try g.fetch("GET", "/-/metrics").bodyText
        for (event, n) in [("approved", 1), ("consumed", 1), ("refused", 1), ("declined", 0)] {
            #expect(metrics.contains(#"txgate_audit_events_total{event="\#(event)"} \#(n)"#), "\(event) in:\n\(metrics)")
        }
    }
}
