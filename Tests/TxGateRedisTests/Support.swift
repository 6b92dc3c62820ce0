import EventHTTP
import Foundation
import Logging
import TxGateCore
import TxGateRedis
#if canImport(Glibc)
import Glibc
#endif

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

/// A real redis-server on a free loopback port, in its own folder; killed by `stop()`.
final class RedisServer: @unchecked Sendable {
    let port: Int
    let folder: URL
    private let extraArguments: [String]
    private var process: Process?

    init(arguments: [String] = []) throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("txgate-redis-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        port = try freePort()
        extraArguments = arguments
        try start()
    }

    deinit { stop(); try? FileManager.default.removeItem(at: folder) }

    /// Starts (or restarts) the server on the same port, and waits until it answers.
    func start() throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/redis-server")
        p.arguments = ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                       "--dir", folder.path, "--logfile", folder.appendingPathComponent("redis.log").path] + extraArguments
        try p.run()
        process = p
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if let reply = try? rawCommand("PING\r\n"), reply.hasPrefix("+PONG") || reply.hasPrefix("-NOAUTH") { return }
            usleep(20_000)
        }
        throw TestFailure("redis-server on port \(port) did not answer within 10 s")
    }

    func stop() {
        guard let p = process else { return }
        process = nil
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
    }

    /// Pauses or resumes the server: a Redis that accepts but never answers.
    func pause() { if let p = process { kill(p.processIdentifier, SIGSTOP) } }
    func resume() { if let p = process { kill(p.processIdentifier, SIGCONT) } }

    var url: RedisURL { RedisURL(host: "127.0.0.1", port: port) }

    /// Sends one inline command on a fresh connection and returns the first reply chunk.
    func rawCommand(_ command: String) throws -> String {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket()") }
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var tv = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else { throw TestFailure("connect to redis: errno \(errno)") }
        _ = command.withCString { send(fd, $0, strlen($0), 0) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = recv(fd, &buffer, buffer.count, 0)
        guard n > 0 else { throw TestFailure("no reply from redis") }
        return String(decoding: buffer[..<n], as: UTF8.self)
    }
}

func freePort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) == 0 && getsockname(fd, $0, &len) == 0 }
    }
    guard ok else { throw TestFailure("cannot bind an ephemeral port") }
    return Int(UInt16(bigEndian: addr.sin_port))
}

/// Event loops running on their own threads, as the gateway's workers do.
final class RunningLoops: @unchecked Sendable {
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

func makeStore(_ url: RedisURL, prefix: String = "t:", timeoutMs: Int = 500, on loops: [EventLoop]) -> RedisStore {
    var logger = Logger(label: "test")
    logger.logLevel = .critical
    let store = RedisStore(url: url, keyPrefix: prefix, timeoutMs: timeoutMs, logger: logger)
    for loop in loops { store.attach(to: loop) }
    return store
}

/// Awaits one store call on `loop`, and checks that the completion ran on that loop's thread.
func call<T>(on loop: EventLoop, _ operation: @escaping (CallbackExecutor, @escaping (StoreResult<T>) -> Void) -> Void) async -> StoreResult<T> {
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
func concurrently<T>(_ count: Int, loops: [EventLoop],
                     _ operation: @escaping (Int, EventLoop, @escaping (StoreResult<T>) -> Void) -> Void) async -> [StoreResult<T>] {
    await withCheckedContinuation { continuation in
        let lock = NSLock()
        nonisolated(unsafe) var results: [StoreResult<T>] = []
        for i in 0..<count {
            let loop = loops[i % loops.count]
            loop.execute {
                operation(i, loop) { r in
                    lock.lock()
                    results.append(r)
                    let all = results.count == count ? results : nil
                    lock.unlock()
                    if let all { continuation.resume(returning: all) }
                }
            }
        }
    }
}

/// Polls until `condition` holds, or fails after `seconds`.
func eventually(_ seconds: Double, _ what: String, _ condition: () async -> Bool) async throws {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if await condition() { return }
        try await Task.sleep(nanoseconds: 50_000_000)
    }
    throw TestFailure("\(what): not within \(seconds) s")
}

func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

extension Result where Failure == StoreError {
    var isUnavailable: Bool {
        if case .failure(.unavailable) = self { return true }
        return false
    }
}
