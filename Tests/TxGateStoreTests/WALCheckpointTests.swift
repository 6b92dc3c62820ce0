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
        let store = try SQLiteStore(path: path)
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
        // Without checkpoints this log reaches about 70 MB.
        #expect(size(path + "-wal") < 24_000_000, "the log was reused, not grown with every write")
        print("checkpoints: \(store.checkpointer.completed.load(ordering: .relaxed)), database \(size(path)) bytes, log \(size(path + "-wal")) bytes")
        let other = try SQLiteStore(path: path)
        defer { other.close() }
        for i in [0, 1_499, 2_999] {
            #expect(try await call { other.get("k\(i)", on: $0, $1) }.get() == value)
        }
    }
}
