import Dispatch
import Foundation
import Glibc
import Synchronization
import Testing
import TestSupport
import TxGateCore
@testable import TxGateStore

/// What blocks on the thread saw.
private final class Seen: Sendable {
    let running = Atomic<Int>(0)
    let overlapped = Atomic<Bool>(false)
    let offThread = Atomic<Bool>(false)
    let ran = Atomic<Int>(0)
}

@Suite struct StoreThreadTests {
    /// A name no other thread of the test process has, as the kernel keeps it (15 bytes).
    private static func uniqueName() -> String { "txg-t-" + String(UInt32.random(in: 0...UInt32.max), radix: 16) }

    /// This process's threads: their ids (folders of /proc/self/task) and the kernel's names.
    private static func threads() -> [(task: String, name: String)] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.compactMap { task in
            (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8))
                .map { (task, $0.trimmingCharacters(in: .newlines)) }
        }
    }

    private static func threadNames() -> [String] { threads().map(\.name) }

    /// Whether the thread named `name` has ended, waiting up to `withinMs` for it.
    private static func ended(_ name: String, withinMs: Int) async throws -> Bool {
        for _ in 0..<withinMs / 10 where threadNames().contains(name) { try await Task.sleep(nanoseconds: 10_000_000) }
        return !threadNames().contains(name)
    }

    @Test func blocksRunOneAtATimeInTheOrderGivenOnTheNamedThread() async throws {
        let name = Self.uniqueName()
        let thread = StoreThread(name: name)
        defer { thread.stop() }
        #expect(Self.threadNames().filter { $0 == name }.count == 1)
        #expect(!thread.isCurrent)
        let ran = Collected<(producer: Int, index: Int)>()
        let seen = Seen()
        // Four producers at once, each giving its blocks in order.
        DispatchQueue.concurrentPerform(iterations: 4) { producer in
            for index in 0..<500 {
                thread.async {
                    if seen.running.add(1, ordering: .relaxed).newValue != 1 { seen.overlapped.store(true, ordering: .relaxed) }
                    if !thread.isCurrent { seen.offThread.store(true, ordering: .relaxed) }
                    ran.append((producer, index))
                    seen.running.subtract(1, ordering: .relaxed)
                }
            }
        }
        thread.sync {}
        let items = ran.items
        #expect(items.count == 2000)
        let overlapped = seen.overlapped.load(ordering: .relaxed), offThread = seen.offThread.load(ordering: .relaxed)
        #expect(!overlapped)
        #expect(!offThread)
        for producer in 0..<4 {
            #expect(items.filter { $0.producer == producer }.map(\.index) == Array(0..<500))
        }
    }

    @Test func theThreadTakesNoSignalSentToTheProcess() throws {
        let name = Self.uniqueName()
        let thread = StoreThread(name: name)
        defer { thread.stop() }
        let task = try #require(Self.threads().first { $0.name == name }?.task)
        let mask = try #require(ProcStatus.field("SigBlk", in: "/proc/self/task/\(task)/status"))
        let blocked = try #require(UInt64(mask, radix: 16))
        func isBlocked(_ signal: Int32) -> Bool { blocked & (1 << UInt64(signal - 1)) != 0 }
        for signal in [SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGPIPE] { #expect(isBlocked(signal), "signal \(signal)") }
        for fault in [SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT] { #expect(!isBlocked(fault), "signal \(fault)") }
    }

    @Test func syncAnswersRethrowsAndRunsInPlaceOnTheThread() throws {
        let thread = StoreThread(name: Self.uniqueName())
        defer { thread.stop() }
        struct Refused: Error, Equatable {}
        for i in 0..<1000 { #expect(thread.sync { i * 2 } == i * 2) }
        #expect(throws: Refused.self) { try thread.sync { throw Refused() } }
        // Called on the thread itself, it runs in place instead of waiting for itself.
        let nested = thread.sync { thread.isCurrent && thread.sync { thread.isCurrent } }
        #expect(nested)
    }

    @Test func stopRunsWhatWasGivenThenEndsTheThread() async throws {
        let name = Self.uniqueName()
        let thread = StoreThread(name: name)
        let seen = Seen()
        let held = DispatchSemaphore(value: 0)
        thread.async { held.wait() }
        for _ in 0..<100 { thread.async { seen.ran.add(1, ordering: .relaxed) } }
        thread.stop()
        held.signal()
        #expect(try await Self.ended(name, withinMs: 5000))
        let ran = seen.ran.load(ordering: .relaxed)
        #expect(ran == 100)
    }

    @Test func aStoreLetGoOfOrFailingToOpenLeavesNoThreadBehind() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        // Opened, used, let go of.
        let used = Self.uniqueName()
        do {
            let store = try SQLiteStore(path: dir.path("used.db"), clock: SQLiteStore.wallClockMs, maxBatch: 64, threadName: used)
            #expect(Self.threadNames().contains(used))
            try await call { store.put("k", value: [1], ttlMs: 60_000, on: $0, $1) }.get()
        }
        #expect(try await Self.ended(used, withinMs: 2000))
        // Failing after its thread started: SQLite cannot open a folder as its file.
        let folder = Self.uniqueName()
        try FileManager.default.createDirectory(atPath: dir.path("folder.db"), withIntermediateDirectories: false)
        #expect(throws: ConfigError.self) {
            _ = try SQLiteStore(path: dir.path("folder.db"), clock: SQLiteStore.wallClockMs, maxBatch: 64, threadName: folder)
        }
        #expect(try await Self.ended(folder, withinMs: 2000))
        // Failing before it touched the file: its folder cannot be made.
        let early = Self.uniqueName()
        _ = try dir.write("plain", "not a folder")
        #expect(throws: ConfigError.self) {
            _ = try SQLiteStore(path: dir.path("plain") + "/s.db", clock: SQLiteStore.wallClockMs, maxBatch: 64, threadName: early)
        }
        #expect(try await Self.ended(early, withinMs: 2000))
    }
}
