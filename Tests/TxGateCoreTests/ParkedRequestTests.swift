import Testing
import TxGateCore

@Suite struct ParkedRequestRecordTests {
    let parked = ParkedRequest(txid: "7b8bfd4c-60fe-4271-928d-d09b94496f84", subject: "demo", method: "POST",
                               target: "/transfer?from=acc-001", contentType: "application/x-www-form-urlencoded",
                               accept: "text/html", body: Array("amount=100&payee=Bob%20%26%20Co".utf8) + [0, 0xFF])

    @Test func encodesAndDecodesEveryByteOfTheBody() {
        #expect(ParkedRequest.decode(parked.encoded) == parked)
        var bare = parked
        bare.contentType = nil
        bare.accept = nil
        bare.body = []
        #expect(ParkedRequest.decode(bare.encoded) == bare)
        #expect(ParkedRequest.decode(Array(#"{"txid":"x"}"#.utf8)) == nil)
        #expect(ParkedRequest.decode(Array(#"{"txid":"x","subject":"s","method":"POST","target":"/","body":"%%"}"#.utf8)) == nil)
    }

    /// The store's takeIf condition: the same user, back at the same target.
    @Test func onlyItsOwnUserAtItsOwnTargetCanClaimIt() {
        #expect(ConditionalTake.matches(parked.encoded, ParkedRequest.claim(subject: "demo", target: "/transfer?from=acc-001")))
        #expect(!ConditionalTake.matches(parked.encoded, ParkedRequest.claim(subject: "other", target: "/transfer?from=acc-001")))
        #expect(!ConditionalTake.matches(parked.encoded, ParkedRequest.claim(subject: "demo", target: "/transfer")))
        #expect(ParkedRequest.key(parked.txid) == "park:" + parked.txid)
    }

    @Test func onlyMethodsWithABodyAreParkedAndTheBoundIsInclusive() {
        #expect(!ParkedRequest.isParkable(method: "GET") && !ParkedRequest.isParkable(method: "HEAD"))
        #expect(ParkedRequest.isParkable(method: "POST") && ParkedRequest.isParkable(method: "DELETE"))
        #expect(ParkedRequest.tooLarge(bodyBytes: 65_536, limit: 65_536) == nil)
        let why = ParkedRequest.tooLarge(bodyBytes: 65_537, limit: 65_536) ?? ""
        #expect(why.contains("65537 bytes") && why.contains("limits.maxParkedBodyBytes"), "\(why)")
    }
}
