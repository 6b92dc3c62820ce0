import Testing
@testable import TxGate

@Suite struct StartedRecordsTests {
    @Test func aRecordIsTakenOnce() {
        let r = StartedRecords<[UInt8]>(capacity: 4)
        r.remember("tx:a", [1, 2])
        #expect(r.take("tx:b") == nil)
        #expect(r.take("tx:a") == [1, 2])
        #expect(r.take("tx:a") == nil)
        #expect(r.count == 0)
    }

    @Test func aJourneyStartedAgainRemembersTheLaterRead() {
        let r = StartedRecords<[UInt8]>(capacity: 4)
        r.remember("tx:a", [1])
        r.remember("tx:a", [2])
        #expect(r.count == 1)
        #expect(r.take("tx:a") == [2])
    }

    @Test func pastItsCapacityTheOldestIsForgotten() {
        let r = StartedRecords<[UInt8]>(capacity: 3)
        for i in 0..<5 { r.remember("tx:\(i)", [UInt8(i)]) }
        #expect(r.count == 3)
        #expect(r.take("tx:0") == nil && r.take("tx:1") == nil)
        #expect(r.take("tx:2") == [2] && r.take("tx:3") == [3] && r.take("tx:4") == [4])
        // Taken records leave room: nothing is forgotten until the ring comes round again.
        for i in 5..<8 { r.remember("tx:\(i)", [UInt8(i)]) }
        #expect(r.count == 3)
        #expect(r.take("tx:5") == [5] && r.take("tx:7") == [7])
    }

    @Test func aKeyRememberedAgainAfterItWasTakenIsKeptUntilTheRingComesRound() {
        let r = StartedRecords<[UInt8]>(capacity: 2)
        r.remember("tx:a", [1])
        _ = r.take("tx:a")
        r.remember("tx:a", [2])   // the ring: [a, a]
        #expect(r.take("tx:a") == [2])
        r.remember("tx:b", [3])   // overwrites the first slot (a, taken): b is kept
        r.remember("tx:c", [4])   // overwrites the second: nothing of b or c is lost
        #expect(r.count == 2)
        #expect(r.take("tx:b") == [3] && r.take("tx:c") == [4])
    }
}
