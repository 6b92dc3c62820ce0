import Foundation
import Testing
import TestSupport

/// One-shot transactional authorization (WIRE.md §1–3, §7): the challenge, the
/// composite-advice journey that approves it with a TOTP code, the retry executed exactly
/// once, and the approval's expiry, measured by the gateway's clock. The flow runs in process
/// and against the binary; the expiry in process only, where the clock is moved instead of
/// waited for. The rest of the transaction tests are IntegrationTests' TransactionTests.
@Suite struct TransactionFlowTests {
    typealias Kit = TransactionKit

    @Test(arguments: GatewayForm.allCases)
    func fullFlowChallengeApproveRetryOnceThenNewChallenge(_ form: GatewayForm) throws {
        let g = try form.start(Kit.config())
        defer { g.stop() }
        let token = try Kit.login(g)
        var codes = Kit.Codes(g)

        // The first try: 401 SSOADVICE naming a fresh transaction.
        let first = try Kit.transfer(g, token: token, body: Kit.transferBody)
        #expect(first.status == 401, "first try:\n\(first)")
        let header = try #require(first.header("WWW-Authenticate"), "no WWW-Authenticate on:\n\(first)")
        #expect(header.hasPrefix("SSOADVICE "), "\(header)")
        let params = try Kit.ssoAdviceParams(header)
        let advices = try Kit.decodeAdviceJSON(try #require(params["advices"]))
        #expect(Array(advices.keys) == ["TransactionConditionAdvice"], "\(advices)")
        let txids = try #require(advices["TransactionConditionAdvice"])
        #expect(txids.count == 1)
        let txid = try #require(txids.first)
        #expect(Kit.isUUID(txid), "TxId '\(txid)' is not a UUID")
        #expect(try Kit.bodyAdvices(first) == advices, "body advices differ from the header's")
        #expect(!first.bodyText.contains("executed"))

        // The journey the advice asks for shows what is approved, then asks for the code.
        let start = try Kit.startComposite(g, txid: txid, session: .header(token))
        #expect(start.status == 200, "composite_advice start:\n\(start)")
        let step = try start.json()
        let callbacks = try #require(step["callbacks"] as? [[String: Any]])
        #expect(callbacks.map { $0["type"] as? String } == ["TextOutputCallback", "PasswordCallback"], "\(callbacks)")
        #expect(Kit.output(callbacks.first, "message") as? String == "Approve 100 EUR to Bob?", "\(callbacks)")
        #expect(Kit.output(callbacks.first, "messageType") as? String == "0")

        let done = try Kit.post(g, Kit.authPath, Kit.answer(step, [codes.next(Kit.demoSecret)]), headers: [("iPlanetDirectoryPro", token)])
        #expect(done.status == 200, "answering the TOTP step:\n\(done)")
        #expect(try done.json()["tokenId"] as? String == token, "the approval must answer with the same session")

        // The retry with _txid is allowed, and reaches demo-bank.
        let retry = try Kit.transfer(g, token: token, body: Kit.transferBody, query: "?_txid=\(txid)")
        #expect(retry.status == 201, "retry with _txid:\n\(retry)")
        let executed = try retry.json()
        #expect(executed["status"] as? String == "executed")
        #expect((executed["amount"] as? NSNumber)?.intValue == 100)
        #expect(executed["payee"] as? String == "Bob")
        #expect((executed["sequence"] as? NSNumber)?.intValue == 1)

        // Once only: the same retry again is a new challenge with a new TxId.
        let again = try Kit.transfer(g, token: token, body: Kit.transferBody, query: "?_txid=\(txid)")
        #expect(again.status == 401, "second retry with the consumed TxId:\n\(again)")
        let newTxid = try Kit.challengeTxid(again)
        #expect(newTxid != txid, "a consumed TxId was offered again")
        #expect(Kit.isUUID(newTxid))
        #expect(!again.bodyText.contains("executed"))
    }


    /// The approval lives as long as its transaction (the policy's `ttlS`, counted by the
    /// record's expiry and by the store's TTL): used a second before the end it is executed;
    /// another one, approved at the same instant, used two seconds later is a new challenge.
    @Test(arguments: GatewayForm.withClock)
    func anExpiredTransactionIsANewChallenge(_ form: GatewayForm) throws {
        let g = try form.start(Kit.config(transferTtlS: 60))
        defer { g.stop() }
        let token = try Kit.login(g)
        var codes = Kit.Codes(g)
        let other = Array(#"{"amount":7,"currency":"EUR","payee":"Carol"}"#.utf8)
        let txid = try Kit.approvedTransfer(g, token: token, codes: &codes)
        let otherTxid = try Kit.approvedTransfer(g, token: token, codes: &codes, body: other)

        g.advance(seconds: 59)
        let inTime = try Kit.transfer(g, token: token, body: Kit.transferBody, query: "?_txid=\(txid)")
        #expect(inTime.status == 201, "retry 59 s after an approval with ttlS 60:\n\(inTime)")

        g.advance(seconds: 2)
        let late = try Kit.transfer(g, token: token, body: other, query: "?_txid=\(otherTxid)")
        #expect(late.status == 401, "retry 61 s after an approval with ttlS 60:\n\(late)")
        let newTxid = try Kit.challengeTxid(late)
        #expect(newTxid != otherTxid)
        #expect(!late.bodyText.contains("executed"))
    }
}
