import EventHTTP
import Foundation
import Logging
import TxGateCore
import TxGateRedis
#if canImport(Glibc)
import Glibc
#endif
import TestSupport

/// Event loops running on their own threads, as the gateway's workers do.
final class RunningLoops: Sendable {
    let loops: [EventLoop]
    private let finished = DispatchGroup()

    init(_ count: Int) {
        loops = (0..<count).map { _ in EventLoop() }
        for loop in loops {
            finished.enter()
            Thread { [finished] in
                loop.run()
                finished.leave()
            }.start()
        }
    }

    func stop(detaching stores: [RedisStore] = []) {
        for loop in loops {
            let done = DispatchSemaphore(value: 0)
            loop.execute {
                for s in stores { s.detach(from: loop) }
                done.signal()
            }
            done.wait()
            loop.stop()
        }
        finished.wait()
    }
}

extension RedisServer {
    /// The server's address as RedisStore takes it.
    var storeURL: RedisURL { RedisURL(host: "127.0.0.1", port: port) }

    /// The remaining time to live of `key`, in ms, read straight from the server.
    func pttl(_ key: String) throws -> Int {
        guard case .integer(let ms) = try command(["PTTL", key]) else { throw HarnessError("PTTL \(key): not an integer") }
        return ms
    }
}

/// One redis-server, one running loop and a store attached to it; `close()` tears them down.
final class RedisFixture {
    let redis: RedisServer
    let loops: RunningLoops
    let store: RedisStore
    var loop: EventLoop { loops.loops[0] }

    init(timeoutMs: Int = 2000) throws {
        redis = try RedisServer.start()
        loops = RunningLoops(1)
        store = makeStore(redis.storeURL, timeoutMs: timeoutMs, on: loops.loops)
    }

    /// Detaches the store and stops the loop, then kills the server.
    func close() {
        loops.stop(detaching: [store])
        redis.kill()
    }
}

func makeStore(_ url: RedisURL, prefix: String = "t:", timeoutMs: Int = 2000, on loops: [EventLoop]) -> RedisStore {
    var logger = Logger(label: "test")
    logger.logLevel = .critical
    let store = RedisStore(url: url, keyPrefix: prefix, timeoutMs: timeoutMs, logger: logger)
    for loop in loops { store.attach(to: loop) }
    return store
}

/// Awaits one store call on `loop`, and checks that the completion ran on that loop's thread.
func call<T: Sendable>(on loop: EventLoop, _ operation: @escaping (CallbackExecutor, @escaping (StoreResult<T>) -> Void) -> Void) async -> StoreResult<T> {
    await withCheckedContinuation { continuation in
        loop.execute {
            operation(loop) { result in
                precondition(loop.inLoopThread, "a completion ran off its loop")
                continuation.resume(returning: result)
            }
        }
    }
}

/// Starts `count` calls at once, spread over `loops` (and stores), and returns every result.
func concurrently<T: Sendable>(_ count: Int, loops: [EventLoop],
                               _ operation: @escaping (Int, EventLoop, @escaping (StoreResult<T>) -> Void) -> Void) async -> [StoreResult<T>] {
    await withCheckedContinuation { continuation in
        let results = Collected<StoreResult<T>>()
        for i in 0..<count {
            let loop = loops[i % loops.count]
            loop.execute {
                operation(i, loop) { r in
                    if results.append(r) == count { continuation.resume(returning: results.items) }
                }
            }
        }
    }
}

extension Result where Failure == StoreError {
    var isUnavailable: Bool {
        if case .failure(.unavailable) = self { return true }
        return false
    }
}

/// Log lines a store wrote, for tests that count them (swift-log handler; thread-safe).
final class CapturedLogs: @unchecked Sendable {
    // @unchecked: `lines` is only touched under `lock`.
    private let lock = NSLock()
    private var lines: [(level: Logger.Level, message: String)] = []

    var logger: Logger {
        Logger(label: "test") { _ in Handler(sink: self) }
    }

    func append(_ level: Logger.Level, _ message: String) {
        lock.lock()
        lines.append((level, message))
        lock.unlock()
    }

    /// The messages containing `text`.
    func matching(_ text: String) -> [String] {
        lock.lock()
        defer { lock.unlock() }
        return lines.map(\.message).filter { $0.contains(text) }
    }

    struct Handler: LogHandler {
        let sink: CapturedLogs
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            sink.append(event.level, event.message.description)
        }
    }
}
