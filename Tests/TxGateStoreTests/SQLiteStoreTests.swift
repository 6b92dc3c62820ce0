import Foundation
import Testing
import TxGateCore
import TestSupport
@testable import TxGateStore

/// A store on a real SQLite file in a fresh temp folder, closed and removed afterwards.
/// Its time is `clock`, which moves only when the test advances it.
func withStore(clock: ManualClock = ManualClock(), _ body: (SQLiteStore, TemporaryDirectory) async throws -> Void) async throws {
    let folder = try TemporaryDirectory()
    defer { folder.remove() }
    let store = try SQLiteStore(path: folder.path("store.db"), clock: clock.read)
    defer { store.close() }
    try await body(store, folder)
}

@Suite struct SQLiteStoreTests {
    @Test func putThenGetReturnsTheSameBytes() async throws {
        try await withStore { store, _ async throws in
            let value: [UInt8] = [0, 1, 2, 255, 0, 42]
            try await call { store.put("session:1", value: value, ttlMs: 60_000, on: $0, $1) }.get()
            #expect(try await call { store.get("session:1", on: $0, $1) }.get() == value)
            #expect(try await call { store.get("session:2", on: $0, $1) }.get() == nil)

            // put replaces, and an empty value is a value, not an absence.
            try await call { store.put("session:1", value: [], ttlMs: 60_000, on: $0, $1) }.get()
            #expect(try await call { store.get("session:1", on: $0, $1) }.get() == [])
        }
    }

