import Foundation
import Testing
import TestSupport

/// A browser's POST that needs approval (WIRE-EXTENSIONS.md §3b): parked under its TxId with a
/// 303 to the login page, replayed once when the approved browser comes back with
/// `GET <url>?_txid=X`, and gone when its transaction expires. Judged on the wire, with the
/// bank's transfer sequence as the count of executions. In process and against the binary;
/// the expiry in process only. The rest are IntegrationTests' ParkedRequestTests.
@Suite struct ParkedRequestFlowTests {
    typealias Kit = TransactionKit
    typealias Parked = ParkedRequestKit

    @Test(arguments: GatewayForm.allCases)
    func aBrowsersPostIsParkedApprovedAndReplayedExactlyOnce(_ form: GatewayForm) throws {
        let g = try form.start(Kit.config())
        defer { g.stop() }
        let token = try Kit.login(g)
        var codes = Kit.Codes(g)

        let first = try g.fetch("POST", "/transfer?from=acc-001", headers: Parked.browserHeaders(token, Parked.jsonType),
                                body: Kit.transferBody)
        let (txid, goto) = try Parked.parked(first)
        #expect(goto == "\(Kit.publicURL(g))/transfer?from=acc-001&_txid=\(txid)", "\(first)")
        #expect(first.header("Cache-Control") == "no-store")
        #expect(!first.bodyText.contains("executed"))

        try Kit.approve(g, txid: txid, token: token, code: codes.next(Kit.demoSecret))

        // Back from the login page: the GET is the parked POST, sent as it was.
        let replay = try g.fetch("GET", Parked.target(goto), headers: Parked.browserHeaders(token))
        #expect(replay.status == 201, "the replay:\n\(replay)")
        let executed = try replay.json()
        #expect(executed["status"] as? String == "executed", "\(replay)")
        #expect(executed["payee"] as? String == "Bob")
        #expect((executed["sequence"] as? NSNumber)?.intValue == 1, "\(replay)")

        // The same URL again (a reload): the transaction is consumed, so the parked request
        // needs a new approval: a new challenge, parked under a new TxId, never a second execution.
        let again = try g.fetch("GET", Parked.target(goto), headers: Parked.browserHeaders(token))
        let (fresh, freshGoto) = try Parked.parked(again)
        #expect(fresh != txid && freshGoto == "\(Kit.publicURL(g))/transfer?from=acc-001&_txid=\(fresh)", "\(again)")
        #expect(!again.bodyText.contains("executed"))
        #expect(try Parked.transfersSoFar(g, token: token, codes: &codes) == 1)
        let log = g.logText
        #expect(log.contains("request parked") && log.contains("transaction consumed"))
        #expect(!log.contains(txid), "a full TxId in the log")
    }


    /// A parked request lives as long as its transaction: replayed a second before the end it
    /// is executed; another one, parked and approved at the same instant, is gone two seconds
    /// later, and never executed.
    @Test(arguments: GatewayForm.withClock)
    func aParkedRequestExpiresWithItsTransaction(_ form: GatewayForm) throws {
        let g = try form.start(Kit.config(transferTtlS: 60))
        defer { g.stop() }
        let token = try Kit.login(g)
        var codes = Kit.Codes(g)
        let other = Array(#"{"amount":7,"currency":"EUR","payee":"Carol"}"#.utf8)
        let (keptTxid, keptGoto) = try Parked.parked(try g.fetch("POST", "/transfer", headers: Parked.browserHeaders(token, Parked.jsonType),
                                                               body: Kit.transferBody))
        let (txid, goto) = try Parked.parked(try g.fetch("POST", "/transfer", headers: Parked.browserHeaders(token, Parked.jsonType),
                                                       body: other))
        try Kit.approve(g, txid: keptTxid, token: token, code: codes.next(Kit.demoSecret))
        try Kit.approve(g, txid: txid, token: token, code: codes.next(Kit.demoSecret))

        g.advance(seconds: 59)
        let inTime = try g.fetch("GET", Parked.target(keptGoto), headers: Parked.browserHeaders(token))
        #expect(inTime.status == 201, "replayed 59 s after it was parked with ttlS 60:\n\(inTime)")

        g.advance(seconds: 2)
        let late = try g.fetch("GET", Parked.target(goto), headers: Parked.browserHeaders(token))
        #expect(late.status == 403, "an expired parked request is gone:\n\(late)")
        #expect(!late.bodyText.contains("executed"))
        // Codes from the clock as it is now: the ones above are a minute old.
        var later = Kit.Codes(g)
        #expect(try Parked.transfersSoFar(g, token: token, codes: &later) == 1)
    }
}
