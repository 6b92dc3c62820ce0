import Foundation
import Testing
import TestSupport

/// `/-/metrics` (issue 17 item 3): Prometheus text that counts exactly what happened, and
/// only for the peers `metrics.allowFrom` names.
@Suite(.testbed) struct MetricsTests {
    typealias Kit = TransactionKit

    /// One sample per line: `name{label="value",...} number` → name, labels, value.
    struct Sample {
        let name: String
        let labels: [String: String]
        let value: Double
    }

    static func samples(_ text: String) -> [Sample] {
        text.split(separator: "\n").compactMap { line -> Sample? in
            guard !line.hasPrefix("#"), let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else {
                return nil
            }
            let series = line[..<space]
            guard let brace = series.firstIndex(of: "{") else { return Sample(name: String(series), labels: [:], value: value) }
            var labels: [String: String] = [:]
            for pair in series[series.index(after: brace)..<series.index(before: series.endIndex)].split(separator: ",") {
                let kv = pair.split(separator: "=", maxSplits: 1)
                guard kv.count == 2 else { continue }
                labels[String(kv[0])] = String(kv[1].dropFirst().dropLast())
            }
            return Sample(name: String(series[..<brace]), labels: labels, value: value)
        }
    }

    /// The value of the one series `name` with exactly `labels` (nil when absent).
    static func value(_ samples: [Sample], _ name: String, _ labels: [String: String] = [:]) -> Double? {
        samples.first { $0.name == name && $0.labels == labels }?.value
    }

    @Test func aKnownSequenceOfRequestsShowsExactCountsAndOnlyToAllowedPeers() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config(["metrics": ["allowFrom": ["127.0.0.1/32"]]]))
        var codes = Kit.Codes()

        // An allowed GET (an open route), a 403 (no policy names DELETE), a login challenge.
        #expect(try g.fetch("GET", "/health").status == 200)
        #expect(try g.fetch("DELETE", "/health").status == 403)
        #expect(try g.fetch("GET", "/accounts", headers: [("x-authenticate-response", "header")]).status == 401)
        // A login (two posts: the step, then the answers).
        let token = try Kit.login(g)
        // A transaction: the challenge, its approval (two posts), the retry, then the same retry again.
        let txid = try Kit.approvedTransfer(g, token: token, codes: &codes)
        #expect(try Kit.transfer(g, token: token, body: Kit.transferBody, query: "?_txid=\(txid)").status == 201)
        #expect(try Kit.transfer(g, token: token, body: Kit.transferBody, query: "?_txid=\(txid)").status == 401)

        let r = try g.fetch("GET", "/-/metrics")
        #expect(r.status == 200, "\(r)")
        #expect(r.header("Content-Type")?.hasPrefix("text/plain; version=0.0.4") == true)
        let text = r.bodyText
        let s = Self.samples(text)
        func v(_ name: String, _ labels: [String: String] = [:]) -> Double? { Self.value(s, name, labels) }

        let requests = "txgate_requests_total"
        #expect(v(requests, ["policy": "health", "method": "GET", "status": "2xx"]) == 1, "\(text)")
        #expect(v(requests, ["policy": "none", "method": "DELETE", "status": "4xx"]) == 1)
        #expect(v(requests, ["policy": "accounts", "method": "GET", "status": "4xx"]) == 1)
        // /am/json/authenticate: two for the login, two for the approval.
        #expect(v(requests, ["policy": "none", "method": "POST", "status": "2xx"]) == 4)
        #expect(v(requests, ["policy": "transfer", "method": "POST", "status": "2xx"]) == 1)
        #expect(v(requests, ["policy": "transfer", "method": "POST", "status": "4xx"]) == 2)
        #expect(s.filter { $0.name == requests }.reduce(0) { $0 + $1.value } == 10)

        let decisions = "txgate_decisions_total"
        #expect(v(decisions, ["outcome": "allow", "advice": "none"]) == 2)
        #expect(v(decisions, ["outcome": "deny", "advice": "none"]) == 1)
        #expect(v(decisions, ["outcome": "challenge", "advice": "AuthenticateToServiceConditionAdvice"]) == 1)
        #expect(v(decisions, ["outcome": "challenge", "advice": "TransactionConditionAdvice"]) == 2)

        #expect(v("txgate_transactions_created_total") == 2)
        #expect(v("txgate_transactions_completed_total") == 1)
        #expect(v("txgate_transactions_consumed_total") == 1)
        #expect(v("txgate_transactions_refused_total", ["reason": "unknown"]) == 1)
        #expect(v("txgate_transactions_refused_total", ["reason": "expired"]) == 0)

        #expect(v("txgate_journeys_started_total", ["journey": "Login"]) == 1)
        #expect(v("txgate_journeys_succeeded_total", ["journey": "Login"]) == 1)
        #expect(v("txgate_journeys_failed_total", ["journey": "Login"]) == 0)
        #expect(v("txgate_journeys_started_total", ["journey": "ConfirmTransaction"]) == 1)
        #expect(v("txgate_journeys_succeeded_total", ["journey": "ConfirmTransaction"]) == 1)
        #expect(v("txgate_lockouts_total") == 0)
        #expect(v("txgate_emails_sent_total") == 0)

        // Both retries looked the transaction up in one store step each.
        #expect(v("txgate_store_operation_duration_seconds_count", ["operation": "take_if"]) == 2)
        #expect(v("txgate_store_operation_failures_total", ["operation": "take_if"]) == 0)
        // Two requests reached demo-bank: /health and the approved retry.
        #expect(v("txgate_upstream_response_duration_seconds_count") == 2)
        let upstream = s.filter { $0.name == "txgate_upstream_requests_total" }.reduce(0) { $0 + $1.value }
        #expect(upstream == 2)
        #expect(v("txgate_upstream_connect_failures_total") == 0)
        #expect((v("txgate_client_connections") ?? 0) >= 1, "the scrape's own connection is open")

        // Nothing that names a user, a token or a transaction.
        #expect(!text.contains("demo"))
        #expect(!text.contains(token))
        #expect(!text.contains(txid))

        // Another loopback address is outside allowFrom: 403, no metrics.
        let refused = try g.fetch("GET", "/-/metrics", source: "127.0.0.2")
        expectGatewayError(refused, 403)
        #expect(!refused.bodyText.contains("txgate_"))
        // Proxied paths are not affected by the allow-list.
        #expect(try g.fetch("GET", "/health", source: "127.0.0.2").status == 200)
    }

    @Test func loopbackIsAllowedByDefaultAndOnlyGetIsAnswered() throws {
        let bed = try Testbed.current
        let bank = try bed.startDemoBank()
        let g = try bed.startGateway(upstream: bank.url)
        #expect(try g.fetch("GET", "/health").status == 200)
        let r = try g.fetch("GET", "/-/metrics", source: "127.0.0.3")
        #expect(r.status == 200, "\(r)")
        let s = Self.samples(r.bodyText)
        #expect(Self.value(s, "txgate_requests_total", ["policy": "none", "method": "GET", "status": "2xx"]) == 1, "\(r.bodyText)")
        #expect(Self.value(s, "txgate_upstream_requests_total", ["connection": "new"]) == 1)
        expectGatewayError(try g.fetch("POST", "/-/metrics", body: []), 405)
    }
}
