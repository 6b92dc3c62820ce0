import Foundation
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

    static func record() -> TransactionRecord {
        TransactionRecord(txid: "0b9f7c3e-1a2b-4c3d-8e9f-0a1b2c3d4e5f", realm: "/", resource: "/transfer", method: "POST",
                          subject: "alice", journey: "ConfirmTransaction", bodyDigest: "ab12", bound: ["/amount": .number(5)],
                          display: nil, expires: 1_790_000_000)
    }

    /// The seal is digested once: given when the record is made, read back with it, and
    /// digested again only when a member it covers changes.
    @Test func theSealIsKeptUntilAMemberItCoversChanges() throws {
        let r = Self.record()
        let digested = TransactionBinding.seal(realm: "/", resource: "/transfer", method: "POST", subject: "alice", bodyDigest: "ab12")
        #expect(r.seal == digested)
        let given = TransactionRecord(txid: r.txid, realm: r.realm, resource: r.resource, method: r.method, subject: r.subject,
                                      journey: r.journey, bodyDigest: r.bodyDigest, bound: r.bound, display: nil,
                                      expires: r.expires, seal: digested)
        #expect(given == r && given.encoded == r.encoded)
        // The stored seal is the one read (the store's own check compares it, not a fresh digest).
        var text = String(decoding: r.encoded, as: UTF8.self)
        text = text.replacingOccurrences(of: digested, with: String(repeating: "0", count: 64))
        var read = try #require(TransactionRecord.decode(Array(text.utf8)))
        #expect(read.seal == String(repeating: "0", count: 64))
        read.state = .completed
        #expect(read.seal == String(repeating: "0", count: 64), "the state is not sealed")
        for change: (inout TransactionRecord) -> Void in [{ $0.subject = "bob" }, { $0.realm = "/x" }, { $0.resource = "/y" },
                                                          { $0.method = "PUT" }, { $0.bodyDigest = nil }] {
            var changed = read
            change(&changed)
            #expect(changed.seal == TransactionBinding.seal(realm: changed.realm, resource: changed.resource, method: changed.method,
                                                            subject: changed.subject, bodyDigest: changed.bodyDigest))
        }
    }

    /// Copies share their members until one changes: a change is the copy's alone.
    @Test func aChangedCopyLeavesTheOriginalAsItWas() throws {
        let original = Self.record()
        var copy = original
        copy.state = .completed
        copy.display = "shown"
        copy.bound["/amount"] = .number(6)
        #expect(original.state == .created && original.display == nil && original.bound == ["/amount": .number(5)])
        #expect(copy.state == .completed && copy.display == "shown" && copy.bound == ["/amount": .number(6)])
        #expect(copy != original && original == Self.record())
        let approved = try #require(original.approved(by: "alice", passkey: .string("evidence")))
        #expect(approved.state == .completed && approved.passkey == .string("evidence") && approved.seal == original.seal)
        #expect(original.state == .created && original.passkey == nil)
    }

    @Test func aRecordWithARepeatedOrMissingMemberIsNotRead() {
        let text = String(decoding: Self.record().encoded, as: UTF8.self)
        #expect(TransactionRecord.decode(Array(text.utf8)) == Self.record())
        #expect(TransactionRecord.decode(Array(text.replacingOccurrences(of: #""subject":"alice""#,
                                                                         with: #""subject":"alice","subject":"bob""#).utf8)) == nil)
        #expect(TransactionRecord.decode(Array(text.replacingOccurrences(of: #""subject":"alice","#, with: "").utf8)) == nil)
        #expect(TransactionRecord.decode(Array(text.replacingOccurrences(of: #""expires":1790000000"#, with: #""expires":"x""#).utf8)) == nil)
        #expect(TransactionRecord.decode(Array(text.replacingOccurrences(of: #""state":"CREATED""#, with: #""state":"DONE""#).utf8)) == nil)
        #expect(TransactionRecord.decode(Array((text + " x").utf8)) == nil)
        #expect(TransactionRecord.decode(Array("[]".utf8)) == nil)
    }
}
