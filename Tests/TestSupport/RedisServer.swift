import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A real redis-server for one test: loopback only, no persistence (`--save ''`,
/// `--appendonly no`), its working directory inside the test's temp dir.
///
/// The port is chosen once and kept: `kill()` then `start()` brings a new, empty Redis up on the
/// same address, which is what a gateway sees when its Redis crashes and is restarted. The
/// process is always killed: by `kill()` (call it in a `defer`) or by `deinit`.
public final class RedisServer: @unchecked Sendable {
    // @unchecked: the processes are only touched under `lock`; `ownFolder` is set once, before
    // the server is handed out.
    public static let binary = URL(fileURLWithPath: "/usr/bin/redis-server")

    public static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: binary.path) }

    public let port: Int
    /// Where redis-server runs (`--dir`) and writes its logs.
    public let directory: URL
    private let lock = NSLock()
    /// Added to redis-server's command line (`--requirepass`, `--replicaof`, ...).
    private let extraArguments: [String]
    /// Set when the server made its own folder (`start(arguments:)`), removed with it.
    private var ownFolder: TemporaryDirectory?
    private var current: SpawnedProcess?
    private var everStarted: [SpawnedProcess] = []

    /// `redis://127.0.0.1:<port>/0`, for `store.url`.
    public var url: String { "redis://127.0.0.1:\(port)/0" }

    /// The running process (nil once killed).
    public var process: SpawnedProcess? {
        lock.lock()
        defer { lock.unlock() }
        return current
    }

    private init(port: Int, directory: URL, arguments: [String]) {
        self.port = port
        self.directory = directory
        extraArguments = arguments
    }

    deinit {
        kill()
        ownFolder?.remove()
    }

    /// Starts redis-server on a free port in a temporary folder of its own, removed with the server.
    public static func start(arguments: [String] = [], timeout: Double = 15) throws -> RedisServer {
        let folder = try TemporaryDirectory(prefix: "txgate-redis")
        do {
            let server = try start(in: folder.url, arguments: arguments, timeout: timeout)
            server.ownFolder = folder
            return server
        } catch {
            folder.remove()
            throw error
        }
    }

    /// Starts redis-server on a free port (another one if that port was taken meanwhile) under
    /// `parent`, and waits until it answers PING.
    public static func start(in parent: URL, arguments: [String] = [], timeout: Double = 15) throws -> RedisServer {
        guard isInstalled else {
            throw HarnessError("\(binary.path) is missing: apt-get install redis-server (7.x)")
        }
        var lastError: Error?
        for _ in 0..<3 {
            let port = try Ports.free()
            let dir = parent.appendingPathComponent("redis-\(port)", isDirectory: true)
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            let server = RedisServer(port: port, directory: dir, arguments: arguments)
            do {
                try server.start(timeout: timeout)
                return server
            } catch {
                lastError = error
                server.kill()
            }
        }
        throw lastError!
    }

    /// Starts a fresh redis-server on `port` (after `kill()`), and waits until it answers PING.
    /// A port still held for a moment by the old process is retried until `timeout`.
    public func start(timeout: Double = 15) throws {
        lock.lock()
        let running = current?.isRunning ?? false
        lock.unlock()
        guard !running else { throw HarnessError("redis-server on port \(port) is already running") }
        let deadline = Timing.now() + timeout
        var attempt = 0
        while true {
            attempt += 1
            let p = try SpawnedProcess(Self.binary, [
                "--port", "\(port)", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", directory.path, "--daemonize", "no", "--protected-mode", "yes",
            ] + extraArguments, name: "redis-server", directory: directory)
            lock.lock()
            current = p
            everStarted.append(p)
            lock.unlock()
            while true {
                if Self.answers(port: port, timeout: 0.5) { return }
                if !p.isRunning { break }
                if Timing.now() >= deadline {
                    p.kill()
                    throw HarnessError("redis-server did not answer PING on port \(port) within \(timeout) s; its log:\n\(p.stdout.suffix(2000))\(p.stderrTail())")
                }
                Timing.sleep(0.02)
            }
            // It exited (most likely: the port was not free yet): try again until the deadline.
            let log = p.stdout.suffix(2000) + p.stderrTail()
            if Timing.now() >= deadline {
                throw HarnessError("redis-server exited (status \(p.exitStatus ?? -1)) on port \(port) after \(attempt) attempt(s); its log:\n\(log)")
            }
            Timing.sleep(0.2)
        }
    }

    /// SIGKILL (a crash: no shutdown, nothing saved) and reap. Safe to call more than once.
    public func kill() {
        lock.lock()
        let all = everStarted
        current = nil
        lock.unlock()
        for p in all { p.kill() }
    }

    /// SIGSTOP: the process keeps its sockets (connects still succeed, the kernel queues them)
    /// but answers nothing: a hung Redis.
    public func pause() { process?.signal(SIGSTOP) }

    /// SIGCONT after `pause()`.
    public func resume() { process?.signal(SIGCONT) }

    /// Whether the server answers PING with +PONG now.
    public func ping(timeout: Double = 1) -> Bool { Self.ping(port: port, timeout: timeout) }

    /// Sends `PING\r\n` on a fresh TCP connection and expects `+PONG`.
    public static func ping(port: Int, timeout: Double = 1) -> Bool {
        guard let c = try? RESPClient(port: port, timeout: timeout) else { return false }
        defer { c.close() }
        guard (try? c.sendRaw(Array("PING\r\n".utf8))) != nil, let line = try? c.readLine() else { return false }
        return line == "+PONG"
    }

    /// Whether something answers PING as Redis does: +PONG, or -NOAUTH when a password is required.
    static func answers(port: Int, timeout: Double) -> Bool {
        guard let c = try? RESPClient(port: port, timeout: timeout) else { return false }
        defer { c.close() }
        guard (try? c.sendRaw(Array("PING\r\n".utf8))) != nil, let line = try? c.readLine() else { return false }
        return line == "+PONG" || line.hasPrefix("-NOAUTH")
    }

    /// Runs several commands in order on one fresh connection (AUTH, SELECT, then the
    /// question) and returns every reply.
    public func commands(_ commands: [[String]], timeout: Double = 5) throws -> [RESPValue] {
        let c = try RESPClient(port: port, timeout: timeout)
        defer { c.close() }
        return try commands.map { try c.command($0) }
    }

    /// Runs one command on a fresh connection and returns its reply.
    public func command(_ arguments: [String], timeout: Double = 5) throws -> RESPValue {
        let c = try RESPClient(port: port, timeout: timeout)
        defer { c.close() }
        return try c.command(arguments)
    }

    /// One INFO section as name -> value (`INFO persistence`, `INFO replication`, ...).
    public func info(_ section: String) throws -> [String: String] {
        guard case .bulk(let bytes) = try command(["INFO", section]) else { throw HarnessError("INFO \(section): not a bulk string") }
        var fields: [String: String] = [:]
        for line in String(decoding: bytes, as: UTF8.self).split(whereSeparator: \.isNewline) {
            guard let colon = line.firstIndex(of: ":"), !line.hasPrefix("#") else { continue }
            fields[String(line[..<colon])] = String(line[line.index(after: colon)...])
        }
        return fields
    }

    /// BGSAVE, and waits until the snapshot is on disk (`dump.rdb` in `directory`).
    public func snapshot(timeout: Double = 15) throws {
        // The reply comes after the fork: from then on rdb_bgsave_in_progress is 1 until it is done.
        guard case .simple = try command(["BGSAVE"]) else { throw HarnessError("BGSAVE was refused") }
        let deadline = Timing.now() + timeout
        while Timing.now() < deadline {
            let p = try info("persistence")
            if p["rdb_bgsave_in_progress"] == "0" {
                guard p["rdb_last_bgsave_status"] == "ok" else { throw HarnessError("BGSAVE failed: \(p)") }
                return
            }
            Timing.sleep(0.05)
        }
        throw HarnessError("BGSAVE did not finish within \(timeout) s")
    }

    /// Every key in database 0 (KEYS *: fine for a test's few keys).
    public func keys() throws -> [String] {
        guard case .array(let items) = try command(["KEYS", "*"]) else { throw HarnessError("KEYS * did not answer an array") }
        return items.compactMap { if case .bulk(let b) = $0 { return String(decoding: b, as: UTF8.self) } else { return nil } }
    }

    /// The raw bytes of every string key's value, and for other types every string found by
    /// HGETALL / LRANGE / SMEMBERS / ZRANGE: what an attacker with a copy of the database sees.
    public func dumpValues() throws -> [(key: String, bytes: [UInt8])] {
        var out: [(key: String, bytes: [UInt8])] = []
        for key in try keys() {
            guard case .simple(let type) = try command(["TYPE", key]) else { continue }
            let reply: RESPValue
            switch type {
            case "string": reply = try command(["GET", key])
            case "hash": reply = try command(["HGETALL", key])
            case "list": reply = try command(["LRANGE", key, "0", "-1"])
            case "set": reply = try command(["SMEMBERS", key])
            case "zset": reply = try command(["ZRANGE", key, "0", "-1"])
            default: continue
            }
            for bytes in reply.allBulkStrings { out.append((key: key, bytes: bytes)) }
        }
        return out
    }
}

