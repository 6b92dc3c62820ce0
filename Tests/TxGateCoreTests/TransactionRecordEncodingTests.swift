import Testing
@testable import TxGateCore

/// `TransactionRecord.encoded` writes its members in order instead of sorting a dictionary:
/// the bytes must be the canonical form of the same members (seals, compare-and-swap and the
/// Redis scripts' cjson all read them).
@Suite struct TransactionRecordEncodingTests {
    static func reference(_ r: TransactionRecord) -> [UInt8] {
        var o: [String: JSONValue] = [
            "txid": .string(r.txid), "state": .string(r.state.rawValue), "realm": .string(r.realm), "resource": .string(r.resource),
            "method": .string(r.method), "subject": .string(r.subject), "journey": .string(r.journey), "bound": .object(r.bound),
            "expires": .number(r.expires), "seal": .string(r.seal),
        ]
        if let bodyDigest = r.bodyDigest { o["bodyDigest"] = .string(bodyDigest) }
        if let display = r.display { o["display"] = .string(display) }
        if let passkey = r.passkey { o["passkey"] = passkey }
        if let details = r.authorizationDetails { o["authorizationDetails"] = details }
        return JSONValue.object(o).canonicalBytes
    }

    @Test func encodesTheCanonicalFormOfItsMembers() {
        let bound: [String: JSONValue] = ["/amount": .number(100), "/payee": "Bob \"the\" \u{1F600}", "/currency": "EUR", "/z\n": .null]
        var records: [TransactionRecord] = []
        for digest in [nil, "ab12"] as [String?] {
            for display in [nil, "Pay {amount} → \\ /x?"] as [String?] {
                var r = TransactionRecord(txid: "0b9f7c3e-1a2b-4c3d-8e9f-0a1b2c3d4e5f", realm: "/", resource: "http://gw/transfer?x=1",
                                          method: "POST", subject: "démo", journey: "ConfirmTransaction", bodyDigest: digest,
                                          bound: digest == nil ? [:] : bound, display: display, expires: 1_790_000_000)
                records.append(r)
                r.state = .completed
                r.passkey = ["credentialId": "abc", "signCount": 3]
                records.append(r)
                r.authorizationDetails = [["type": "payment", "amount": 5]]
                records.append(r)
            }
        }
        for r in records {
            #expect(r.encoded == Self.reference(r), "\(String(decoding: r.encoded, as: UTF8.self))")
            #expect(TransactionRecord.decode(r.encoded).map { $0.encoded } == r.encoded, "round trip")
        }
    }
}
