import Testing
import TxGateCore
import HTTPCore

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

extension ParkedRequestRecordTests {
    @Test func onlyABrowsersFormNavigationIsParked() {
        func nav(_ method: String, _ pairs: [(String, String)]) -> Bool {
            ParkedRequest.isFormNavigation(method: method, headers: HTTPHeaders(pairs))
        }
        let form = ("Content-Type", "application/x-www-form-urlencoded")
        #expect(nav("POST", [("Sec-Fetch-Mode", "navigate"), ("Content-Type", "application/json")]))
        #expect(!nav("GET", [("Sec-Fetch-Mode", "navigate")]))
        #expect(!nav("POST", [("Sec-Fetch-Mode", "cors"), ("Accept", "text/html"), form]))
        #expect(!nav("POST", [("Sec-Fetch-Site", "same-origin"), ("Accept", "text/html"), form]), "a Sec-Fetch browser without navigate")
        #expect(nav("POST", [("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"), form]))
        #expect(nav("PUT", [("Accept", "text/html"), ("Content-Type", "multipart/form-data; boundary=x")]))
        #expect(!nav("POST", [("Accept", "*/*"), form]))
        #expect(!nav("POST", [("Accept", "application/json"), form]))
        #expect(!nav("POST", [("Accept", "text/html;q=0.5, application/json"), form]))
        #expect(!nav("POST", [("Accept", "text/html"), ("Content-Type", "application/json")]))
        #expect(!nav("POST", [form]))
    }
}
