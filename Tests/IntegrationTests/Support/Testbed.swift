import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif
import TestSupport

/// A running demo-bank.
struct DemoBankInstance: Sendable {
    let process: SpawnedProcess
    let port: Int
    var url: String { "http://127.0.0.1:\(port)" }
}

/// A running `txgate serve`.
struct GatewayInstance: @unchecked Sendable {
    // @unchecked: every property is a `let`; `config` is the JSON tree the gateway was started
    // with, never mutated after.
    let process: SpawnedProcess
    let port: Int
    let configURL: URL
    let config: [String: Any]
    var pid: Int32 { process.pid }

    /// A fresh keep-alive connection to the gateway.
    func connect(timeout: Double = 10) throws -> RawHTTPClient {
        try RawHTTPClient(port: port, timeout: timeout)
    }

    /// One request on its own connection (from the loopback address `source`, to look like
    /// another client).
    func fetch(_ method: String = "GET", _ target: String, headers: [(String, String)] = [],
               body: [UInt8]? = nil, source: String? = nil, timeout: Double = 10) throws -> HTTPResponse {
        try RawHTTPClient.fetch(port: port, method, target, headers: headers, body: body, source: source, timeout: timeout)
    }

    /// The JSON log lines written so far on stderr (lines that are not JSON are skipped).
    func logLines() -> [[String: Any]] {
        process.stderr.split(separator: "\n").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }
    }

    /// The number of open file descriptors of the gateway process.
    func openFileDescriptors() throws -> Int {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count
    }
}

/// Everything one test needs: its own temp directory, and the processes it starts, which are
/// all killed (and the directory removed) by `cleanup()` — call it in a `defer` right after
/// creating the testbed; `deinit` does it too.
final class Testbed: @unchecked Sendable {
    // @unchecked: `processes` and `cleanups` are only touched under `lock`; `dir` is immutable.
    let dir: TemporaryDirectory
    private let lock = NSLock()
    private var processes: [SpawnedProcess] = []
    private var cleanups: [@Sendable () -> Void] = []

    init() throws {
        dir = try TemporaryDirectory(prefix: "txgate-it")
    }

    deinit { cleanup() }

    func cleanup() {
        lock.lock()
        let all = processes
        processes.removeAll()
        let others = cleanups
        cleanups.removeAll()
        lock.unlock()
        for p in all { p.kill() }
        for c in others { c() }
        dir.remove()
    }

    /// Runs `body` in `cleanup()` (for helpers that own what they start, such as SMTPServer).
    func onCleanup(_ body: @escaping @Sendable () -> Void) {
        lock.withLock { cleanups.append(body) }
    }

    /// Starts a process that `cleanup()` will kill.
    func spawn(_ executable: URL, _ arguments: [String], name: String? = nil, directory: URL? = nil,
               environment: [String: String]? = nil) throws -> SpawnedProcess {
        let p = try SpawnedProcess(executable, arguments, name: name, directory: directory ?? dir.url, environment: environment)
        lock.lock()
        processes.append(p)
        lock.unlock()
        return p
    }

    /// Starts demo-bank on a free port (or `port`) with `arguments`, and waits until it accepts connections.
    func startDemoBank(port fixed: Int? = nil, arguments: [String] = []) throws -> DemoBankInstance {
        let binary = try BinaryLocator.demoBank
        var lastError: Error?
        for _ in 0..<(fixed == nil ? 3 : 1) {
            let port = try fixed ?? Ports.free()
            let p = try spawn(binary, ["--listen", "127.0.0.1:\(port)"] + arguments, name: "demo-bank")
            do {
                try p.waitForPort(port)
                return DemoBankInstance(process: p, port: port)
            } catch {
                // Most likely someone else took the port between probe and bind: try another.
                lastError = error
                p.kill()
            }
        }
        throw lastError!
    }

    /// Writes `config` as JSON into the temp dir (`name`) and returns its location.
    @discardableResult
    func writeConfig(_ config: [String: Any], name: String = "gateway.json") throws -> URL {
        let data = try JSONSerialization.data(withJSONObject: config, options: [.prettyPrinted, .sortedKeys])
        return try dir.write(name, data: data)
    }

    /// The configuration the tests start from: `listen` on `port`, one worker, `upstream`,
    /// access log on; `overrides` is merged in (nested objects merge key by key).
    static func gatewayConfig(port: Int, upstream: String, overrides: [String: Any] = [:]) -> [String: Any] {
        let base: [String: Any] = [
            "listen": "127.0.0.1:\(port)",
            "workers": 1,
            "upstream": ["url": upstream],
            "log": ["level": "info", "access": true],
        ]
        return deepMerge(base, overrides)
    }

