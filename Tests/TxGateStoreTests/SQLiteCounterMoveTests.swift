import Foundation
import Testing
import TxGateCore
import TestSupport
@testable import TxGateStore

/// Writes made all or none with the counter they move (`ConditionalWrite`, `CounterMove`): a
/// challenge's record, its index entry and its user's count of waiting transactions; the
/// approval and the count lowered.
@Suite struct SQLiteCounterMoveTests {
    @Test func writesAreMadeAllOrNoneWithTheirCounter() async throws {
        let clock = ManualClock()
        try await withStore(clock: clock) { store, _ async throws in
            let up = CounterMove.up("count", ttlMs: 400)
            func writeAll(_ writes: [ConditionalWrite], _ counter: CounterMove = up) async -> StoreResult<WriteOutcome> {
                await call { store.writeAll(writes, moving: counter, on: $0, $1) }
            }
            func get(_ key: String) async throws -> [UInt8]? { try await call { store.get(key, on: $0, $1) }.get() }
            #expect(try await writeAll([.create("tx:a", value: [1], ttlMs: 60_000), .create("index", value: [1], ttlMs: 300)]).get() == .written(count: 1))
            #expect(try await get("tx:a") == [1])
            #expect(try await get("index") == [1])
            #expect(try await get("count") == bytes("1"))
            // One condition fails: nothing is written, nothing moves; the first that failed says what it found.
            #expect(try await writeAll([.create("tx:b", value: [2], ttlMs: 60_000), .create("index", value: [2], ttlMs: 60_000)]).get()
                    == .refused(key: "index", found: [1]))
            #expect(try await writeAll([.create("tx:b", value: [2], ttlMs: 60_000),
                                        .swap("index", expected: [9], new: [2], ttlMs: nil)]).get() == .refused(key: "index", found: [1]))
            #expect(try await writeAll([.swap("nothing", expected: [9], new: [2], ttlMs: nil),
                                        .create("index", value: [2], ttlMs: 60_000)]).get() == .refused(key: "nothing", found: nil))
            #expect(try await get("tx:b") == nil)
            #expect(try await get("index") == [1])
            #expect(try await get("count") == bytes("1"))
            // A swap that keeps the expiry, and a counter that keeps its first move's.
            clock.advance(ms: 200)
            let later = CounterMove.up("count", ttlMs: 60_000)
            #expect(try await writeAll([.create("tx:b", value: [2], ttlMs: 60_000), .swap("index", expected: [1], new: [2], ttlMs: nil)],
                                       later).get() == .written(count: 2))
            #expect(try await get("tx:b") == [2])
            #expect(try await get("index") == [2])
            clock.advance(ms: 100)
            #expect(try await get("index") == nil, "the swap kept the entry's expiry")
            #expect(try await get("count") == bytes("2"))
            clock.advance(ms: 100)
            #expect(try await get("count") == nil, "the counter kept its first move's expiry")
            // An expired key is absent to a create; a swap may set a new expiry; never expiring.
            #expect(try await writeAll([.create("index", value: [3], ttlMs: 60_000), .swap("tx:b", expected: [2], new: [3], ttlMs: 100),
