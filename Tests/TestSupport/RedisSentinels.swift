import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Real Redis Sentinels (`redis-sentinel`, or `redis-server --sentinel` where Debian's
/// redis-sentinel package is missing) watching one primary: three by default, quorum 2, each on
/// a free loopback port with its own config file in a folder under `parent`, and with short
/// timings so that a test's failover takes a second or two rather than Redis's default half
/// minute (`down-after-milliseconds` 500, `failover-timeout` 2000). Every process is killed by
/// `kill()` (call it in a `defer`) or by `deinit`.
public final class RedisSentinels: @unchecked Sendable {
    // @unchecked: `processes` is only touched under `lock`; the rest is set once in init.
    public static let masterName = "txgate-primary"
    public static let downAfterMs = 500
    public static let failoverTimeoutMs = 2000
    public static let quorum = 2

    public let ports: [Int]
    public let directory: URL
    private let lock = NSLock()
    private var processes: [SpawnedProcess] = []

    /// `redis+sentinel://127.0.0.1:<p1>,127.0.0.1:<p2>,.../<master>/0`, for `store.url`.
    public var url: String {
        "redis+sentinel://" + ports.map { "127.0.0.1:\($0)" }.joined(separator: ",") + "/\(Self.masterName)/0"
    }

    /// The executable and the arguments that make it a sentinel.
    static func binary() throws -> (URL, [String]) {
        let sentinel = URL(fileURLWithPath: "/usr/bin/redis-sentinel")
        if FileManager.default.isExecutableFile(atPath: sentinel.path) { return (sentinel, []) }
        guard RedisServer.isInstalled else {
            throw HarnessError("neither /usr/bin/redis-sentinel nor \(RedisServer.binary.path) is installed: apt-get install redis-server redis-sentinel")
        }
        return (RedisServer.binary, ["--sentinel"])
    }

    /// Starts `count` sentinels monitoring the primary on `primaryPort` (127.0.0.1) and waits
    /// until each of them knows the primary, the other sentinels and `replicas` replicas:
    /// before that a failover could not be agreed on, or would have no replica to promote.
    public static func start(in parent: URL, primaryPort: Int, replicas: Int, count: Int = 3,
                             timeout: Double = 20) throws -> RedisSentinels {
        let (executable, extra) = try binary()
        let dir = parent.appendingPathComponent("sentinels", isDirectory: true)
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        var ports: [Int] = []
        while ports.count < count {
            let p = try Ports.free()
            if !ports.contains(p) { ports.append(p) }
        }
        let sentinels = RedisSentinels(ports: ports, directory: dir)
        do {
            for port in ports {
                let own = dir.appendingPathComponent("sentinel-\(port)", isDirectory: true)
                try FileManager.default.createDirectory(at: own, withIntermediateDirectories: true)
                // Sentinel rewrites its config file (what it learned: replicas, other sentinels,
                // the current epoch), so each has its own, writable.
                let conf = own.appendingPathComponent("sentinel.conf")
                try """
                    port \(port)
                    bind 127.0.0.1
                    daemonize no
                    dir \(own.path)
                    sentinel monitor \(masterName) 127.0.0.1 \(primaryPort) \(quorum)
                    sentinel down-after-milliseconds \(masterName) \(downAfterMs)
                    sentinel failover-timeout \(masterName) \(failoverTimeoutMs)
                    sentinel parallel-syncs \(masterName) 1

                    """.write(to: conf, atomically: true, encoding: .utf8)
                let p = try SpawnedProcess(executable, [conf.path] + extra, name: "redis-sentinel-\(port)", directory: own)
                sentinels.lock.withLock { sentinels.processes.append(p) }
                try p.waitForPort(port, timeout: timeout)
            }
            let deadline = Timing.now() + timeout
            for port in ports {
                while true {
                    let state = try? sentinels.masterState(port: port)
                    if let state, state["num-other-sentinels"] == "\(count - 1)", Int(state["num-slaves"] ?? "") ?? 0 >= replicas { break }
                    if Timing.now() >= deadline {
                        throw HarnessError("sentinel on \(port) did not learn of the others and \(replicas) replica(s) within \(timeout) s: \(String(describing: state))")
                    }
                    Timing.sleep(0.05)
                }
            }
        } catch {
            sentinels.kill()
            throw error
        }
        return sentinels
    }

    private init(ports: [Int], directory: URL) {
        self.ports = ports
        self.directory = directory
    }

    deinit { kill() }

    /// SIGKILL every sentinel and reap. Safe to call more than once.
    public func kill() {
        let all = lock.withLock { () -> [SpawnedProcess] in
            defer { processes = [] }
            return processes
        }
        for p in all { p.kill() }
    }

    /// `SENTINEL master <name>` on the sentinel at `port`, as name -> value.
    public func masterState(port: Int) throws -> [String: String] {
        let c = try RESPClient(port: port, timeout: 2)
        defer { c.close() }
        guard case .array(let items) = try c.command(["SENTINEL", "master", Self.masterName]) else {
            throw HarnessError("SENTINEL master \(Self.masterName) on \(port): not an array")
        }
        var fields: [String: String] = [:]
        var i = 0
        while i + 1 < items.count {
            if case .bulk(let k) = items[i], case .bulk(let v) = items[i + 1] {
                fields[String(decoding: k, as: UTF8.self)] = String(decoding: v, as: UTF8.self)
            }
            i += 2
        }
        return fields
    }

    /// The primary's port as the sentinel at `port` names it (`SENTINEL get-master-addr-by-name`).
    public func primaryPort(askingSentinelAt port: Int) throws -> Int {
        let c = try RESPClient(port: port, timeout: 2)
        defer { c.close() }
        guard case .array(let items) = try c.command(["SENTINEL", "get-master-addr-by-name", Self.masterName]), items.count == 2,
              case .bulk(let p) = items[1], let n = Int(String(decoding: p, as: UTF8.self)) else {
            throw HarnessError("SENTINEL get-master-addr-by-name on \(port): no address")
        }
        return n
    }

    /// The sentinels' logs (for a failure message): each one's last lines.
    public var logs: String {
        lock.withLock { processes }.map { "--- \($0.name):\n" + $0.stdout.split(separator: "\n").suffix(15).joined(separator: "\n") }
            .joined(separator: "\n")
    }
}
