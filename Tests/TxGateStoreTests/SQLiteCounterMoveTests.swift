import Foundation
import Testing
import TxGateCore
import TestSupport
@testable import TxGateStore

/// A counter moved by the same step as a write (`CounterMove`): a user's count of waiting
/// transactions goes up with the index entry a challenge claims and down with the approval.
@Suite struct SQLiteCounterMoveTests {
    @Test func aCreateMovesItsCounterOnlyWhenItCreates() async throws {
        let clock = ManualClock()
        try await withStore(clock: clock) { store, _ async throws in
            let up = CounterMove.up("count", ttlMs: 400)
            #expect(try await call { store.create("a", value: [1], ttlMs: 60_000, moving: up, on: $0, $1) }.get() == 1)
            #expect(try await call { store.get("a", on: $0, $1) }.get() == [1])
            #expect(try await call { store.get("count", on: $0, $1) }.get() == bytes("1"))
            // Not created: nothing moves.
            #expect(try await call { store.create("a", value: [2], ttlMs: 60_000, moving: up, on: $0, $1) }.get() == .some(nil))
            #expect(try await call { store.get("a", on: $0, $1) }.get() == [1])
            clock.advance(ms: 200)
            let later = CounterMove.up("count", ttlMs: 60_000)
            #expect(try await call { store.create("b", value: [2], ttlMs: 60_000, moving: later, on: $0, $1) }.get() == 2)
            // The counter keeps the expiry of its first move, as `increment`'s does; the keys keep theirs.
            clock.advance(ms: 200)
            #expect(try await call { store.get("count", on: $0, $1) }.get() == nil)
            #expect(try await call { store.get("b", on: $0, $1) }.get() == [2])
            #expect(try await call { store.create("c", value: [3], ttlMs: 60_000, moving: later, on: $0, $1) }.get() == 1)
            // Down with a create: the value after the move.
            #expect(try await call { store.create("d", value: [4], ttlMs: 60_000, moving: .down("count"), on: $0, $1) }.get() == 0)
            #expect(try await call { store.get("count", on: $0, $1) }.get() == bytes("0"))
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

    /// A counter that holds something else fails the move, and the write it came with is
    /// undone: the key not created, the value not swapped, no audit record of a swap.
    @Test func aCounterThatCannotMoveUndoesItsWrite() async throws {
        let clock = ManualClock()
        try await withStore(clock: clock) { store, folder async throws in
            try await call { store.put("count", value: bytes("not a counter"), ttlMs: 60_000, on: $0, $1) }.get()
            let up = CounterMove.up("count", ttlMs: 60_000)
            let created = await call { store.create("a", value: [1], ttlMs: 60_000, moving: up, on: $0, $1) }
            #expect(created.error == .failed("increment: the value is not a counter"))
            #expect(try await call { store.get("a", on: $0, $1) }.get() == nil)

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

            let never = await call { store.create("b", value: [1], ttlMs: 60_000, moving: .up("n", ttlMs: 0), on: $0, $1) }
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
