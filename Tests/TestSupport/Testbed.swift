import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A running demo-bank.
public struct DemoBankInstance: Sendable {
    public let process: SpawnedProcess
    public let port: Int
    public var url: String { "http://127.0.0.1:\(port)" }
}

/// A running `txgate serve`.
public struct GatewayInstance: GatewayUnderTest, @unchecked Sendable {
    // @unchecked: every property is a `let`; `config` is the JSON tree the gateway was started
    // with, never mutated after.
    public let process: SpawnedProcess
    public let port: Int
    public let configURL: URL
    public let config: [String: Any]
    public var pid: Int32 { process.pid }

    public init(process: SpawnedProcess, port: Int, configURL: URL, config: [String: Any]) {
        self.process = process
        self.port = port
        self.configURL = configURL
        self.config = config
    }

    /// What the gateway wrote on stderr so far (its JSON log).
    public var logText: String { process.stderr }

    /// The real clock: the binary reads the system's time.
    public var nowS: Int { Int(Date().timeIntervalSince1970) }

    /// The binary's clock cannot be moved: the time passes.
    public func advance(seconds: Double) {
        Thread.sleep(forTimeInterval: seconds)
    }

    /// The number of open file descriptors of the gateway process.
    public func openFileDescriptors() throws -> Int {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count
    }

    /// The client connections each worker holds now, busiest first: for each of the process's
    /// epoll instances that watches a socket listening on the gateway's port (a worker's loop),
    /// the other sockets of that port it watches, whatever their state: a connection the client
    /// has closed counts until the gateway closes it too (Linux's /proc/PID/fdinfo and
    /// /proc/net/tcp). Idle keep-alive connections are all watched.
    public func clientConnectionsPerWorker() throws -> [Int] {
        // Socket inodes of 127.0.0.1:port: listening ("0A"), and the others.
        var listening = Set<Substring>(), connected = Set<Substring>()
        func read(_ path: String) throws -> String {
            guard let text = ProcStatus.read(path) else { throw HarnessError("cannot read \(path)") }
            return text
        }
        for line in try read("/proc/net/tcp").split(separator: "\n").dropFirst() {
            let f = line.split(separator: " ")
            guard f.count > 9, let local = f[1].split(separator: ":").last, Int(local, radix: 16) == port else { continue }
            if f[3] == "0A" { listening.insert(f[9]) } else { connected.insert(f[9]) }
        }
        let fdDir = "/proc/\(pid)/fd"
        func target(_ fd: Substring) -> String? { try? FileManager.default.destinationOfSymbolicLink(atPath: "\(fdDir)/\(fd)") }
        func inode(_ fd: Substring) -> Substring? {
            guard let t = target(fd), t.hasPrefix("socket:[") else { return nil }
            return Substring(t.dropFirst(8).dropLast())
        }
        var counts: [Int] = []
        for fd in try FileManager.default.contentsOfDirectory(atPath: fdDir) where target(Substring(fd)) == "anon_inode:[eventpoll]" {
            let info = try read("/proc/\(pid)/fdinfo/\(fd)")
            let watched = info.split(separator: "\n").filter { $0.hasPrefix("tfd:") }.compactMap { $0.split(separator: " ").dropFirst().first }
            let inodes = watched.compactMap(inode)
            if inodes.contains(where: listening.contains) { counts.append(inodes.filter(connected.contains).count) }
        }
        return counts.sorted(by: >)
    }
}

/// Everything one test needs: its own temp directory, and the processes it starts, which are
/// all killed (and the directory removed) by `cleanup()` — call it in a `defer` right after
/// creating the testbed; `deinit` does it too.
public final class Testbed: @unchecked Sendable {
    // @unchecked: `processes` and `cleanups` are only touched under `lock`; `dir` is immutable.
    public let dir: TemporaryDirectory
    private let lock = NSLock()
    private var processes: [SpawnedProcess] = []
    private var cleanups: [@Sendable () -> Void] = []

    public init() throws {
        dir = try TemporaryDirectory(prefix: "txgate-it")
    }

    deinit { cleanup() }

