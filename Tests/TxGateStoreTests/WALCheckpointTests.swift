import Foundation
import Testing
import TxGateCore
import TestSupport
@testable import TxGateStore

@Suite struct WALCheckpointTests {
    /// The log is copied into the database by the checkpointer's own queue, not by a commit on
    /// the store's: past SQLite's threshold the database file grows and the log stays bounded,
    /// and every value written reads back, also from a second store on the same file.
    @Test func theLogIsCheckpointedOffTheStoresQueue() async throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let path = folder.path("store.db")
        // A clock that does not move: on a loaded machine, the writes may outlast their ttl.
        let clock = ManualClock()
        let store = try SQLiteStore(path: path, clock: clock.read)
        defer { store.close() }
        let value = [UInt8](repeating: 7, count: 3_000)
        for i in 0..<3_000 {
            try await call { store.put("k\(i)", value: value, ttlMs: 60_000, on: $0, $1) }.get()
        }
        var waited = 0
        while store.checkpointer.completed.load(ordering: .relaxed) == 0 && waited < 100 {
            try await Task.sleep(for: .milliseconds(50))
            waited += 1
        }
        #expect(store.checkpointer.completed.load(ordering: .relaxed) >= 1)
        let size = { (p: String) in ((try? FileManager.default.attributesOfItem(atPath: p)[.size]) as? Int) ?? 0 }
        #expect(size(path) > 4_000_000, "the values reached the database file")
        // Without checkpoints, or with passive ones alone (which never catch up with a writer
        // that does not pause), this log reaches about 60 MB (59.8 MB measured without the last
        // step). It starts over after each checkpoint's last step, and how far it grows before
        // depends on how much of the machine the checkpointer's thread gets: 41.9 MB seen when
        // the whole suite ran under ThreadSanitizer on two cores (this test took 227 s there, 1 s
        // alone).
        #expect(size(path + "-wal") < 50_000_000, "the log was reused, not grown with every write")
        let other = try SQLiteStore(path: path, clock: clock.read)
        defer { other.close() }
        for i in [0, 1_499, 2_999] {
            #expect(try await call { other.get("k\(i)", on: $0, $1) }.get() == value)
        }
    }

    /// Issue 22, item 8: purging many expired rows is one transaction that writes every page it
    /// touches to the log; a checkpoint lets the log be reused but leaves the file that size. After
    /// a large purge the log file is truncated, off the store's queue.
    @Test func aLargePurgeLeavesNoLargeLogBehind() async throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let path = folder.path("store.db")
        let clock = ManualClock()
        let store = try SQLiteStore(path: path, clock: clock.read)
        defer { store.close() }
        let value = [UInt8](repeating: 7, count: 300)
        for i in 0..<20_000 {
            try await call { store.put("k\(i)", value: value, ttlMs: 60_000, on: $0, $1) }.get()
        }
        try await call { store.put("kept", value: [1], ttlMs: 3_600_000, on: $0, $1) }.get()
        let size = { (p: String) in ((try? FileManager.default.attributesOfItem(atPath: p)[.size]) as? Int) ?? 0 }
        clock.advance(ms: 60_000)
        #expect(try store.purgeExpired() == 20_000)
        let grown = size(path + "-wal")
        #expect(grown > 2_000_000, "the purge wrote its pages to the log: \(grown) bytes")
        var waited = 0
        while size(path + "-wal") > 0 && waited < 100 {
            try await Task.sleep(for: .milliseconds(50))
            waited += 1
        }
        #expect(size(path + "-wal") == 0, "the log was truncated after the purge (it had grown to \(grown) bytes)")
        #expect(try await call { store.get("kept", on: $0, $1) }.get() == [1])
        #expect(try await call { store.get("k0", on: $0, $1) }.get() == nil)
        // The store goes on writing after the truncation.
        try await call { store.put("after", value: [2], ttlMs: 60_000, on: $0, $1) }.get()
        let other = try SQLiteStore(path: path, clock: clock.read)
        defer { other.close() }
        #expect(try await call { other.get("after", on: $0, $1) }.get() == [2])
    }
}