    /// Starts `txgate serve --config <tmp>/gateway.json` on a free port in front of `upstream`
    /// and waits until it accepts connections.
    func startGateway(upstream: String, config overrides: [String: Any] = [:],
                      extraArguments: [String] = []) throws -> GatewayInstance {
        try startGateway(extraArguments: extraArguments) { Self.gatewayConfig(port: $0, upstream: upstream, overrides: overrides) }
    }

    /// Starts `txgate serve` with the configuration `config(port)`, on `port` (or a free one,
    /// retried if another process takes it first), from `directory` (default: the testbed's),
    /// and waits until it accepts connections.
    func startGateway(name: String = "txgate", port fixed: Int? = nil, directory: URL? = nil,
                      environment: [String: String]? = nil, extraArguments: [String] = [],
                      config build: (Int) -> [String: Any]) throws -> GatewayInstance {
        let binary = try BinaryLocator.txgate
        var lastError: Error?
        for _ in 0..<(fixed == nil ? 3 : 1) {
            let port = try fixed ?? Ports.free()
            let config = build(port)
            let data = try JSONSerialization.data(withJSONObject: config, options: [.prettyPrinted, .sortedKeys])
            let url = (directory ?? dir.url).appendingPathComponent("gateway.json")
            try data.write(to: url)
            let p = try spawn(binary, ["serve", "--config", url.path] + extraArguments, name: name,
                              directory: directory, environment: environment)
            do {
                try p.waitForPort(port)
                return GatewayInstance(process: p, port: port, configURL: url, config: config)
            } catch {
                lastError = error
                p.kill()
            }
        }
        throw lastError!
    }

    /// demo-bank, then txgate in front of it.
    func startGatewayWithBank(config overrides: [String: Any] = [:]) throws -> (GatewayInstance, DemoBankInstance) {
        let bank = try startDemoBank()
        let gateway = try startGateway(upstream: bank.url, config: overrides)
        return (gateway, bank)
    }

    /// Runs `txgate <arguments>` to completion (`environment` is added to the test's own).
    func runTxgate(_ arguments: [String], timeout: Double = 30, environment: [String: String]? = nil) throws -> CommandResult {
        try SpawnedProcess.run(try BinaryLocator.txgate, arguments, directory: dir.url, timeout: timeout, environment: environment)
    }

    /// Writes `text` to a file in the temp dir and runs `txgate check --config` on it.
    func check(configText text: String, name: String = "check.json") throws -> CommandResult {
        let url = try dir.write(name, text)
        return try runTxgate(["check", "--config", url.path])
    }

    /// Runs a tool found on PATH (curl, openssl) to completion.
    func runTool(_ name: String, _ arguments: [String], timeout: Double = 30) throws -> CommandResult {
        guard let tool = BinaryLocator.onPath(name) else { throw HarnessError("\(name) is not installed (not on PATH)") }
        return try SpawnedProcess.run(tool, arguments, directory: dir.url, timeout: timeout)
    }
}

/// Merges `b` into `a`; where both hold an object, they merge key by key.
func deepMerge(_ a: [String: Any], _ b: [String: Any]) -> [String: Any] {
    var out = a
    for (k, v) in b {
        if let av = out[k] as? [String: Any], let bv = v as? [String: Any] {
            out[k] = deepMerge(av, bv)
        } else {
            out[k] = v
        }
    }
    return out
}

extension Testbed {
    /// The testbed of the running test, set by the `.testbed` trait.
    @TaskLocal static var scoped: Testbed?

    /// The running test's testbed; its processes are killed and its folder removed when the
    /// test ends, pass or fail.
    static var current: Testbed {
        get throws {
            guard let bed = scoped else { throw HarnessError("no testbed: add the .testbed trait to the suite") }
            return bed
        }
    }
}

/// `@Suite(.testbed)`: each test of the suite runs with a fresh `Testbed.current`, cleaned up
/// when it ends.
struct TestbedTrait: SuiteTrait, TestTrait, TestScoping {
    var isRecursive: Bool { true }

    func provideScope(for test: Test, testCase: Test.Case?,
                      performing function: @Sendable () async throws -> Void) async throws {
        guard !test.isSuite else { return try await function() }
        let bed = try Testbed()
        defer { bed.cleanup() }
        try await Testbed.$scoped.withValue(bed) { try await function() }
    }
}

extension Trait where Self == TestbedTrait {
    /// A fresh `Testbed.current` for each test.
    static var testbed: Self { TestbedTrait() }
}