/// A RESP reply.
public indirect enum RESPValue: Equatable, CustomStringConvertible {
    case simple(String)
    case error(String)
    case integer(Int)
    case bulk([UInt8])
    case null
    case array([RESPValue])

    public var allBulkStrings: [[UInt8]] {
        switch self {
        case .bulk(let b): return [b]
        case .simple(let s): return [Array(s.utf8)]
        case .array(let items): return items.flatMap(\.allBulkStrings)
        default: return []
        }
    }

    public var description: String {
        switch self {
        case .simple(let s): return "+\(s)"
        case .error(let s): return "-\(s)"
        case .integer(let n): return ":\(n)"
        case .bulk(let b): return String(decoding: b, as: UTF8.self).debugDescription
        case .null: return "(nil)"
        case .array(let a): return "[" + a.map(\.description).joined(separator: ", ") + "]"
        }
    }
}

/// A minimal blocking RESP2 client, on RawHTTPClient's bounded socket and line reader.
public final class RESPClient {
    private let connection: RawHTTPClient
    public let port: Int

    public init(port: Int, timeout: Double) throws {
        self.port = port
        connection = try RawHTTPClient(port: port, timeout: timeout)
    }

    public func close() { connection.close() }

    public func sendRaw(_ bytes: [UInt8]) throws { try connection.send(bytes) }

