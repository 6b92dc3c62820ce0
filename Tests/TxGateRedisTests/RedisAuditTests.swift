import EventHTTP
import Foundation
import Testing
import TxGateCore
import TxGateRedis
import TestSupport

/// The audit trail on a real redis-server (issue 22 item 7): a record is added by the same
/// fenced script as the change it records, so it exists if and only if the change happened.
@Suite struct RedisAuditTests {
    static let rule = TransactionRule(journey: "Confirm", ttlS: 180, bindFields: ["/amount"], display: "Pay {amount}?")
    static let request = TransactionBinding(realm: "/", resource: "https://gw/transfer", method: "POST", subject: "alice", rule: rule,
                                            body: Array(#"{"amount":5}"#.utf8), contentType: "application/json")

    static func record(_ txid: String, _ state: TransactionRecord.State) -> TransactionRecord {
        TransactionRecord(txid: txid, state: state, realm: "/", resource: request.resource, method: "POST", subject: "alice",
                          journey: "Confirm", bodyDigest: request.bodyDigest, bound: request.bound, display: "Pay 5?",
                          expires: Int(Date().timeIntervalSince1970) + 180)
    }

    /// Every record the export reads, as events.
    func trail(_ redis: RedisServer, prefix: String = "t:") throws -> [AuditEvent] {
        var out: [AuditEvent] = []
        try RedisStore.auditRecords(url: redis.storeURL, keyPrefix: prefix, timeoutMs: 1000, sinceMs: 0, untilMs: .max) { r in
            out.append(try #require(AuditEvent(stored: r)))
        }
        return out
    }

    // Records live an hour here, not a minute: in the full suite on two cores this async test can
    // wait a minute or more for a cooperative thread between its steps, and a record that expired
    // meanwhile read as "absent" (every consume refused).

    /// Ten retries of one approval on two gateways' connections: one consumed, nine refused,
    /// and the trail says exactly that, with what was shown from the record taken.
    @Test func ofTenConcurrentConsumesExactlyOneIsRecordedConsumed() async throws {
        let redis = try RedisServer.start()
        defer { redis.kill() }
        let loops = RunningLoops(4)
        let a = makeStore(redis.storeURL, on: Array(loops.loops[0..<2]))
        let b = makeStore(redis.storeURL, on: Array(loops.loops[2..<4]))
        defer { loops.stop(detaching: [a, b]) }
        func store(_ loop: EventLoop) -> RedisStore { loops.loops.firstIndex { $0 === loop }! < 2 ? a : b }

        let tx = Self.record("tx-10", .completed)
        try await call(on: loops.loops[0]) { a.put(TransactionRecord.key(tx.txid), value: tx.encoded, ttlMs: 3_600_000, on: $0, $1) }.get()
        let results = await concurrently(10, loops: loops.loops) { i, loop, done in
            let audit = AuditEvent.consume(txid: tx.txid, Self.request, requestId: "req-\(i)").append(retentionMs: 86_400_000)
            store(loop).takeIf(TransactionRecord.key(tx.txid), fields: TransactionRecord.consumable(by: Self.request), audit: audit,
                               on: loop, done)
        }
        let taken = try results.filter { if case .taken = try $0.get() { return true } else { return false } }
        #expect(taken.count == 1)

        let events = try trail(redis)
        #expect(events.count == 10)
        let consumed = events.filter { $0.kind == .consumed }
        #expect(consumed.count == 1)
        #expect(consumed.first?.display == "Pay 5?")
        #expect(consumed.first?.bound == ["/amount": .number(5)])
        #expect(consumed.first?.journey == "Confirm")
        #expect(events.filter { $0.kind == .refused }.allSatisfy { $0.reason == "unknown, expired or consumed" })
        // Time-ordered: stream IDs only grow.
        #expect(events.map { $0.timeMs! } == events.map { $0.timeMs! }.sorted())
        #expect(Set(events.map(\.requestId)).count == 10)
    }

    /// An approval's record is added only by the swap that approved: of concurrent
    /// completions one wins and one record exists; a failed swap writes nothing.
    @Test func anApprovalIsRecordedOnlyByTheSwapThatMadeIt() async throws {
        let redis = try RedisServer.start()
        defer { redis.kill() }
        let loops = RunningLoops(2)
        let store = makeStore(redis.storeURL, on: loops.loops)
        defer { loops.stop(detaching: [store]) }

        let created = Self.record("tx-a", .created)
        let approved = try #require(created.approved(by: "alice"))
        let key = TransactionRecord.key(created.txid)
        try await call(on: loops.loops[0]) { store.put(key, value: created.encoded, ttlMs: 3_600_000, on: $0, $1) }.get()
        let results = await concurrently(8, loops: loops.loops) { i, loop, done in
            let audit = AuditAppend(ifChanged: AuditEvent.approved(approved, requestId: "req-\(i)").entry, retentionMs: 86_400_000)
            store.compareAndSwap(key, expected: created.encoded, new: approved.encoded, ttlMs: nil, audit: audit, on: loop, done)
        }
        #expect(try results.filter { try $0.get() }.count == 1)
        let events = try trail(redis)
        #expect(events.map(\.kind) == [.approved])
        #expect(events.first?.display == "Pay 5?")

        // Without an audit entry nothing is added (sessions, refresh tokens).
        #expect(try await call(on: loops.loops[0]) { store.compareAndSwap(key, expected: approved.encoded, new: created.encoded, ttlMs: nil, on: $0, $1) }.get())
        #expect(try trail(redis).count == 1)
    }

    /// A denial is appended with the transaction as it stands; a transaction of an older
    /// epoch is not current, so none is recorded with it.
    @Test func aDenialIsRecordedWithTheTransactionShown() async throws {
        let fixture = try RedisFixture()
        defer { fixture.close() }
        let (store, loop) = (fixture.store, fixture.loop)
        let tx = Self.record("tx-d", .created)
        try await call(on: loop) { store.put(TransactionRecord.key(tx.txid), value: tx.encoded, ttlMs: 3_600_000, on: $0, $1) }.get()
        let event = AuditEvent(kind: .declined, txid: tx.txid, subject: "alice", requestId: "r1", journey: "Confirm", reason: "wrong code")
        try await call(on: loop) { store.appendAudit(event.entry, foundKey: TransactionRecord.key(tx.txid), retentionMs: 3_600_000, on: $0, $1) }.get()
        try await call(on: loop) { store.appendAudit(event.entry, foundKey: "tx:none", retentionMs: 3_600_000, on: $0, $1) }.get()
        let events = try trail(fixture.redis)
        #expect(events.count == 2)
        #expect(events[0].bound == ["/amount": .number(5)])
        #expect(events[0].reason == "wrong code")
        #expect(events[1].bound.isEmpty)
    }

    /// Records older than the retention (by Redis's clock) are trimmed by the next add; the
    /// export's window is by the same clock.
    @Test func recordsPastTheRetentionAreTrimmedAndTheWindowFilters() async throws {
        let fixture = try RedisFixture()
        defer { fixture.close() }
        let (store, loop) = (fixture.store, fixture.loop)
        func append(_ id: String, retentionMs: Int) async throws {
            let e = AuditEvent(kind: .declined, txid: id, subject: "alice", requestId: id)
            try await call(on: loop) { store.appendAudit(e.entry, foundKey: nil, retentionMs: retentionMs, on: $0, $1) }.get()
        }
        try await append("old", retentionMs: 3_600_000)
        try await Task.sleep(nanoseconds: 300_000_000)
        let middle = Int64(Date().timeIntervalSince1970 * 1000)
        try await Task.sleep(nanoseconds: 50_000_000)
        try await append("new", retentionMs: 3_600_000)
        #expect(try trail(fixture.redis).map(\.txid) == ["old", "new"])
        var recent: [String] = []
        try RedisStore.auditRecords(url: fixture.redis.storeURL, keyPrefix: "t:", timeoutMs: 1000, sinceMs: middle, untilMs: .max) {
            recent.append(AuditEvent(stored: $0)!.txid)
        }
        #expect(recent == ["new"])

        // A retention of 200 ms: the next add trims both.
        try await Task.sleep(nanoseconds: 300_000_000)
        try await append("last", retentionMs: 200)
        #expect(try trail(fixture.redis).map(\.txid) == ["last"])
    }
}
