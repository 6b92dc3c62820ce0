import Foundation
import Testing
import TxGateCore
import TestSupport

/// How many workers the gateway starts and where they run: the CPUs the process was given
/// (`taskset`, a container's cpuset), not every CPU of the machine; `cpuAffinity` pins them.
@Suite(.testbed) struct WorkerCPUTests {
    /// The process's worker threads (named `txgate-worker-N`) and the CPUs each may run on.
    static func workerThreads(of pid: Int32) throws -> [String: String] {
        var out: [String: String] = [:]
        for tid in try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") {
            let dir = "/proc/\(pid)/task/\(tid)"
            guard let name = try? String(contentsOfFile: dir + "/comm", encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines), name.hasPrefix("txgate-worker-"),
                let status = try? String(contentsOfFile: dir + "/status", encoding: .utf8),
                let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Cpus_allowed_list:") }) else { continue }
            out[name] = line.dropFirst("Cpus_allowed_list:".count).trimmingCharacters(in: .whitespaces)
        }
        return out
    }

    static func startedLine(_ g: GatewayInstance) -> [String: Any]? {
        g.logLines().first { $0["msg"] as? String == "txgate started" }
    }

    /// A gateway given one CPU of several by `taskset` starts one worker. It started one per
    /// CPU of the machine (Foundation's `activeProcessorCount`), all taking turns on that one.
    @Test(.timeLimit(.minutes(1)), .enabled(if: (CPUs.allowed?.count ?? 0) >= 2, "needs two CPUs or more"))
    func theDefaultWorkerCountIsTheCPUsTheProcessMayRunOn() throws {
        let bed = try Testbed.current
        let bank = try bed.startDemoBank()
        let cpu = try #require(CPUs.allowed?.last)
        let g = try bed.startGateway(launcher: ["taskset", "-c", "\(cpu)"]) { port in
            var config = Testbed.gatewayConfig(port: port, upstream: bank.url)
            config["workers"] = nil
            return config
        }
        Timing.poll(timeout: 5, interval: 0.05) { Self.startedLine(g) != nil }
        let started = try #require(Self.startedLine(g), "\(g.logText)")
        #expect(started["workers"] as? Int == 1, "\(started)")
        #expect(try Self.workerThreads(of: g.pid) == ["txgate-worker-0": "\(cpu)"])
        #expect(try g.fetch("GET", "/accounts").status == 200)
    }

    /// `cpuAffinity: "auto"`: worker i on the i-th CPU the process may use, said in its
    /// "listening" line; the threads are named for `top -H`.
    @Test(.timeLimit(.minutes(1)))
    func autoAffinityPinsEachWorkerToACPUOfItsOwn() throws {
        let bed = try Testbed.current
        let bank = try bed.startDemoBank()
        let allowed = try #require(CPUs.allowed)
        let g = try bed.startGateway(upstream: bank.url, config: ["workers": 2, "cpuAffinity": "auto"])
        let expected = ["txgate-worker-0": "\(allowed[0])", "txgate-worker-1": "\(allowed[1 % allowed.count])"]
        Timing.poll(timeout: 5, interval: 0.05) { (try? Self.workerThreads(of: g.pid)) == expected }
        #expect(try Self.workerThreads(of: g.pid) == expected)
        let listening = g.logLines().filter { $0["msg"] as? String == "listening" }
        #expect(listening.map { "\($0["worker"] ?? "-") on \($0["cpu"] ?? "-")" }.sorted()
            == ["0 on \(allowed[0])", "1 on \(allowed[1 % allowed.count])"])
        for _ in 0..<4 { #expect(try g.fetch("GET", "/accounts").status == 200) }
    }

    /// Without `cpuAffinity`, the workers run wherever the process may.
    @Test(.timeLimit(.minutes(1)))
    func withoutAffinityTheWorkersAreNotPinned() throws {
        let bed = try Testbed.current
        let bank = try bed.startDemoBank()
        let g = try bed.startGateway(upstream: bank.url, config: ["workers": 2])
        let all = try #require(try String(contentsOfFile: "/proc/\(g.pid)/status", encoding: .utf8)
            .split(separator: "\n").first { $0.hasPrefix("Cpus_allowed_list:") }?
            .dropFirst("Cpus_allowed_list:".count).trimmingCharacters(in: .whitespaces))
        Timing.poll(timeout: 5, interval: 0.05) { (try? Self.workerThreads(of: g.pid))?.count == 2 }
        #expect(try Self.workerThreads(of: g.pid) == ["txgate-worker-0": all, "txgate-worker-1": all])
        #expect(!g.logLines().contains { $0["msg"] as? String == "listening" && $0["cpu"] != nil })
    }
}
