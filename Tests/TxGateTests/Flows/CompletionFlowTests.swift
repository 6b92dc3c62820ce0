import Foundation
import Testing
import TestSupport

/// A transaction's journey completes with a compare-and-swap from the record as the worker
/// read it when the journey started (`StartedRecords`): no second read of the record where
/// the journey started, and where it did not (another instance), or where the record changed
/// since, the record is read and decided as before. Two gateways in process share one SQLite
/// file and one signing key, as two instances of a deployment do.
@Suite struct CompletionFlowTests {
    typealias Kit = TransactionKit

    static func pair() throws -> (TestGateway, TestGateway, TemporaryDirectory) {
        let shared = try TemporaryDirectory(prefix: "txgate-completion")
        let overrides: (String) -> [String: Any] = { _ in
            Kit.config(["store": ["path": shared.path("store.db")], "secrets": ["signingKeyFile": shared.path("signing.key")],
                        "metrics": ["allowFrom": ["127.0.0.1/32"]]])
        }
        let g1 = try GatewayForm.inProcess.start(configForURL: overrides)
        do {
            return (g1, try GatewayForm.inProcess.start(configForURL: overrides), shared)
        } catch {
            g1.stop()
            throw error
        }
    }

    /// The gateway's count of store operations `operation` so far (its metrics).
    static func storeOperations(_ g: TestGateway, _ operation: String) throws -> Int {
        let r = try g.fetch("GET", "/-/metrics")
        let name = #"txgate_store_operation_duration_seconds_count{operation=""# + operation + #""} "#
        let line = try #require(r.bodyText.split(separator: "\n").first { $0.hasPrefix(name) }, "no \(name) in:\n\(r)")
        return try #require(Int(line.dropFirst(name.count)), "\(line)")
    }

    /// Answers a started journey's step with `code` on `g`; returns the answer and the store
    /// reads and swaps `g` made meanwhile.
    static func submit(_ g: TestGateway, _ step: [String: Any], code: String, token: String) throws
        -> (response: HTTPResponse, gets: Int, swaps: Int) {
        let (gets, swaps) = (try storeOperations(g, "get"), try storeOperations(g, "compare_and_swap"))
        let done = try Kit.post(g, Kit.authPath, Kit.answer(step, [code]), headers: [("iPlanetDirectoryPro", token)])
        return (done, try storeOperations(g, "get") - gets, try storeOperations(g, "compare_and_swap") - swaps)
    }

    /// `body` challenged on `g`, then its approval journey started on `h`: the TxId and the step.
    static func started(challengedOn g: TestGateway, startedOn h: TestGateway, token: String,
                        body: [UInt8] = Kit.transferBody) throws -> (txid: String, step: [String: Any]) {
        let txid = try Kit.challengeTxid(try Kit.transfer(g, token: token, body: body))
        let start = try Kit.startComposite(h, txid: txid, session: .header(token))
        guard start.status == 200 else { throw HarnessError("approval of \(txid) did not start: \(start)") }
        return (txid, try start.json())
    }

    @Test(.timeLimit(.minutes(1)))
    func aJourneyCompletedWhereItStartedReadsTheRecordOnceLessThanElsewhere() throws {
        let (g1, g2, dir) = try Self.pair()
        defer { g1.stop(); g2.stop(); _ = dir }
        let token = try Kit.login(g1)
        var codes = Kit.Codes(g1)

        // Started and completed on g1.
        let here = try Self.started(challengedOn: g1, startedOn: g1, token: token)
        let local = try Self.submit(g1, here.step, code: codes.next(Kit.demoSecret), token: token)
        #expect(local.response.status == 200, "\(local.response)")
        #expect(local.swaps == 1)

        // Started on g2, completed on g1: g1 has not read this record, and reads it.
        let body = Array(#"{"amount":7,"currency":"EUR","payee":"Eve"}"#.utf8)
        let there = try Self.started(challengedOn: g1, startedOn: g2, token: token, body: body)
        let remote = try Self.submit(g1, there.step, code: codes.next(Kit.demoSecret), token: token)
        #expect(remote.response.status == 200, "\(remote.response)")
        #expect(remote.swaps == 1)
        #expect(remote.gets == local.gets + 1, "gets during the completion: \(local.gets) where it started, \(remote.gets) elsewhere")

        // Both approvals count, once each.
        #expect(try Kit.transfer(g1, token: token, body: Kit.transferBody, query: "?_txid=\(here.txid)").status == 201)
        #expect(try Kit.transfer(g1, token: token, body: body, query: "?_txid=\(there.txid)").status == 201)
        #expect(try Kit.transfer(g2, token: token, body: body, query: "?_txid=\(there.txid)").status == 401)
    }

    /// The record changed after the journey started here (it was approved on another
    /// instance): the swap from what was read at the start fails, the record is read again,
    /// and the journey approves nothing; the transaction executes once.
    @Test(.timeLimit(.minutes(1)))
    func aRecordChangedSinceTheStartIsReadAgainAndApprovedOnce() throws {
        let (g1, g2, dir) = try Self.pair()
        defer { g1.stop(); g2.stop(); _ = dir }
        let token = try Kit.login(g1)
        var codes = Kit.Codes(g1)
        let (txid, step) = try Self.started(challengedOn: g1, startedOn: g1, token: token)

        try Kit.approve(g2, txid: txid, token: token, code: codes.next(Kit.demoSecret))

        let late = try Self.submit(g1, step, code: codes.next(Kit.demoSecret), token: token)
        #expect(late.response.status == 401, "a second approval of one transaction:\n\(late.response)")
        #expect(late.swaps == 1, "the swap from the record as started")
        #expect(g1.logText.contains("transaction gone before completion"), "the record read again decides")
        #expect(g2.logText.contains("\"transaction approved\""))
        #expect(!g1.logText.contains("\"transaction approved\""), "g1 approved it too")

        #expect(try Kit.transfer(g1, token: token, body: Kit.transferBody, query: "?_txid=\(txid)").status == 201)
        #expect(try Kit.transfer(g2, token: token, body: Kit.transferBody, query: "?_txid=\(txid)").status == 401)
    }
}
