import Foundation
import Testing
import TxGateCore
import TestSupport

/// Issue 23 item 9: the same request challenged again while its transaction still waits for
/// approval gets the same TxId: a reload, a double submit or an SDK that retries every 401 once
/// creates nothing new, and never fills the user's `maxPendingTransactions`. Judged on the wire,
/// with demo-bank's transfer sequence as the count of executions.
@Suite(.testbed) struct IdempotentChallengeTests {
    typealias Kit = TransactionKit
    typealias Parked = ParkedRequestKit

    static func amount(_ n: Int) -> [UInt8] { Array(#"{"amount":\#(n),"currency":"EUR","payee":"Bob"}"#.utf8) }

    /// 20 reloads at once of an approval's return URL: one executes the parked transfer; the 19
    /// others are challenged anew for the same request, all with one new TxId (one transaction
    /// more waiting, not 19), so the user's next transfer is challenged, not refused with 429.
    @Test(.timeLimit(.minutes(1)))
    func twentyConcurrentReloadsExecuteOnceAndLeaveOneTransactionWaiting() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config([
            "workers": 4, "security": ["maxPendingTransactions": 2],
        ]))
        let token = try Kit.login(g)
        var codes = Kit.Codes()
        let (txid, goto) = try Parked.parked(try g.fetch("POST", "/transfer", headers: Parked.browserHeaders(token, Parked.jsonType),
                                                         body: Kit.transferBody))
        try Kit.approve(g, txid: txid, token: token, code: codes.next(Kit.demoSecret))

        let target = Parked.target(goto), headers = Parked.browserHeaders(token), port = g.port
        let results = try Cluster.race(20, timeout: 10) { _ in (port, "GET", target, headers, []) }
        var executed = 0
        var rechallenged: [String] = []
        var other: [String] = []
        for r in results {
            switch r {
            case .success(let resp) where resp.status == 201: executed += 1
            case .success(let resp) where resp.status == 303:
                if let t = try? Parked.parked(resp).txid { rechallenged.append(t) } else { other.append("\(resp)") }
            case .success(let resp): other.append("\(resp)")
            case .failure(let e): other.append("error: \(e)")
            }
        }
        #expect(executed == 1, "executed \(executed) times")
        #expect(other.isEmpty, "neither executed nor challenged again (\(other.count)):\n\(other.prefix(3).joined(separator: "\n---\n"))")
        #expect(rechallenged.count == 19)
        #expect(Set(rechallenged).count == 1, "the same request, challenged again at once, got \(Set(rechallenged).count) TxIds")
        #expect(!rechallenged.contains(txid), "the consumed TxId was offered again")

        // One transaction waits (the re-challenge): the next transfer, another one, is the second.
        let next = try Kit.transfer(g, token: token, body: Self.amount(7))
        #expect(next.status == 401, "the next transfer after 20 reloads:\n\(next)")
        _ = try Kit.challengeTxid(next)
        // The re-challenge is a real one: approved, its parked request executes (the second transfer).
        if let again = rechallenged.first {
            try Kit.approve(g, txid: again, token: token, code: codes.next(Kit.demoSecret))
            let replay = try g.fetch("GET", "/transfer?_txid=\(again)", headers: headers)
            #expect(replay.status == 201, "\(replay)")
            #expect((try? replay.json())?["sequence"] as? NSNumber == 2, "\(replay)")
        }
        let log = g.process.stderr
        #expect(log.contains("transaction challenged again"))
        #expect(!log.contains(txid) && !rechallenged.contains(where: log.contains), "a full TxId in the log")
    }

    /// The JavaScript SDK retries every 401 once: two identical SDK requests get the same TxId,
    /// and one approval then lets exactly one of them through.
    @Test func twoIdenticalSDKRequestsGetTheSameTxId() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config(["security": ["maxPendingTransactions": 1]]))
        let demo = try Kit.login(g)
        let other = try Kit.login(g, user: "other")
        var codes = Kit.Codes()

        let first = try Kit.challengeTxid(try Kit.transfer(g, token: demo, body: Kit.transferBody))
        let second = try Kit.transfer(g, token: demo, body: Kit.transferBody)
        #expect(try Kit.challengeTxid(second) == first, "an identical request challenged again:\n\(second)")
        // The same bound values in another key order and spacing are the same request.
        let reordered = Array(#"{ "payee": "Bob", "amount": 100, "currency": "EUR" }"#.utf8)
        #expect(try Kit.challengeTxid(try Kit.transfer(g, token: demo, body: reordered)) == first)
        // Another amount is another request: over demo's limit of 1 waiting.
        expectGatewayError(try Kit.transfer(g, token: demo, body: Self.amount(7)), 429)
        // Another user's identical request is theirs: never demo's TxId.
        let theirs = try Kit.challengeTxid(try Kit.transfer(g, token: other, body: Kit.transferBody))
        #expect(theirs != first, "another user was handed demo's TxId")

        // Approved: the retry with it executes once; the approved TxId is never a new challenge.
        try Kit.approve(g, txid: first, token: demo, code: codes.next(Kit.demoSecret))
        let plain = try Kit.transfer(g, token: demo, body: Kit.transferBody)
        let fresh = try Kit.challengeTxid(plain)
        #expect(fresh != first, "an approved transaction was handed out as a challenge:\n\(plain)")
        let retry = try Kit.transfer(g, token: demo, body: Kit.transferBody, query: "?_txid=\(first)")
        #expect(retry.status == 201, "\(retry)")
        #expect((try? retry.json())?["sequence"] as? NSNumber == 1, "\(retry)")
        // Consumed: the same request again is challenged with the transaction still waiting.
        let again = try Kit.transfer(g, token: demo, body: Kit.transferBody, query: "?_txid=\(first)")
        #expect(try Kit.challengeTxid(again) == fresh, "\(again)")
    }

    /// Twenty identical SDK requests at once, spread over two instances on one Redis: one
    /// transaction, whichever instance each request reached.
    @Test(.timeLimit(.minutes(1)))
    func concurrentIdenticalChallengesOnTwoInstancesShareOneTxId() throws {
        let bed = try Testbed.current
        let cluster = try Cluster(bed: bed, instances: 2) { _ in Kit.config(["security": ["maxPendingTransactions": 2]]) }
        let token = try Cluster.login(start: cluster[0], finish: cluster[1])
        let ports = [cluster[0].port, cluster[1].port], headers = Kit.apiHeaders(token), body = Kit.transferBody
        let results = try Cluster.race(20, timeout: 10) { i in (ports[i % 2], "POST", "/transfer", headers, body) }
        let txids = results.compactMap { (try? $0.get()).flatMap { try? Kit.challengeTxid($0) } }
        #expect(txids.count == 20, "\(results.compactMap { try? $0.get() }.filter { $0.status != 401 }.prefix(3))")
        #expect(Set(txids).count == 1, "20 identical challenges got \(Set(txids).count) TxIds")
        // One waits: another transfer is demo's second, within the limit.
        #expect(try Kit.transfer(cluster[1], token: token, body: Self.amount(7)).status == 401)
    }
}
