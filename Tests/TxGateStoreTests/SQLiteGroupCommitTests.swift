import Dispatch
import Foundation
import Testing
import TxGateCore
import TestSupport
@testable import TxGateStore

/// A store call started now, answered later: operations started while the store's thread is
/// held (`SQLiteStore.hold`) run as one batch when it is let go.
private final class Started<T: Sendable>: @unchecked Sendable {
    // @unchecked: `result` is written once, before `group` is left, and read after.
    private let group = DispatchGroup()
    private var result: StoreResult<T>?

    init(_ operation: (CallbackExecutor, @escaping (StoreResult<T>) -> Void) -> Void) {
        group.enter()
        operation(TestExecutor()) { [self] r in
            result = r
            group.leave()
        }
    }

    var answer: StoreResult<T> {
        get async {
            await withCheckedContinuation { continuation in
                group.notify(queue: .global()) { continuation.resume(returning: self.result!) }
            }
        }
    }
}

@Suite struct SQLiteGroupCommitTests {
    @Test func operationsQueuedTogetherShareOneCommit() async throws {
        try await withStore { store, _ async throws in
            try await call { store.put("before", value: [1], ttlMs: 60_000, on: $0, $1) }.get()
            let commits = store.checkpointer.commits.load(ordering: .relaxed)
            let resume = store.hold()
            let started = (0..<10).map { i in Started { store.create("k\(i)", value: [UInt8(i)], ttlMs: 60_000, on: $0, $1) } }
            let counted = Started { store.increment("count", ttlMs: 60_000, on: $0, $1) }
            resume()
            for s in started { #expect(try await s.answer.get() == true) }
            #expect(try await counted.answer.get() == 1)
            // Before group commit: 11, one per operation.
            #expect(store.checkpointer.commits.load(ordering: .relaxed) - commits == 1)
            for i in 0..<10 { #expect(try await call { store.get("k\(i)", on: $0, $1) }.get() == [UInt8(i)]) }

            // One operation alone still commits by itself, and is answered.
            #expect(try await call { store.create("alone", value: [2], ttlMs: 60_000, on: $0, $1) }.get() == true)
            #expect(store.checkpointer.commits.load(ordering: .relaxed) - commits == 2)
        }
    }

    @Test func anOperationThatFailsInABatchIsUndoneAlone() async throws {
        try await withStore { store, _ async throws in
            try await call { store.put("session", value: bytes("not a counter"), ttlMs: 60_000, on: $0, $1) }.get()
            let resume = store.hold()
            let first = Started { store.create("a", value: [1], ttlMs: 60_000, on: $0, $1) }
            // Writes, then fails: what it wrote must go, and nothing else.
            let failing = Started { (executor, done: @escaping (StoreResult<Void>) -> Void) in
                store.run("failing", executor, done) { table, _ in
                    try table.put("written-then-failed", value: [9], expiresAt: .max)
                    throw StoreError.failed("failing: on purpose")
                }
            }
            let notACounter = Started { store.increment("session", ttlMs: 60_000, on: $0, $1) }
            let last = Started { store.create("c", value: [3], ttlMs: 60_000, on: $0, $1) }
            resume()
            #expect(try await first.answer.get() == true)
            #expect(await failing.answer.error == .failed("failing: on purpose"))
            #expect(await notACounter.answer.error == .failed("increment: the value is not a counter"))
            #expect(try await last.answer.get() == true)
            #expect(try await call { store.get("a", on: $0, $1) }.get() == [1])
            #expect(try await call { store.get("c", on: $0, $1) }.get() == [3])
            #expect(try await call { store.get("written-then-failed", on: $0, $1) }.get() == nil)
            #expect(try await call { store.get("session", on: $0, $1) }.get() == bytes("not a counter"))
        }
    }

    /// After some errors (I/O, a full disk) SQLite rolls the whole transaction back: what the
    /// operations before the failing one wrote is gone, and they must not be answered as done.
    /// A write whose counter cannot move, in a batch: the write and the move are undone
    /// together, and nothing else.
    @Test func aWriteWhoseCounterCannotMoveIsUndoneAloneInABatch() async throws {
        try await withStore { store, _ async throws in
            try await call { store.put("session", value: bytes("not a counter"), ttlMs: 60_000, on: $0, $1) }.get()
            let resume = store.hold()
            let first = Started { store.writeAll([.create("a", value: [1], ttlMs: 60_000)], moving: .up("count", ttlMs: 60_000), on: $0, $1) }
            let failing = Started { store.writeAll([.create("b", value: [2], ttlMs: 60_000)], moving: .up("session", ttlMs: 60_000), on: $0, $1) }
            let last = Started { store.writeAll([.create("c", value: [3], ttlMs: 60_000)], moving: .up("count", ttlMs: 60_000), on: $0, $1) }
            resume()
            #expect(try await first.answer.get() == .written(count: 1))
            #expect(await failing.answer.error == .failed("increment: the value is not a counter"))
            #expect(try await last.answer.get() == .written(count: 2))
            #expect(try await call { store.get("b", on: $0, $1) }.get() == nil)
            #expect(try await call { store.get("c", on: $0, $1) }.get() == [3])
            #expect(try await call { store.get("count", on: $0, $1) }.get() == bytes("2"))
        }
    }

    @Test func aBatchSQLiteRolledBackAnswersNothingAsDone() async throws {
        try await withStore { store, _ async throws in
            let resume = store.hold()
            let before = Started { store.create("before", value: [1], ttlMs: 60_000, on: $0, $1) }
            let beforeSwap = Started { store.put("swapped", value: [1], ttlMs: 60_000, on: $0, $1) }
            let losing = Started { (executor, done: @escaping (StoreResult<Void>) -> Void) in
                store.run("losing", executor, done) { table, _ in
                    try table.db.execute("ROLLBACK")  // as SQLite does after SQLITE_IOERR
                    throw StoreError.unavailable("losing: the disk failed")
                }
            }
            let after = Started { store.create("after", value: [3], ttlMs: 60_000, on: $0, $1) }
            resume()
            let lost = await before.answer.error
            #expect(lost?.isUnavailable == true)
            #expect("\(lost.map { "\($0)" } ?? "")".contains("rolled the transaction back"))
            #expect(await beforeSwap.answer.error == lost)
            #expect(await losing.answer.error == .unavailable("losing: the disk failed"))
            #expect(try await after.answer.get() == true)
            #expect(try await call { store.get("before", on: $0, $1) }.get() == nil)
            #expect(try await call { store.get("swapped", on: $0, $1) }.get() == nil)
            #expect(try await call { store.get("after", on: $0, $1) }.get() == [3])
        }
    }

    /// A real full disk (SQLite's page limit reached): whatever SQLite undoes, every operation
    /// answered as done is in the file, and every one answered as failed is not.
    @Test func aFullDiskNeverAnswersALostWriteAsDone() async throws {
        try await withStore { store, _ async throws in
            try await call { store.put("seed", value: [0], ttlMs: 60_000, on: $0, $1) }.get()
            try await call { (executor, done: @escaping (StoreResult<Void>) -> Void) in
                store.run("limit", executor, done) { table, _ in try table.db.execute("PRAGMA max_page_count = 1") }
            }.get()
            let resume = store.hold()
            let started = (0..<12).map { i in
                // Small values may fit in the pages there are; the large ones cannot.
                Started { store.create("k\(i)", value: [UInt8](repeating: UInt8(i), count: i % 3 == 0 ? 8 : 20_000), ttlMs: 60_000, on: $0, $1) }
            }
            resume()
            var failures = 0
            for (i, s) in started.enumerated() {
                let stored = try await call { store.get("k\(i)", on: $0, $1) }.get()
                switch await s.answer {
                case .success(let created):
                    #expect(created)
                    #expect(stored != nil, "k\(i) was answered as created and is not in the file")
                case .failure:
                    failures += 1
                    #expect(stored == nil, "k\(i) was answered as failed and is in the file")
                }
            }
            #expect(failures >= 8)
        }
    }
}

private extension StoreError {
    var isUnavailable: Bool {
        if case .unavailable = self { return true }
        return false
    }
}