.create("forever", value: [4], ttlMs: StoreExpiry.never)], later).get() == .written(count: 1))
            clock.advance(ms: 100)
            #expect(try await get("tx:b") == nil)
            #expect(try await get("index") == [3])
            #expect(try await get("forever") == [4])
            // Down with writes: the value after the move.
            #expect(try await writeAll([.create("d", value: [4], ttlMs: 60_000)], .down("count")).get() == .written(count: 0))
            #expect(try await get("count") == bytes("0"))
            // Asked wrongly: refused before anything is done.
            #expect(await writeAll([.create("e", value: [1], ttlMs: 60_000), .swap("e", expected: [1], new: [2], ttlMs: nil)]).error
                    == .failed("writeAll: 'e' is written twice"))
            #expect(await writeAll([.create("e", value: [1], ttlMs: 0)]).error == .failed("writeAll 'e': ttlMs must be more than 0, got 0"))
            #expect(try await get("e") == nil)
        }
    }

    @Test func aSwapMovesItsCounterOnlyWhenItSwaps() async throws {
        let clock = ManualClock()
        try await withStore(clock: clock) { store, _ async throws in
            try await call { store.put("tx", value: bytes("created"), ttlMs: 60_000, on: $0, $1) }.get()
            #expect(try await call { store.increment("count", ttlMs: 400, on: $0, $1) }.get() == 1)
            #expect(try await call { store.increment("count", ttlMs: 400, on: $0, $1) }.get() == 2)
            let down = CounterMove.down("count")
            #expect(try await call {
                store.compareAndSwap("tx", expected: bytes("other"), new: bytes("x"), ttlMs: nil, audit: nil, moving: down, on: $0, $1)
            }.get() == .some(nil))
            #expect(try await call { store.get("count", on: $0, $1) }.get() == bytes("2"))
            #expect(try await call {
                store.compareAndSwap("tx", expected: bytes("created"), new: bytes("approved"), ttlMs: nil, audit: nil, moving: down,
                                     on: $0, $1)
            }.get() == 1)
            #expect(try await call { store.get("tx", on: $0, $1) }.get() == bytes("approved"))
            #expect(try await call { store.get("count", on: $0, $1) }.get() == bytes("1"))
            // Never below 0, and an absent counter stays absent: the swap is made all the same.
            for (expected, new) in [("approved", "a2"), ("a2", "a3")] {
                #expect(try await call {
                    store.compareAndSwap("tx", expected: bytes(expected), new: bytes(new), ttlMs: nil, audit: nil, moving: down,
                                         on: $0, $1)
                }.get() == 0)
            }
            #expect(try await call { store.get("tx", on: $0, $1) }.get() == bytes("a3"))
            #expect(try await call {
                store.compareAndSwap("tx", expected: bytes("a3"), new: nil, ttlMs: nil, audit: nil, moving: .down("absent"), on: $0, $1)
            }.get() == 0)
            #expect(try await call { store.get("tx", on: $0, $1) }.get() == nil)
            #expect(try await call { store.get("absent", on: $0, $1) }.get() == nil)
            // The counter lowered kept its expiry.
            clock.advance(ms: 400)
            #expect(try await call { store.get("count", on: $0, $1) }.get() == nil)
        }
    }

    /// A counter that holds something else fails the move, and the writes it came with are
    /// undone: the keys not created, the value not swapped, no audit record of a swap.
    @Test func aCounterThatCannotMoveUndoesItsWrite() async throws {
        let clock = ManualClock()
        try await withStore(clock: clock) { store, folder async throws in
            try await call { store.put("count", value: bytes("not a counter"), ttlMs: 60_000, on: $0, $1) }.get()
            let up = CounterMove.up("count", ttlMs: 60_000)
            let created = await call {
                store.writeAll([.create("a", value: [1], ttlMs: 60_000), .create("b", value: [1], ttlMs: 60_000)], moving: up, on: $0, $1)
            }
            #expect(created.error == .failed("increment: the value is not a counter"))
            #expect(try await call { store.get("a", on: $0, $1) }.get() == nil)
            #expect(try await call { store.get("b", on: $0, $1) }.get() == nil)

            try await call { store.put("tx", value: bytes("created"), ttlMs: 60_000, on: $0, $1) }.get()
            let audit = AuditAppend(ifChanged: bytes("swapped"), retentionMs: 60_000)
            let swapped = await call {
                store.compareAndSwap("tx", expected: bytes("created"), new: bytes("approved"), ttlMs: nil, audit: audit, moving: up,
                                     on: $0, $1)
            }
            #expect(swapped.error == .failed("increment: the value is not a counter"))
            #expect(try await call { store.get("tx", on: $0, $1) }.get() == bytes("created"))
            var records = 0
            try SQLiteStore.auditRecords(path: folder.path("store.db"), sinceMs: 0, untilMs: .max) { _ in records += 1 }
            #expect(records == 0)
            #expect(try await call { store.get("count", on: $0, $1) }.get() == bytes("not a counter"))

            let never = await call { store.writeAll([.create("b", value: [1], ttlMs: 60_000)], moving: .up("n", ttlMs: 0), on: $0, $1) }
            #expect(never.error == .failed("counter 'n': ttlMs must be more than 0, got 0"))
            #expect(try await call { store.get("b", on: $0, $1) }.get() == nil)
        }
    }

    /// A raise that a guard key blocks, in the same transaction: a user's TOTP step is not
    /// recorded while a lockout of theirs is set.
    @Test func aGuardKeyBlocksARaise() async throws {
        let clock = ManualClock()
        try await withStore(clock: clock) { store, _ async throws in
            let guards = ["lock:source:a", "lock:user:demo"]
            #expect(try await call { store.raise("step", to: 5, unlessPresent: guards, on: $0, $1) }.get() == .raised)
            try await call { store.put("lock:user:demo", value: [1], ttlMs: 300, on: $0, $1) }.get()
            #expect(try await call { store.raise("step", to: 6, unlessPresent: guards, on: $0, $1) }.get() == .blocked)
            #expect(try await call { store.get("step", on: $0, $1) }.get() == bytes("5"))
            // Another user's lockout blocks nothing; the lockout expired blocks nothing either.
            #expect(try await call { store.raise("step", to: 6, unlessPresent: ["lock:user:eve"], on: $0, $1) }.get() == .raised)
            clock.advance(ms: 300)
            #expect(try await call { store.raise("step", to: 6, unlessPresent: guards, on: $0, $1) }.get() == .notHigher)
            #expect(try await call { store.raise("step", to: 7, unlessPresent: guards, on: $0, $1) }.get() == .raised)
            #expect(try await call { store.raise("other", to: 1, unlessPresent: [], on: $0, $1) }.get() == .raised)
        }
    }
}
