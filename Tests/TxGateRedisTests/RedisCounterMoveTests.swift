import EventHTTP
import Foundation
import Testing
import TxGateCore
import TxGateRedis
import TestSupport

/// Writes made all or none with the counter they move (`ConditionalWrite`, `CounterMove`), and a
/// raise blocked by guard keys (`GuardedRaise`), each one script on a real redis-server, for keys
/// no fence guards (a challenge's pending index entry) and fenced ones (a transaction).
@Suite(.serialized) struct RedisCounterMoveTests {
    static let keys = ["txpending:a", TransactionRecord.key("a")]

    @Test(arguments: keys)
    func aWriteMovesItsCounterOnlyWhenItIsMade(_ key: String) async throws {
        let fixture = try RedisFixture()
        defer { fixture.close() }
        let (redis, store, loop) = (fixture.redis, fixture.store, fixture.loop)
        let up = CounterMove.up("txrate:alice", ttlMs: 60_000)
        #expect(try await call(on: loop) {
            store.writeAll([.create(key, value: bytes("created"), ttlMs: 600_000)], moving: up, on: $0, $1)
        }.get() == .written(count: 1))
        #expect(try await call(on: loop) { store.get(key, on: $0, $1) }.get() == bytes("created"))
        #expect(try await call(on: loop) { store.get("txrate:alice", on: $0, $1) }.get() == bytes("1"))
        let ttl = try redis.pttl("t:txrate:alice")
        #expect(ttl > 50_000 && ttl <= 60_000, "the counter's own time to live: \(ttl)")
        #expect(try redis.pttl("t:" + key) > 500_000, "the key's: its own")
        // Not created: nothing moves.
        #expect(try await call(on: loop) {
            store.writeAll([.create(key, value: bytes("again"), ttlMs: 600_000)], moving: up, on: $0, $1)
        }.get() == .refused(key: key, found: bytes("created")))
        #expect(try await call(on: loop) { store.increment("txrate:alice", ttlMs: 1, on: $0, $1) }.get() == 2)

        // A swap: not made, nothing moves; made, the counter moves with it and with its audit record.
        let down = CounterMove.down("txrate:alice")
        let audit = AuditAppend(ifChanged: bytes("approved"), retentionMs: 60_000)
        let streamBefore = try redis.command(["XLEN", "t:audit"])
        #expect(try await call(on: loop) {
            store.compareAndSwap(key, expected: bytes("other"), new: bytes("x"), ttlMs: nil, audit: nil, moving: down, on: $0, $1)
        }.get() == .some(nil))
        #expect(try await call(on: loop) {
            store.compareAndSwap(key, expected: bytes("created"), new: bytes("approved"), ttlMs: nil, audit: audit, moving: down,
                                 on: $0, $1)
        }.get() == 1)
        #expect(try await call(on: loop) { store.get(key, on: $0, $1) }.get() == bytes("approved"))
        #expect(try await call(on: loop) { store.get("txrate:alice", on: $0, $1) }.get() == bytes("1"))
        #expect(try redis.pttl("t:txrate:alice") > 50_000, "lowered, it keeps its expiry")
        let streamAfter = try redis.command(["XLEN", "t:audit"])
        #expect(streamBefore == .integer(0) && streamAfter == .integer(1))
        // Never below 0; an absent counter stays absent; the swaps are made all the same.
        for (expected, new, counter) in [("approved", "a2", "txrate:alice"), ("a2", "a3", "txrate:alice"), ("a3", "a4", "absent")] {
            #expect(try await call(on: loop) {
                store.compareAndSwap(key, expected: bytes(expected), new: bytes(new), ttlMs: nil, audit: nil, moving: .down(counter),
                                     on: $0, $1)
            }.get() == 0)
        }
        #expect(try await call(on: loop) { store.get(key, on: $0, $1) }.get() == bytes("a4"))
        #expect(try await call(on: loop) { store.get("txrate:alice", on: $0, $1) }.get() == bytes("0"))
        #expect(try redis.command(["EXISTS", "t:absent"]) == .integer(0))
        // Up with a swap, and a script Redis no longer has is sent whole.
        _ = try redis.command(["SCRIPT", "FLUSH"])
        #expect(try await call(on: loop) {
            store.compareAndSwap(key, expected: bytes("a4"), new: nil, ttlMs: nil, audit: nil, moving: up, on: $0, $1)
        }.get() == 1)
        #expect(try await call(on: loop) { store.get(key, on: $0, $1) }.get() == nil)
    }

    /// A transaction record (fenced: stamped with the epoch) and its index entry (plain), made
    /// all or none with the count, as a challenge writes them.
    @Test func writesAreMadeAllOrNoneWithTheirCounter() async throws {
        let fixture = try RedisFixture()
        defer { fixture.close() }
        let (redis, store, loop) = (fixture.redis, fixture.store, fixture.loop)
        let up = CounterMove.up("txrate:alice", ttlMs: 60_000)
        func writeAll(_ writes: [ConditionalWrite], _ counter: CounterMove) async throws -> WriteOutcome {
            try await call(on: loop) { store.writeAll(writes, moving: counter, on: $0, $1) }.get()
        }
        func get(_ key: String) async throws -> [UInt8]? { try await call(on: loop) { store.get(key, on: $0, $1) }.get() }
        let (a, b, c) = (TransactionRecord.key("a"), TransactionRecord.key("b"), TransactionRecord.key("c"))
        #expect(try await writeAll([.create(a, value: bytes("r1"), ttlMs: 600_000), .create("txpending:x", value: bytes("a"), ttlMs: 300_000)],
                                   up) == .written(count: 1))
        #expect(try await get(a) == bytes("r1"))
        #expect(try await get("txpending:x") == bytes("a"))
        #expect(try await get("txrate:alice") == bytes("1"))
        #expect(try redis.command(["GET", "t:" + a]) == .bulk(bytes("1:r1")), "the record carries the epoch")
        #expect(try redis.command(["GET", "t:txpending:x"]) == .bulk(bytes("a")), "the index does not")
        #expect(try redis.pttl("t:txpending:x") <= 300_000)
        #expect(try redis.pttl("t:" + a) > 500_000)
        // One condition fails: nothing is written, nothing moves.
        #expect(try await writeAll([.create(b, value: bytes("r2"), ttlMs: 600_000), .create("txpending:x", value: bytes("b"), ttlMs: 600_000)],
                                   up) == .refused(key: "txpending:x", found: bytes("a")))
        #expect(try await writeAll([.create(b, value: bytes("r2"), ttlMs: 600_000),
                                    .swap("txpending:x", expected: bytes("z"), new: bytes("b"), ttlMs: nil)], up)
                == .refused(key: "txpending:x", found: bytes("a")))
        #expect(try await writeAll([.swap("txpending:none", expected: bytes("z"), new: bytes("b"), ttlMs: nil)], up)
                == .refused(key: "txpending:none", found: nil))
        #expect(try await writeAll([.create(b, value: bytes("r2"), ttlMs: 600_000), .create(a, value: bytes("again"), ttlMs: 600_000)], up)
                == .refused(key: a, found: bytes("r1")), "a fenced value found is given without its epoch")
        #expect(try await get(b) == nil)
        #expect(try await get("txpending:x") == bytes("a"))
        #expect(try await get("txrate:alice") == bytes("1"))
        // The swap keeps the entry's expiry.
        #expect(try await writeAll([.create(b, value: bytes("r2"), ttlMs: 600_000),
                                    .swap("txpending:x", expected: bytes("a"), new: bytes("b"), ttlMs: nil)], up) == .written(count: 2))
        #expect(try await get(b) == bytes("r2"))
        #expect(try await get("txpending:x") == bytes("b"))
        #expect(try redis.pttl("t:txpending:x") <= 300_000)
        // A record of an older epoch is absent to a create (and swapped from by nobody).
        _ = try redis.command(["SET", "t:" + c, "0:old"])
        #expect(try await writeAll([.swap(c, expected: bytes("old"), new: bytes("r3"), ttlMs: nil)], up) == .refused(key: c, found: nil))
        #expect(try await writeAll([.create(c, value: bytes("r3"), ttlMs: StoreExpiry.never)], .down("txrate:alice")) == .written(count: 1))
        #expect(try await get(c) == bytes("r3"))
        #expect(try redis.pttl("t:" + c) == -1, "never expiring")
        // Sent whole when Redis has lost the script.
        _ = try redis.command(["SCRIPT", "FLUSH"])
        #expect(try await writeAll([.create("txpending:y", value: [1], ttlMs: 60_000)], .down("txrate:alice")) == .written(count: 0))
    }

    /// A counter that holds something else fails the move before anything is written: the key
    /// not created, the value not swapped, no audit record.
    @Test(arguments: keys)
    func aCounterThatCannotMoveLeavesTheWriteUnmade(_ key: String) async throws {
        let fixture = try RedisFixture()
        defer { fixture.close() }
        let (redis, store, loop) = (fixture.redis, fixture.store, fixture.loop)
        _ = try redis.command(["SET", "t:txrate:alice", "not a counter"])
        let up = CounterMove.up("txrate:alice", ttlMs: 60_000)
        let created = await call(on: loop) {
            store.writeAll([.create(key, value: bytes("created"), ttlMs: 600_000), .create("other", value: [1], ttlMs: 60_000)],
                           moving: up, on: $0, $1)
        }
        #expect(created.error != nil, "\(created)")
        #expect(try await call(on: loop) { store.get(key, on: $0, $1) }.get() == nil)
        #expect(try redis.command(["EXISTS", "t:other"]) == .integer(0))

        #expect(try await call(on: loop) { store.create(key, value: bytes("created"), ttlMs: 600_000, on: $0, $1) }.get() == true)
        let audit = AuditAppend(ifChanged: bytes("approved"), retentionMs: 60_000)
        let swapped = await call(on: loop) {
            store.compareAndSwap(key, expected: bytes("created"), new: bytes("approved"), ttlMs: nil, audit: audit, moving: up,
                                 on: $0, $1)
        }
        #expect(swapped.error != nil, "\(swapped)")
        #expect(try await call(on: loop) { store.get(key, on: $0, $1) }.get() == bytes("created"))
        #expect(try redis.command(["XLEN", "t:audit"]) == .integer(0))
        #expect(try redis.command(["GET", "t:txrate:alice"]) == .bulk(bytes("not a counter")))
    }

    /// What no store step may be asked: a counter in a fenced class (its digits would be read as
    /// an epoch stamp), a counter started without a time to live.
    @Test func countersThatCannotBeAskedForAreRefusedBeforeAnythingIsSent() async throws {
        let fixture = try RedisFixture()
        defer { fixture.close() }
        let (redis, store, loop) = (fixture.redis, fixture.store, fixture.loop)
        func writeAll(_ writes: [ConditionalWrite], _ counter: CounterMove) async -> StoreError? {
            await call(on: loop) { store.writeAll(writes, moving: counter, on: $0, $1) }.error
        }
        let index = ConditionalWrite.create("txpending:a", value: [1], ttlMs: 60_000)
        #expect(await writeAll([index], .up(TransactionRecord.key("n"), ttlMs: 60_000))
                == .failed("counter 'tx' keys: that key class is fenced and holds records, not counters"))
        #expect(await writeAll([index], .up("n", ttlMs: 0)) == .failed("counter 'n': ttlMs must be more than 0, got 0"))
        #expect(await writeAll([index, .swap("txpending:a", expected: [1], new: [2], ttlMs: nil)], .up("n", ttlMs: 1))
                == .failed("writeAll: 'txpending:a' is written twice"))
        #expect(await writeAll([index, .create("b", value: [1], ttlMs: 0)], .up("n", ttlMs: 1))
                == .failed("writeAll 'b': ttlMs must be more than 0, got 0"))
        #expect(await writeAll([index, .create(TOTPStepRecord.key("demo"), value: [1], ttlMs: 60_000)], .up("n", ttlMs: 1))
                == .failed("writeAll 'totp-step' keys: one-time markers are written by create or raise, alone"))
        #expect(try redis.command(["EXISTS", "t:txpending:a"]) == .integer(0))
    }

    /// A raise that a guard key blocks, in the same script, on a plain key and on a fenced marker
    /// (each user's last TOTP step).
    @Test(arguments: ["step", TOTPStepRecord.key("demo")])
    func aGuardKeyBlocksARaise(_ key: String) async throws {
        let fixture = try RedisFixture()
        defer { fixture.close() }
        let (redis, store, loop) = (fixture.redis, fixture.store, fixture.loop)
        let guards = ["lock:source:a", "lock:user:demo"]
        #expect(try await call(on: loop) { store.raise(key, to: 5, unlessPresent: guards, on: $0, $1) }.get() == .raised)
        _ = try redis.command(["SET", "t:lock:user:demo", "1", "PX", "300"])
        #expect(try await call(on: loop) { store.raise(key, to: 6, unlessPresent: guards, on: $0, $1) }.get() == .blocked)
        #expect(try await call(on: loop) { store.get(key, on: $0, $1) }.get() == bytes("5"))
        #expect(try await call(on: loop) { store.raise(key, to: 6, unlessPresent: ["lock:user:eve"], on: $0, $1) }.get() == .raised)
        try await Task.sleep(for: .milliseconds(400))
        #expect(try await call(on: loop) { store.raise(key, to: 6, unlessPresent: guards, on: $0, $1) }.get() == .notHigher)
        #expect(try await call(on: loop) { store.raise(key, to: 7, unlessPresent: guards, on: $0, $1) }.get() == .raised)
        // The plain raise is the same script with no guard.
        #expect(try await call(on: loop) { store.raise(key, to: 8, on: $0, $1) }.get() == true)
        let fenced = await call(on: loop) { store.raise(key, to: 9, unlessPresent: [TransactionRecord.key("x")], on: $0, $1) }
        #expect(fenced.error != nil, "a fenced guard is refused: \(fenced)")
    }
}
