import Foundation
import Testing
@testable import TxGateCore

/// The audit trail's events, pure: what the gateway hands the store, and what the export
/// makes of a stored record (the store's time and the transaction it found).
@Suite struct AuditEventTests {
    static let rule = TransactionRule(journey: "Confirm", ttlS: 180, bindFields: ["/amount", "/payee"], display: "Pay {amount} to {payee}?")
    static let body = Array(#"{"amount":100,"payee":"Bob"}"#.utf8)
    static let request = TransactionBinding(realm: "/", resource: "https://gw/transfer", method: "POST", subject: "alice", rule: rule,
                                            body: body, contentType: "application/json")
    static let t0: Int64 = 1_800_000_000_123

    /// The record alice approved, as the store holds it.
    static func approvedRecord(expires: Int = 1_800_000_180) -> TransactionRecord {
        TransactionRecord(txid: "tx-1", state: .completed, realm: "/", resource: "https://gw/transfer", method: "POST", subject: "alice",
                          journey: "Confirm", bodyDigest: request.bodyDigest, bound: request.bound,
                          display: TransactionBinding.display(rule.display, bound: request.bound), expires: expires)
    }

    func json(_ line: String) -> [String: JSONValue] { JSONValue.parse(Array(line.utf8))?.objectValue ?? [:] }

    /// `entry` writes its members in order instead of sorting a dictionary: the bytes must be
    /// the canonical form of the same members.
    @Test func entriesAreTheCanonicalFormOfTheirMembers() {
        func reference(_ e: AuditEvent) -> [UInt8] {
            var o: [String: JSONValue] = ["event": .string(e.kind.rawValue), "txid": .string(e.txid), "subject": .string(e.subject),
                                          "requestId": .string(e.requestId)]
            if let v = e.realm { o["realm"] = .string(v) }
            if let v = e.method { o["method"] = .string(v) }
            if let v = e.resource { o["resource"] = .string(v) }
            if let v = e.journey { o["journey"] = .string(v) }
            if let v = e.display { o["display"] = .string(v) }
            if !e.bound.isEmpty { o["bound"] = .object(e.bound) }
            if let v = e.reason { o["reason"] = .string(v) }
            if let v = e.bodyDigest { o["bodyDigest"] = .string(v) }
            if let v = e.passkey { o["passkey"] = v }
            return JSONValue.object(o).canonicalBytes
        }
        let bare = AuditEvent(kind: .refused, txid: "t", subject: "é\"", requestId: "r")
        let full = AuditEvent(kind: .approved, txid: "tx-1", subject: "alice", requestId: "req-7", realm: "/", method: "POST",
                              resource: "https://gw/transfer", journey: "Confirm", display: "Pay 100 → Bob?",
                              bound: ["/amount": .number(100), "/payee": "Bob"], reason: "why\n", bodyDigest: "ab",
                              passkey: ["credentialId": "c"])
        for e in [bare, full] {
            #expect(e.entry == reference(e), "\(String(decoding: e.entry, as: UTF8.self))")
            #expect(AuditEvent(entry: e.entry)?.entry == e.entry)
        }
    }

    @Test func anApprovalCarriesWhatWasShownAndTheJourney() throws {
        var created = Self.approvedRecord()
        created.state = .created
        let tx = try #require(created.approved(by: "alice"))
        let event = AuditEvent.approved(tx, requestId: "req-7")
        let stored = StoredAuditRecord(timeMs: Self.t0, id: "42", entry: event.entry, found: nil)
        let line = json(try #require(AuditEvent(stored: stored)).jsonLine)
        #expect(line["event"] == "approved")
        #expect(line["txid"] == "tx-1")
        #expect(line["subject"] == "alice")
        #expect(line["requestId"] == "req-7")
        #expect(line["journey"] == "Confirm")
        #expect(line["display"] == "Pay 100 to Bob?")
        #expect(line["bound"] == .object(["/amount": .number(100), "/payee": "Bob"]))
        #expect(line["time"] == "2027-01-15T08:00:00.123Z")
        #expect(line["id"] == "42")
        #expect(line["reason"] == nil)
    }

    @Test func aConsumeIsCompletedFromTheRecordTheStoreTook() throws {
        let pair = AuditEvent.consume(txid: "tx-1", Self.request, requestId: "req-9")
        let stored = StoredAuditRecord(timeMs: Self.t0, id: "1700000000000-0", entry: pair.consumed, found: Self.approvedRecord().encoded)
        let event = try #require(AuditEvent(stored: stored))
        #expect(event.kind == .consumed)
        #expect(event.requestId == "req-9")
        #expect(event.display == "Pay 100 to Bob?")
        #expect(event.journey == "Confirm")
        #expect(event.bound["/payee"] == "Bob")
        #expect(event.reason == nil)
        // The digest is only the export's means to name a refusal; it is never printed.
        #expect(json(event.jsonLine)["bodyDigest"] == nil)
        #expect(json(event.jsonLine)["method"] == "POST")
        #expect(json(event.jsonLine)["resource"] == "https://gw/transfer")
    }

    @Test func aRefusalSaysWhyAsTheGatewaysLogDoes() throws {
        let pair = AuditEvent.consume(txid: "tx-1", Self.request, requestId: "req-9")
        func reason(found: TransactionRecord?, request: [UInt8] = pair.refused, at ms: Int64 = Self.t0) throws -> String? {
            try #require(AuditEvent(stored: StoredAuditRecord(timeMs: ms, id: "1", entry: request, found: found?.encoded))).reason
        }
        #expect(try reason(found: nil) == "unknown, expired or consumed")
        var pending = Self.approvedRecord()
        pending.state = .created
        #expect(try reason(found: pending) == "not completed")
        var bobs = Self.approvedRecord()
        bobs.subject = "bob"
        #expect(try reason(found: bobs) == "another subject")
        #expect(try reason(found: Self.approvedRecord(expires: Int(Self.t0 / 1000))) == "expired")
        // Another amount: another digest than the one approved.
        let other = TransactionBinding(realm: "/", resource: "https://gw/transfer", method: "POST", subject: "alice", rule: Self.rule,
                                       body: Array(#"{"amount":999,"payee":"Bob"}"#.utf8), contentType: "application/json")
        let otherRefused = AuditEvent.consume(txid: "tx-1", other, requestId: "req-10").refused
        #expect(try reason(found: Self.approvedRecord(), request: otherRefused) == "the bound body fields differ")
        // What the refused retry was asking for is shown as the transaction said it.
        let event = try #require(AuditEvent(stored: StoredAuditRecord(timeMs: Self.t0, id: "1", entry: otherRefused,
                                                                      found: Self.approvedRecord().encoded)))
        #expect(event.kind == .refused)
        #expect(event.display == "Pay 100 to Bob?")
    }

    @Test func aDenialKeepsItsReasonAndTheDisplayShown() throws {
        let event = AuditEvent(kind: .declined, txid: "tx-1", subject: "alice", requestId: "req-3", realm: "/", journey: "Confirm",
                               display: "Pay 100 to Bob?", reason: "wrong code")
        let back = try #require(AuditEvent(stored: StoredAuditRecord(timeMs: Self.t0, id: "5", entry: event.entry,
                                                                      found: Self.approvedRecord().encoded)))
        #expect(back.kind == .declined)
        #expect(back.reason == "wrong code")
        #expect(back.display == "Pay 100 to Bob?")
        #expect(back.bound["/amount"] == .number(100))
    }

    @Test func entriesRoundTripAndRejectWhatIsNotAnEvent() throws {
        let event = AuditEvent(kind: .refused, txid: "t\"x", subject: "ali\nce", requestId: "r", method: "POST", resource: "/a b",
                               bound: ["/n": .null], reason: "x", bodyDigest: "abc")
        #expect(AuditEvent(entry: event.entry) == event)
        // Canonical: the same event always gives the same bytes.
        #expect(event.entry == AuditEvent(entry: event.entry)!.entry)
        #expect(AuditEvent(entry: Array(#"{"event":"stolen","txid":"a","subject":"b","requestId":"c"}"#.utf8)) == nil)
        #expect(AuditEvent(entry: Array(#"{"event":"approved","txid":"a","subject":"b"}"#.utf8)) == nil)
        #expect(AuditEvent(entry: Array(#"{"event":"approved","txid":"a","subject":"b","requestId":"c","bound":3}"#.utf8)) == nil)
        #expect(AuditEvent(entry: Array("not json".utf8)) == nil)
        // One line, whatever the values hold.
        let line = try #require(AuditEvent(stored: StoredAuditRecord(timeMs: 0, id: "1", entry: event.entry, found: nil))).jsonLine
        #expect(!line.contains("\n"))
        #expect(json(line)["subject"] == "ali\nce")
        #expect(json(line)["time"] == "1970-01-01T00:00:00.000Z")
    }

    @Test func exportTimesAreRFC3339OrDurationsBackFromNow() {
        let now: Int64 = 1_800_000_000_000
        #expect(AuditTime.parse("24h", nowMs: now) == now - 86_400_000)
        #expect(AuditTime.parse("90s", nowMs: now) == now - 90_000)
        #expect(AuditTime.parse("15m", nowMs: now) == now - 900_000)
        #expect(AuditTime.parse("7d", nowMs: now) == now - 7 * 86_400_000)
        #expect(AuditTime.parse("2027-01-15T08:00:00Z", nowMs: now) == 1_800_000_000_000)
        #expect(AuditTime.parse("2027-01-15T08:00:00.123Z", nowMs: now) == 1_800_000_000_123)
        #expect(AuditTime.parse("2027-01-15T10:00:00+02:00", nowMs: now) == 1_800_000_000_000)
        #expect(AuditTime.parse("yesterday", nowMs: now) == nil)
        #expect(AuditTime.parse("24x", nowMs: now) == nil)
        #expect(AuditTime.parse("-1h", nowMs: now) == nil)
        #expect(AuditTime.parse("99999999999999999d", nowMs: now) == nil)
        #expect(AuditEvent.rfc3339(ms: 1_800_000_000_123) == "2027-01-15T08:00:00.123Z")
    }

    @Test func theRetentionIsDaysBetweenOneAndTenYears() throws {
        func decode(_ audit: String) -> Result<GatewayConfig, ConfigErrors> {
            Result { () throws(ConfigErrors) in
                try ConfigLoader.decode(Data(#"{"upstream": {"url": "http://a"}, "audit": \#(audit)}"#.utf8), folder: "/tmp")
            }
        }
        #expect(try decode("{}").get().audit.retentionDays == 90)
        #expect(try decode(#"{"retentionDays": 7}"#).get().audit.retentionMs == 7 * 86_400_000)
        func errors(_ audit: String) -> [String] {
            if case .failure(let e) = decode(audit) { return e.errors.map(\.description) }
            return []
        }
        #expect(errors(#"{"retentionDays": 0}"#) == ["audit.retentionDays: must be greater than 0"])
        #expect(errors(#"{"retentionDays": 4000}"#) == ["audit.retentionDays: must be at most 3650 (ten years)"])
        #expect(errors(#"{"retention": 7}"#).count == 1)
        #expect(errors(#"{"retention": 7}"#).first?.hasPrefix("audit.retention") == true)
    }
}