    @Test func takeIfRemovesOnlyAMatchingRecord() async throws {
        try await withStore { store, _ async throws in
            let record = bytes(#"{"state":"COMPLETED","seal":"abc","other":1}"#)
            try await call { store.put("tx:1", value: record, ttlMs: 60_000, on: $0, $1) }.get()
            #expect(try await call { store.takeIf("tx:1", fields: ["state": "COMPLETED", "seal": "abd"], on: $0, $1) }.get() == .kept(record))
            #expect(try await call { store.takeIf("tx:1", fields: ["state": "CREATED"], on: $0, $1) }.get() == .kept(record))
            #expect(try await call { store.get("tx:1", on: $0, $1) }.get() == record)
            #expect(try await call { store.takeIf("tx:1", fields: ["state": "COMPLETED", "seal": "abc"], on: $0, $1) }.get() == .taken(record))
            #expect(try await call { store.takeIf("tx:1", fields: ["state": "COMPLETED", "seal": "abc"], on: $0, $1) }.get() == .absent)
            #expect(try await call { store.get("tx:1", on: $0, $1) }.get() == nil)
        }
    }

    @Test func keysAreExactStrings() async throws {
        try await withStore { store, _ async throws in
            try await call { store.put("", value: bytes("empty"), ttlMs: 60_000, on: $0, $1) }.get()
            try await call { store.put("clé→ü", value: bytes("unicode"), ttlMs: 60_000, on: $0, $1) }.get()
            try await call { store.put("Key", value: bytes("upper"), ttlMs: 60_000, on: $0, $1) }.get()
            #expect(try await call { store.get("", on: $0, $1) }.get() == bytes("empty"))
            #expect(try await call { store.get("clé→ü", on: $0, $1) }.get() == bytes("unicode"))
            #expect(try await call { store.get("key", on: $0, $1) }.get() == nil)
        }
    }

    @Test func completionsRunOnTheCallersExecutor() async throws {
        try await withStore { store, _ async throws in
            let executor = TestExecutor(7)
            let onExecutor: Bool = await withCheckedContinuation { continuation in
                store.put("k", value: [1], ttlMs: 60_000, on: executor) { _ in
                    continuation.resume(returning: executor.isCurrent)
                }
            }
            #expect(onExecutor)
            let getOnExecutor: Bool = await withCheckedContinuation { continuation in
                store.get("k", on: executor) { _ in continuation.resume(returning: executor.isCurrent) }
            }
            #expect(getOnExecutor)
        }
    }

    /// Issue 22, item 4: a user's last accepted TOTP step is kept by `raise`, which never
    /// expires: neither a purge while the clock runs a century ahead nor the clock stepped back
    /// afterwards lets a step at or below it through again.
    @Test func aRaisedNumberOutlivesAPurgeAndAClockStepBack() async throws {
        let clock = ManualClock()
        try await withStore(clock: clock) { store, _ async throws in
            try await call { store.put("marker", value: [1], ttlMs: 120_000, on: $0, $1) }.get()
            #expect(try await call { store.raise("totp-step:demo", to: 56_666_666, on: $0, $1) }.get() == true)
            #expect(try await call { store.raise("totp-step:demo", to: 56_666_666, on: $0, $1) }.get() == false, "the same step")
            #expect(try await call { store.raise("totp-step:demo", to: 56_666_665, on: $0, $1) }.get() == false, "an earlier step")

            let century: Int64 = 100 * 365 * 86_400_000
            clock.advance(ms: century)
            #expect(try store.purgeExpired() == 1, "the expiring marker went, the raised number stayed")
            clock.stepBack(ms: century)
            #expect(try await call { store.get("totp-step:demo", on: $0, $1) }.get() == bytes("56666666"))
            #expect(try await call { store.raise("totp-step:demo", to: 56_666_666, on: $0, $1) }.get() == false)
            #expect(try await call { store.raise("totp-step:demo", to: 56_666_667, on: $0, $1) }.get() == true)
            #expect(try await call { store.get("totp-step:demo", on: $0, $1) }.get() == bytes("56666667"))

            try await call { store.put("not-a-number", value: bytes("x"), ttlMs: 60_000, on: $0, $1) }.get()
            let refused = await call { store.raise("not-a-number", to: 1, on: $0, $1) }
            guard case .failure(.failed(let why)) = refused else {
                Issue.record("a value that is not a number must not be overwritten"); return
            }
            #expect(why.contains("not-a-number") && why.contains("not a number"))
        }
    }

    @Test func createSetsOnlyWhenAbsent() async throws {
        try await withStore { store, _ async throws in
            #expect(try await call { store.create("txn:1", value: bytes("first"), ttlMs: 60_000, on: $0, $1) }.get() == true)
            #expect(try await call { store.create("txn:1", value: bytes("second"), ttlMs: 60_000, on: $0, $1) }.get() == false)
            #expect(try await call { store.get("txn:1", on: $0, $1) }.get() == bytes("first"))
        }
    }

    @Test func createOverwritesAnExpiredKey() async throws {
        let clock = ManualClock()
        try await withStore(clock: clock) { store, _ async throws in
            #expect(try await call { store.create("txn:1", value: bytes("old"), ttlMs: 50, on: $0, $1) }.get() == true)
            // Until its last millisecond the old value stands.
            clock.advance(ms: 49)
            #expect(try await call { store.create("txn:1", value: bytes("new"), ttlMs: 60_000, on: $0, $1) }.get() == false)
            #expect(try await call { store.get("txn:1", on: $0, $1) }.get() == bytes("old"))
            clock.advance(ms: 1)
            #expect(try await call { store.create("txn:1", value: bytes("new"), ttlMs: 60_000, on: $0, $1) }.get() == true)
            #expect(try await call { store.get("txn:1", on: $0, $1) }.get() == bytes("new"))
        }
    }

    @Test func anExpiredKeyIsAbsentToEveryOperation() async throws {
        let clock = ManualClock()
        try await withStore(clock: clock) { store, _ async throws in
            let keys = ["get", "touch", "delete", "take", "cas", "incr"]
            for key in keys {
                try await call { store.put(key, value: bytes("7"), ttlMs: 400, on: $0, $1) }.get()
            }
            // Still there before the TTL runs out.
            clock.advance(ms: 399)
            for key in keys {
                #expect(try await call { store.get(key, on: $0, $1) }.get() == bytes("7"), "\(key)")
            }
            clock.advance(ms: 1)
            #expect(try await call { store.get("get", on: $0, $1) }.get() == nil)
            #expect(try await call { store.touch("touch", ttlMs: 60_000, on: $0, $1) }.get() == false)
            #expect(try await call { store.get("touch", on: $0, $1) }.get() == nil)
            #expect(try await call { store.delete("delete", on: $0, $1) }.get() == false)
            #expect(try await call { store.take("take", on: $0, $1) }.get() == nil)
            #expect(try await call {
                store.compareAndSwap("cas", expected: bytes("7"), new: bytes("8"), ttlMs: 60_000, on: $0, $1)
            }.get() == false)
            #expect(try await call { store.get("cas", on: $0, $1) }.get() == nil)
            // An expired counter starts again from 0.
            #expect(try await call { store.increment("incr", ttlMs: 60_000, on: $0, $1) }.get() == 1)
        }
    }

    @Test func touchSetsANewTimeToLive() async throws {
        let clock = ManualClock()
        try await withStore(clock: clock) { store, _ async throws in
            try await call { store.put("long", value: [1], ttlMs: 300, on: $0, $1) }.get()
            try await call { store.put("short", value: [2], ttlMs: 60_000, on: $0, $1) }.get()
            #expect(try await call { store.touch("long", ttlMs: 60_000, on: $0, $1) }.get() == true)
            #expect(try await call { store.touch("short", ttlMs: 50, on: $0, $1) }.get() == true)
            #expect(try await call { store.touch("missing", ttlMs: 60_000, on: $0, $1) }.get() == false)
            // The shortened key lives until its new TTL runs out, and no longer.
            clock.advance(ms: 49)
            #expect(try await call { store.get("short", on: $0, $1) }.get() == [2])
            clock.advance(ms: 1)
            #expect(try await call { store.get("short", on: $0, $1) }.get() == nil)
            // The lengthened key outlives its first TTL.
            clock.advance(ms: 350)
            #expect(try await call { store.get("long", on: $0, $1) }.get() == [1])
            #expect(try await call { store.get("short", on: $0, $1) }.get() == nil)
            #expect(try await call { store.get("missing", on: $0, $1) }.get() == nil)
        }
    }

    @Test func deleteSaysWhetherTheKeyExisted() async throws {
        try await withStore { store, _ async throws in
            try await call { store.put("k", value: [1], ttlMs: 60_000, on: $0, $1) }.get()
            #expect(try await call { store.delete("k", on: $0, $1) }.get() == true)
            #expect(try await call { store.get("k", on: $0, $1) }.get() == nil)
            #expect(try await call { store.delete("k", on: $0, $1) }.get() == false)
        }
    }

    @Test func takeReturnsTheValueOnce() async throws {
        try await withStore { store, _ async throws in
            try await call { store.put("code:123456", value: bytes("txn:9"), ttlMs: 60_000, on: $0, $1) }.get()
            #expect(try await call { store.take("code:123456", on: $0, $1) }.get() == bytes("txn:9"))
            #expect(try await call { store.take("code:123456", on: $0, $1) }.get() == nil)
            #expect(try await call { store.get("code:123456", on: $0, $1) }.get() == nil)
        }
    }

    @Test func incrementCountsFromOneAndStoresDecimalText() async throws {
        try await withStore { store, _ async throws in
            #expect(try await call { store.increment("rate:1.2.3.4", ttlMs: 60_000, on: $0, $1) }.get() == 1)
            #expect(try await call { store.increment("rate:1.2.3.4", ttlMs: 60_000, on: $0, $1) }.get() == 2)
            #expect(try await call { store.increment("rate:1.2.3.4", ttlMs: 60_000, on: $0, $1) }.get() == 3)
            // The same bytes Redis's INCR would leave.
            #expect(try await call { store.get("rate:1.2.3.4", on: $0, $1) }.get() == bytes("3"))
            #expect(try await call { store.increment("rate:5.6.7.8", ttlMs: 60_000, on: $0, $1) }.get() == 1)
        }
    }

    @Test func incrementDoesNotExtendTheTimeToLive() async throws {
        let clock = ManualClock()
        try await withStore(clock: clock) { store, _ async throws in
            #expect(try await call { store.increment("window", ttlMs: 500, on: $0, $1) }.get() == 1)
            clock.advance(ms: 200)
            #expect(try await call { store.increment("window", ttlMs: 60_000, on: $0, $1) }.get() == 2)
            // The count lives until the first increment's TTL runs out...
            clock.advance(ms: 299)
            #expect(try await call { store.get("window", on: $0, $1) }.get() == bytes("2"))
            clock.advance(ms: 1)
            // The window opened by the first increment has closed: a new one starts.
            #expect(try await call { store.increment("window", ttlMs: 60_000, on: $0, $1) }.get() == 1)
        }
    }

    @Test func incrementOnANonCounterFails() async throws {
        try await withStore { store, _ async throws in
            try await call { store.put("session", value: bytes("{\"sub\":\"alice\"}"), ttlMs: 60_000, on: $0, $1) }.get()
            let result = await call { store.increment("session", ttlMs: 60_000, on: $0, $1) }
            #expect(result == .failure(.failed("increment: the value is not a counter")))
            #expect(try await call { store.get("session", on: $0, $1) }.get() == bytes("{\"sub\":\"alice\"}"))
        }
    }

    @Test func compareAndSwapReplacesOnlyTheExpectedValue() async throws {
        try await withStore { store, _ async throws in
            try await call { store.put("journey", value: bytes("step1"), ttlMs: 60_000, on: $0, $1) }.get()
            #expect(try await call {
                store.compareAndSwap("journey", expected: bytes("step1"), new: bytes("step2"), ttlMs: nil, on: $0, $1)
            }.get() == true)
            #expect(try await call { store.get("journey", on: $0, $1) }.get() == bytes("step2"))

            // A stale writer loses and changes nothing.
            #expect(try await call {
                store.compareAndSwap("journey", expected: bytes("step1"), new: bytes("stale"), ttlMs: nil, on: $0, $1)
            }.get() == false)
            #expect(try await call { store.get("journey", on: $0, $1) }.get() == bytes("step2"))

            #expect(try await call {
                store.compareAndSwap("missing", expected: bytes("x"), new: bytes("y"), ttlMs: 60_000, on: $0, $1)
            }.get() == false)
            #expect(try await call { store.get("missing", on: $0, $1) }.get() == nil)
        }
    }

    @Test func compareAndSwapWithNilDeletes() async throws {
        try await withStore { store, _ async throws in
            try await call { store.put("txn", value: bytes("pending"), ttlMs: 60_000, on: $0, $1) }.get()
            #expect(try await call {
                store.compareAndSwap("txn", expected: bytes("done"), new: nil, ttlMs: nil, on: $0, $1)
            }.get() == false)
            #expect(try await call { store.get("txn", on: $0, $1) }.get() == bytes("pending"))
            #expect(try await call {
                store.compareAndSwap("txn", expected: bytes("pending"), new: nil, ttlMs: nil, on: $0, $1)
            }.get() == true)
            #expect(try await call { store.get("txn", on: $0, $1) }.get() == nil)
        }
    }

    @Test func compareAndSwapKeepsOrSetsTheExpiry() async throws {
        let clock = ManualClock()
        try await withStore(clock: clock) { store, _ async throws in
            try await call { store.put("keeps", value: [1], ttlMs: 400, on: $0, $1) }.get()
            try await call { store.put("sets", value: [1], ttlMs: 400, on: $0, $1) }.get()
            #expect(try await call { store.compareAndSwap("keeps", expected: [1], new: [2], ttlMs: nil, on: $0, $1) }.get() == true)
            #expect(try await call { store.compareAndSwap("sets", expected: [1], new: [2], ttlMs: 60_000, on: $0, $1) }.get() == true)
            clock.advance(ms: 399)
            #expect(try await call { store.get("keeps", on: $0, $1) }.get() == [2])
            #expect(try await call { store.get("sets", on: $0, $1) }.get() == [2])
            clock.advance(ms: 1)
            #expect(try await call { store.get("keeps", on: $0, $1) }.get() == nil)
            #expect(try await call { store.get("sets", on: $0, $1) }.get() == [2])
        }
    }

    /// A counter moved or a number raised keeps the expiry it had: the window does not slide
    /// (these rows are rewritten without their expiry, which stays the row's own).
    @Test func countersAndRaisedNumbersKeepTheirExpiry() async throws {
        let clock = ManualClock()
        try await withStore(clock: clock) { store, _ async throws in
            #expect(try await call { store.increment("count", ttlMs: 400, on: $0, $1) }.get() == 1)
            try await call { store.put("raised", value: bytes("5"), ttlMs: 400, on: $0, $1) }.get()
            clock.advance(ms: 200)
            #expect(try await call { store.increment("count", ttlMs: 60_000, on: $0, $1) }.get() == 2)
            #expect(try await call { store.increment("count", ttlMs: 60_000, on: $0, $1) }.get() == 3)
            #expect(try await call { store.decrement("count", on: $0, $1) }.get() == true)
            #expect(try await call { store.raise("raised", to: 6, on: $0, $1) }.get() == true)
            clock.advance(ms: 199)
            #expect(try await call { store.get("count", on: $0, $1) }.get() == bytes("2"))
            #expect(try await call { store.get("raised", on: $0, $1) }.get() == bytes("6"))
            clock.advance(ms: 1)
            #expect(try await call { store.get("count", on: $0, $1) }.get() == nil)
            #expect(try await call { store.get("raised", on: $0, $1) }.get() == nil)
            // A new window once the old one is gone.
            #expect(try await call { store.increment("count", ttlMs: 400, on: $0, $1) }.get() == 1)
        }
    }

    @Test func aTimeToLiveMustBePositive() async throws {
        try await withStore { store, _ async throws in
            #expect(await call { store.put("k", value: [1], ttlMs: 0, on: $0, $1) } == .failure(.failed("put: ttlMs must be more than 0, got 0")))
            #expect(await call { store.create("k", value: [1], ttlMs: -5, on: $0, $1) } == .failure(.failed("create: ttlMs must be more than 0, got -5")))
            #expect(try await call { store.get("k", on: $0, $1) }.get() == nil)
        }
    }

    @Test func purgeDeletesOnlyExpiredRows() async throws {
        let clock = ManualClock()
        try await withStore(clock: clock) { store, _ async throws in
            try await call { store.put("a", value: [1], ttlMs: 400, on: $0, $1) }.get()
            try await call { store.put("b", value: [2], ttlMs: 400, on: $0, $1) }.get()
            try await call { store.put("c", value: [3], ttlMs: 60_000, on: $0, $1) }.get()
            #expect(try store.purgeExpired() == 0)
            clock.advance(ms: 399)
            #expect(try store.purgeExpired() == 0)
            #expect(try await call { store.get("a", on: $0, $1) }.get() == [1])
            clock.advance(ms: 1)
            #expect(try store.purgeExpired() == 2)
            #expect(try store.purgeExpired() == 0)
            #expect(try await call { store.get("c", on: $0, $1) }.get() == [3])
        }
    }

    /// The one test on the real wall clock (the default), end to end. It only waits for a value
    /// to be gone, well after its TTL, which a slow machine cannot make fail; checking that a
    /// short-lived value is still there would be a race with the clock, so the long-lived one
    /// stands for "present".
    @Test func theWallClockExpiresValues() async throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let store = try SQLiteStore(path: folder.path("store.db"))
        defer { store.close() }
        // The default clock is epoch milliseconds.
        #expect(abs(SQLiteStore.wallClockMs() - Int64(Date().timeIntervalSince1970 * 1000)) < 60_000)
        try await call { store.put("short", value: [1], ttlMs: 50, on: $0, $1) }.get()
        try await call { store.put("long", value: [2], ttlMs: 3_600_000, on: $0, $1) }.get()
        try await sleep(ms: 300)
        #expect(try await call { store.get("short", on: $0, $1) }.get() == nil)
        #expect(try await call { store.get("long", on: $0, $1) }.get() == [2])
    }

    @Test func pingAnswersUntilClosed() async throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let path = folder.path("store.db")
        let store = try SQLiteStore(path: path)
        #expect(await call { store.ping(on: $0, $1) } == .success(()))
        store.close()
        #expect(await call { store.ping(on: $0, $1) } == .failure(.unavailable("sqlite '\(path)': ping: the store is closed")))
        #expect(await call { store.get("k", on: $0, $1) } == .failure(.unavailable("sqlite '\(path)': get: the store is closed")))
        store.close() // closing twice is harmless
    }
}

extension Result where Success == Void, Failure == StoreError {
    static func == (lhs: Self, rhs: Self) -> Bool {
        switch (lhs, rhs) {
        case (.success, .success): return true
        case (.failure(let a), .failure(let b)): return a == b
        default: return false
        }
    }
}
