import EventHTTP
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Logging
import TestSupport
import TxGateCore
@testable import TxGate

/// `txgate serve` run inside the test process: the configuration read as `serve` reads it
/// (`ConfigCheck.load`), the same `Gateway` (process resources, shared state, workers, the
/// phases of its plan), with a `ManualClock` instead of the system's time. Every expiry the
/// gateway measures (sessions, authIds, transactions, parked requests, suspended journeys,
/// lockouts and email windows, which the SQLite store's TTLs count) follows that clock, so
/// `advance(seconds:)` moves past an expiry at once.
///
/// Its transport is real: the workers listen on 127.0.0.1 and proxy to a real upstream, over
/// loopback sockets inside this process. Doing without them would need an in-memory channel on
/// both sides of EventHTTP (the accepted connection and the upstream pool); the sockets cost
/// microseconds, and what they replace (spawning two processes per test, waiting out TTLs)
/// is what made the suite slow. Its log (JSON lines, access log included) goes to a file in
/// its folder, as the binary's goes to stderr.
final class InProcessGateway: GatewayUnderTest, @unchecked Sendable {
    // @unchecked: `gateway`, `port`, `dir` and the log's descriptor are set once in init; the
    // workers run on their own threads and are only reached through `Worker`'s loop hops.
    let clock = ManualClock()
    /// The gateway's folder: its configuration, store, signing key and log (relative paths in
    /// the configuration resolve here, as they do next to a configuration file).
    let dir: TemporaryDirectory
    let gateway: Gateway
    let port: Int
    private let logFD: Int32
    /// Left by each worker's thread as it ends.
    private let exited = DispatchGroup()
    private let lock = NSLock()
    private var stopped = false

    /// Starts a gateway with the configuration `build(port)` (`port`: a free one, retried if
    /// another test takes it first) and waits until its workers run.
    init(config build: (Int) -> [String: Any]) throws {
        dir = try TemporaryDirectory(prefix: "txgate-inproc")
        logFD = open(dir.path("txgate.log"), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard logFD >= 0 else { throw HarnessError("cannot create the log file in \(dir.path)") }
        var lastError: Error?
        var started: (Gateway, Int)?
        for _ in 0..<3 where started == nil {
            let port = try Ports.free()
            do {
                let data = try JSONSerialization.data(withJSONObject: build(port), options: [.prettyPrinted, .sortedKeys])
                let url = try dir.write("gateway.json", data: data)
                let config = try Self.load(url.path)
                // Gateway's init binds the workers' listeners: once it returns, connections are accepted.
                started = (try Gateway(config: config, logger: Self.logger(config, fd: logFD), clock: clock.wallClock), port)
            } catch let e as HarnessError {
                throw e
            } catch {
                // Most likely another test took the port between the probe and the bind.
                lastError = error
            }
        }
        guard let (gateway, port) = started else {
            close(logFD)
            throw HarnessError("the in-process gateway did not start: \(lastError.map { "\($0)" } ?? "?")")
        }
        self.gateway = gateway
        self.port = port
        for w in gateway.workers {
            exited.enter()
            w.start { [exited] in exited.leave() }
        }
    }

    deinit {
        stop()
        close(logFD)
    }

    /// As `txgate serve` reads a configuration file; its errors as the binary prints them.
    static func load(_ path: String) throws -> GatewayConfig {
        do {
            return try ConfigCheck.load(path: path)
        } catch {
            throw HarnessError("configuration refused:\n" + error.errors.map { "\($0)" }.joined(separator: "\n"))
        }
    }

    /// The binary's logger (`JSONLogHandler` at the configured level), writing to `fd`.
    static func logger(_ config: GatewayConfig, fd: Int32) -> Logger {
        let level = Logger.Level(rawValue: config.log.level) ?? .info
        return Logger(label: "txgate") { label in
            var h = JSONLogHandler(label: label, fd: fd)
            h.logLevel = level
            return h
        }
    }

    var logText: String {
        // Access lines wait up to 100 ms in each worker's buffer: flushed first, on the loops
        // (a stopped worker flushed its own on the way out).
        if !lock.withLock({ stopped }) { flushAccessLogs() }
        return dir.read("txgate.log")
    }

    var nowS: Int { clock.now }

    /// Moves the clock on once what the gateway has under way is done (`settle`).
    func advance(seconds: Double) {
        settle()
        clock.advance(seconds: seconds)
    }

    /// Waits until the work the gateway started before answering is done: a turn of each
    /// worker's loop, then a round trip through the store, whose queue is serial (a write
    /// queued before it, such as a session's sliding expiry, which the gateway does not wait
    /// for, is done after it). A real clock does not jump by minutes while such a write waits;
    /// without this, the write would find its record expired by a clock moved in between.
    func settle() {
        onEachLoop { _ in }
        guard let store = gateway.shared.store else { return }
        let done = DispatchSemaphore(value: 0)
        store.get("-settle", on: TestExecutor()) { _ in done.signal() }
        _ = done.wait(timeout: .now() + 5)
    }

    /// Writes out the access lines the workers hold, and waits until they have.
    private func flushAccessLogs() {
        onEachLoop { $0.accessLogBuffer.flush() }
    }

    /// Runs `body` on each worker's loop, and waits until it has.
    private func onEachLoop(_ body: @escaping (Worker) -> Void) {
        let done = DispatchGroup()
        for w in gateway.workers {
            done.enter()
            w.loop.execute { [w] in
                body(w)
                done.leave()
            }
        }
        _ = done.wait(timeout: .now() + 5)
    }

    /// Drains the workers as SIGTERM does (requests in flight finish), or closes what is left
    /// after 5 s, and waits for their threads to end. Called again, does nothing.
    func stop() {
        let first = lock.withLock {
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        let drained = DispatchGroup()
        for w in gateway.workers {
            drained.enter()
            w.drain { drained.leave() }
        }
        if drained.wait(timeout: .now() + 5) == .timedOut {
            gateway.workers.forEach { $0.forceClose() }
        }
        _ = exited.wait(timeout: .now() + 10)
    }
}
