import Foundation
import Testing
import TxGateCore
import TestSupport
@testable import TxGateStore

/// Concurrency, durability and the file itself.
@Suite struct SQLiteStoreSharingTests {
    let executors: [CallbackExecutor] = (0..<4).map { TestExecutor($0) }

    @Test func ofConcurrentTakesExactlyOneGetsTheValue() async throws {
        try await withStore { store, _ async throws in
            for round in 0..<20 {
                let key = "code:\(round)"
                try await call { store.put(key, value: bytes("txn:\(round)"), ttlMs: 60_000, on: $0, $1) }.get()
                let results = await concurrently(50, executors: executors) { _, executor, done in
                    store.take(key, on: executor, done)
                }
                let values = try results.map { try $0.get() }
                #expect(values.count == 50)
                #expect(values.compactMap { $0 } == [bytes("txn:\(round)")], "round \(round)")
            }
        }
    }

    @Test func ofConcurrentConditionalTakesExactlyOneGetsTheValue() async throws {
        try await withStore { store, _ async throws in
            let record = bytes(#"{"state":"COMPLETED","seal":"s"}"#)
            try await call { store.put("tx", value: record, ttlMs: 60_000, on: $0, $1) }.get()
            let results = await concurrently(50, executors: executors) { _, executor, done in
                store.takeIf("tx", fields: ["state": "COMPLETED", "seal": "s"], on: executor, done)
            }
            let outcomes = try results.map { try $0.get() }
            #expect(outcomes.filter { $0 == .taken(record) }.count == 1)
            #expect(outcomes.filter { $0 == .absent }.count == 49)
        }
    }

    @Test func decrementLowersACounterExactlyAndNeverBelowZero() async throws {
        try await withStore { store, _ async throws in
            #expect(try await call { store.decrement("n", on: $0, $1) }.get() == false, "absent stays absent")
            #expect(try await call { store.get("n", on: $0, $1) }.get() == nil)
            for _ in 0..<30 { _ = try await call { store.increment("n", ttlMs: 60_000, on: $0, $1) }.get() }
            // The store's own step, and the compare-and-swap loop other stores default to.
            let lowered = await concurrently(40, executors: executors) { i, executor, done in
                if i % 2 == 0 {
                    store.decrement("n", on: executor, done)
                } else {
                    store.decrementByCompareAndSwap("n", on: executor, attempts: 100, done)
                }
            }
            #expect(try lowered.filter { try $0.get() }.count == 30)
            #expect(try await call { store.get("n", on: $0, $1) }.get() == bytes("0"))
            #expect(try await call { store.increment("n", ttlMs: 60_000, on: $0, $1) }.get() == 1)
            try await call { store.put("text", value: bytes("x1"), ttlMs: 60_000, on: $0, $1) }.get()
            #expect(try await call { store.decrement("text", on: $0, $1) }.get() == false, "not a counter: left alone")
        }
    }

    /// Steps one caller sends without waiting for each other's answers take effect in the order
    /// sent (one serial queue; those queued together share one commit): a promise for tidiness
    /// only (`Store`): a challenge still waits for its record before it claims the index naming
    /// it (`PolicyDecider.Plan.open`).
    @Test func stepsSentWithoutWaitingTakeEffectInTheOrderSent() async throws {
        try await withStore { store, _ async throws in
            for round in 0..<50 {
                let (record, index) = ("record:\(round)", "index:\(round)")
                let claimed = await call { executor, done in
                    store.create(record, value: bytes("r\(round)"), ttlMs: 60_000, on: executor) { _ in }
                    store.create(index, value: bytes("first"), ttlMs: 60_000, on: executor) { _ in }
                    store.compareAndSwap(index, expected: bytes("first"), new: bytes(record), ttlMs: 60_000, on: executor, done)
                }
                #expect(try claimed.get(), "round \(round): the swap ran after the create sent before it")
                let read = await call { executor, done in
                    store.put(record, value: bytes("changed"), ttlMs: 60_000, on: executor) { _ in }
                    store.get(record, on: executor, done)
                }
                #expect(try read.get() == bytes("changed"), "round \(round)")
            }
        }
    }

    @Test func ofConcurrentCreatesExactlyOneWins() async throws {
        try await withStore { store, _ async throws in
            let results = await concurrently(50, executors: executors) { i, executor, done in
                store.create("lock", value: bytes("owner \(i)"), ttlMs: 60_000, on: executor, done)
            }
            #expect(try results.filter { try $0.get() }.count == 1)
        }
    }

    @Test func concurrentIncrementsCountExactly() async throws {
        try await withStore { store, _ async throws in
            let results = await concurrently(200, executors: executors) { _, executor, done in
                store.increment("rate", ttlMs: 60_000, on: executor, done)
            }
            // Every caller saw a different count: none was lost, none repeated.
            #expect(try results.map { try $0.get() }.sorted() == Array(1...200))
            #expect(try await call { store.get("rate", on: $0, $1) }.get() == bytes("200"))
        }
    }

    /// Two stores on one file stand in for two gateway processes: the transactions, not the
    /// store's queue, must keep take and increment exact.
    @Test func twoStoresOnOneFileStayAtomic() async throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        // Real threads, but a still clock: no value can expire however slow the machine is.
        let clock = ManualClock()
        let first = try SQLiteStore(path: folder.path("shared.db"), clock: clock.read)
        let second = try SQLiteStore(path: folder.path("shared.db"), clock: clock.read)
        defer { first.close(); second.close() }
        let stores = [first, second]

        let counts = await concurrently(200, executors: executors) { i, executor, done in
            stores[i % 2].increment("rate", ttlMs: 60_000, on: executor, done)
        }
        #expect(try counts.map { try $0.get() }.sorted() == Array(1...200))

        for round in 0..<10 {
            let key = "code:\(round)"
            try await call { first.put(key, value: [UInt8(round)], ttlMs: 60_000, on: $0, $1) }.get()
            let taken = await concurrently(50, executors: executors) { i, executor, done in
                stores[i % 2].take(key, on: executor, done)
            }
            #expect(try taken.compactMap { try $0.get() } == [[UInt8(round)]], "round \(round)")
        }
    }