    public func cleanup() {
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
    public func onCleanup(_ body: @escaping @Sendable () -> Void) {
        lock.withLock { cleanups.append(body) }
    }

    /// Starts a process that `cleanup()` will kill.
    public func spawn(_ executable: URL, _ arguments: [String], name: String? = nil, directory: URL? = nil,
               environment: [String: String]? = nil, stopSignal: Int32? = nil) throws -> SpawnedProcess {
        let p = try SpawnedProcess(executable, arguments, name: name, directory: directory ?? dir.url, environment: environment,
                                   stopSignal: stopSignal)
        lock.lock()
        processes.append(p)
        lock.unlock()
        return p
    }

    /// Starts demo-bank on a free port (or `port`) with `arguments`, and waits until it accepts connections.
    public func startDemoBank(port fixed: Int? = nil, arguments: [String] = []) throws -> DemoBankInstance {
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
    public func writeConfig(_ config: [String: Any], name: String = "gateway.json") throws -> URL {
        let data = try JSONSerialization.data(withJSONObject: config, options: [.prettyPrinted, .sortedKeys])
        return try dir.write(name, data: data)
    }

    /// The configuration the tests start from: `listen` on `port`, one worker, `upstream`,
    /// access log on; `overrides` is merged in (nested objects merge key by key).
    public static func gatewayConfig(port: Int, upstream: String, overrides: [String: Any] = [:]) -> [String: Any] {
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
    public func startGateway(upstream: String, config overrides: [String: Any] = [:],
                      extraArguments: [String] = []) throws -> GatewayInstance {
        try startGateway(extraArguments: extraArguments) { Self.gatewayConfig(port: $0, upstream: upstream, overrides: overrides) }
    }

    /// Starts `txgate serve` with the configuration `config(port)`, on `port` (or a free one,
    /// retried if another process takes it first), from `directory` (default: the testbed's),
    /// and waits until it accepts connections. `launcher`: a command found on PATH, with its
    /// arguments, that runs txgate (`["taskset", "-c", "0"]`).
    public func startGateway(name: String = "txgate", port fixed: Int? = nil, directory: URL? = nil,
                      environment: [String: String]? = nil, extraArguments: [String] = [], launcher: [String] = [],
                      config build: (Int) -> [String: Any]) throws -> GatewayInstance {
        var binary = try BinaryLocator.txgate
        var prefix: [String] = []
        if let tool = launcher.first {
            guard let found = BinaryLocator.onPath(tool) else { throw HarnessError("\(tool) is not installed (not on PATH)") }
            prefix = launcher.dropFirst() + [binary.path]
            binary = found
        }
        var lastError: Error?
        for _ in 0..<(fixed == nil ? 3 : 1) {
            let port = try fixed ?? Ports.free()
            let config = build(port)
            let data = try JSONSerialization.data(withJSONObject: config, options: [.prettyPrinted, .sortedKeys])
            let url = (directory ?? dir.url).appendingPathComponent("gateway.json")
            try data.write(to: url)
            let p = try spawn(binary, prefix + ["serve", "--config", url.path] + extraArguments, name: name,
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
    public func startGatewayWithBank(config overrides: [String: Any] = [:]) throws -> (GatewayInstance, DemoBankInstance) {
        let bank = try startDemoBank()
        let gateway = try startGateway(upstream: bank.url, config: overrides)
        return (gateway, bank)
    }

    /// Like `startGateway`, but the config is built once the port is known, so it can hold the
    /// gateway's own URL (e.g. `publicUrl`, which login redirects and links are built from).
    /// `config` gets the base URL, `http://127.0.0.1:<port>`.
    public func startGateway(upstream: String, configForURL config: (String) -> [String: Any],
                      extraArguments: [String] = []) throws -> GatewayInstance {
        try startGateway(extraArguments: extraArguments) { port in
            Self.gatewayConfig(port: port, upstream: upstream, overrides: config("http://127.0.0.1:\(port)"))
        }
    }

    /// demo-bank, then txgate in front of it with a config that may name the gateway's own URL.
    public func startGatewayWithBank(configForURL config: (String) -> [String: Any]) throws -> (GatewayInstance, DemoBankInstance) {
        let bank = try startDemoBank()
        return (try startGateway(upstream: bank.url, configForURL: config), bank)
    }

    /// Runs `txgate <arguments>` to completion (`environment` is added to the test's own).
    public func runTxgate(_ arguments: [String], timeout: Double = 30, environment: [String: String]? = nil) throws -> CommandResult {
        try SpawnedProcess.run(try BinaryLocator.txgate, arguments, directory: dir.url, timeout: timeout, environment: environment)
    }

    /// Writes `text` to a file in the temp dir and runs `txgate check --config` on it.
    public func check(configText text: String, name: String = "check.json") throws -> CommandResult {
        let url = try dir.write(name, text)
        return try runTxgate(["check", "--config", url.path])
    }

    /// Runs a tool found on PATH (curl, openssl) to completion.
    public func runTool(_ name: String, _ arguments: [String], timeout: Double = 30) throws -> CommandResult {
        guard let tool = BinaryLocator.onPath(name) else { throw HarnessError("\(name) is not installed (not on PATH)") }
        return try SpawnedProcess.run(tool, arguments, directory: dir.url, timeout: timeout)
    }
}

/// Merges `b` into `a`; where both hold an object, they merge key by key.
public func deepMerge(_ a: [String: Any], _ b: [String: Any]) -> [String: Any] {
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