    /// Sends `arguments` as a RESP array of bulk strings and reads the reply.
    public func command(_ arguments: [String]) throws -> RESPValue {
        var out = Array("*\(arguments.count)\r\n".utf8)
        for a in arguments {
            let bytes = Array(a.utf8)
            out += Array("$\(bytes.count)\r\n".utf8) + bytes + Array("\r\n".utf8)
        }
        try sendRaw(out)
        return try readValue()
    }

    public func readLine() throws -> String { try connection.readLine() }

    private func readExactly(_ n: Int) throws -> [UInt8] { try connection.readExactly(n) }

    public func readValue() throws -> RESPValue {
        let line = try readLine()
        guard let kind = line.first else { throw SocketFailure.system("empty RESP line") }
        let rest = String(line.dropFirst())
        switch kind {
        case "+": return .simple(rest)
        case "-": return .error(rest)
        case ":":
            guard let n = Int(rest) else { throw SocketFailure.system("bad RESP integer \(line.debugDescription)") }
            return .integer(n)
        case "$":
            guard let n = Int(rest) else { throw SocketFailure.system("bad RESP bulk length \(line.debugDescription)") }
            if n < 0 { return .null }
            let bytes = try readExactly(n)
            _ = try readExactly(2)
            return .bulk(bytes)
        case "*":
            guard let n = Int(rest) else { throw SocketFailure.system("bad RESP array length \(line.debugDescription)") }
            if n < 0 { return .null }
            return .array(try (0..<n).map { _ in try readValue() })
        default:
            throw SocketFailure.system("unknown RESP type in \(line.debugDescription)")
        }
    }
}