    /// Two logins with the same TOTP code, on two gateway processes sharing the file: exactly
    /// one raises the user's last step; and raises to many steps at once end at the highest.
    @Test func ofConcurrentRaisesToOneStepExactlyOneWins() async throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let clock = ManualClock()
        let first = try SQLiteStore(path: folder.path("shared.db"), clock: clock.read)
        let second = try SQLiteStore(path: folder.path("shared.db"), clock: clock.read)
        defer { first.close(); second.close() }
        let stores = [first, second]
        for step in UInt64(1)...10 {
            // The store's own step, and the compare-and-swap loop other stores default to.
            let raised = await concurrently(20, executors: executors) { i, executor, done in
                if i % 4 < 2 {
                    stores[i % 2].raise("totp-step:demo", to: step * 10, on: executor, done)
                } else {
                    stores[i % 2].raiseByCompareAndSwap("totp-step:demo", to: step * 10, on: executor, attempts: 100, done)
                }
            }
            #expect(try raised.filter { try $0.get() }.count == 1, "step \(step)")
        }
        let mixed = await concurrently(50, executors: executors) { i, executor, done in
            if i % 4 < 2 {
                stores[i % 2].raise("totp-step:other", to: UInt64(i + 1), on: executor, done)
            } else {
                stores[i % 2].raiseByCompareAndSwap("totp-step:other", to: UInt64(i + 1), on: executor, attempts: 100, done)
            }
        }
        #expect(try mixed.allSatisfy { _ = try $0.get(); return true })
        #expect(try await call { first.get("totp-step:other", on: $0, $1) }.get() == bytes("50"))
    }

    @Test func valuesSurviveCloseAndReopen() async throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let path = folder.path("state/store.db")
        let clock = ManualClock()

        let before = try SQLiteStore(path: path, clock: clock.read)
        try await call { before.put("session:abc", value: bytes("alice"), ttlMs: 60_000, on: $0, $1) }.get()
        try await call { before.put("gone", value: [1], ttlMs: 50, on: $0, $1) }.get()
        #expect(try await call { before.get("gone", on: $0, $1) }.get() == [1])
        #expect(try await call { before.increment("rate", ttlMs: 60_000, on: $0, $1) }.get() == 1)
        #expect(try await call { before.increment("rate", ttlMs: 60_000, on: $0, $1) }.get() == 2)
        before.close()
        #expect(FileManager.default.fileExists(atPath: path))

        // The expiry is kept in the file too: the value lives out its TTL after the reopen, no longer.
        clock.advance(ms: 49)
        let after = try SQLiteStore(path: path, clock: clock.read)
        defer { after.close() }
        #expect(try await call { after.get("session:abc", on: $0, $1) }.get() == bytes("alice"))
        #expect(try await call { after.get("gone", on: $0, $1) }.get() == [1])
        clock.advance(ms: 1)
        #expect(try await call { after.get("gone", on: $0, $1) }.get() == nil)
        #expect(try await call { after.increment("rate", ttlMs: 60_000, on: $0, $1) }.get() == 3)
    }

    @Test func missingFoldersAreCreated() async throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let path = folder.path("a/b/c/store.db")
        let store = try SQLiteStore(path: path)
        defer { store.close() }
        try await call { store.put("k", value: [1], ttlMs: 60_000, on: $0, $1) }.get()
        #expect(FileManager.default.fileExists(atPath: path))
    }

    @Test func aPathUnderAFileIsRefusedByName() throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let file = folder.path("plain")
        try Data("not a folder".utf8).write(to: URL(fileURLWithPath: file))

        for path in [file + "/store.db", file + "/sub/store.db"] {
            #expect {
                _ = try SQLiteStore(path: path)
            } throws: { error in
                "\(error)" == "store.path: cannot open '\(path)': '\(file)' is not a folder"
            }
        }
    }

    @Test func aFileThatIsNotADatabaseIsRefusedByName() throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let path = folder.path("garbage.db")
        try Data(repeating: 0x5A, count: 4096).write(to: URL(fileURLWithPath: path))
        #expect {
            _ = try SQLiteStore(path: path)
        } throws: { error in
            "\(error)" == "store.path: cannot open '\(path)': file is not a database"
        }
    }

    @Test func aFolderIsNotADatabaseFile() throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        #expect {
            _ = try SQLiteStore(path: folder.url.path)
        } throws: { error in
            "\(error)" == "store.path: cannot open '\(folder.url.path)': Is a directory"
        }
    }

    @Test func diskErrorsMeanUnavailableAndOthersMeanFailed() {
        func mapped(_ code: Int32, _ message: String) -> StoreError {
            SQLiteStore.storeError(SQLiteError(code: code, message: message), operation: "put", path: "/var/lib/txgate.db")
        }
        // SQLITE_IOERR_WRITE, SQLITE_FULL, SQLITE_CANTOPEN
        #expect(mapped(778, "disk I/O error") == .unavailable("sqlite '/var/lib/txgate.db': put: disk I/O error"))
        #expect(mapped(13, "database or disk is full") == .unavailable("sqlite '/var/lib/txgate.db': put: database or disk is full"))
        #expect(mapped(14, "unable to open database file") == .unavailable("sqlite '/var/lib/txgate.db': put: unable to open database file"))
        // SQLITE_BUSY, SQLITE_CORRUPT
        #expect(mapped(5, "database is locked") == .failed("sqlite '/var/lib/txgate.db': put: database is locked"))
        #expect(mapped(11, "database disk image is malformed") == .failed("sqlite '/var/lib/txgate.db': put: database disk image is malformed"))
    }
}
