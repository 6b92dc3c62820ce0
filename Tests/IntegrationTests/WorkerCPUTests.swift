import Foundation
import Testing
import TxGateCore
import TestSupport

/// How many workers the gateway starts and where they run: the CPUs the process was given
/// (`taskset`, a container's cpuset, a cgroup quota), not every CPU of the machine;
/// `cpuAffinity` pins them.
@Suite(.testbed) struct WorkerCPUTests {
    /// Each thread of the process: its name and the CPUs it may run on (`Cpus_allowed_list`).
    static func threads(of pid: Int32) throws -> [(name: String, cpus: String)] {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task").compactMap { tid in
            let dir = "/proc/\(pid)/task/\(tid)"
            guard let name = try? String(contentsOfFile: dir + "/comm", encoding: .utf8),
                  let cpus = ProcStatus.cpus(dir + "/status") else { return nil }
            return (name.trimmingCharacters(in: .whitespacesAndNewlines), cpus)
        }
    }

    /// The CPUs each worker thread (`txgate-worker`) may run on, sorted.
    static func workerCPUs(of pid: Int32) throws -> [String] {
        try threads(of: pid).filter { $0.name == "txgate-worker" }.map(\.cpus).sorted()
    }

    /// The process's own CPUs (its main thread's).
    static func processCPUs(of pid: Int32) throws -> String {
        try #require(ProcStatus.cpus("/proc/\(pid)/status"))
    }

    static func startedLine(_ g: GatewayInstance) -> [String: Any]? {
        g.logLines().first { $0["msg"] as? String == "txgate started" }
    }

    /// The gateway, with no `workers` in its file, started through `launcher` in front of a
    /// demo-bank: it serves, and its "txgate started" line says how many workers it started.
    static func startCountingWorkers(_ bed: Testbed, launcher: [String], environment: [String: String]? = nil) throws
        -> (gateway: GatewayInstance, workers: Int?) {
        let bank = try bed.startDemoBank()
        let g = try bed.startGateway(environment: environment, launcher: launcher) { port in
            var config = Testbed.gatewayConfig(port: port, upstream: bank.url)
            config["workers"] = nil
            return config
        }
        Timing.poll(timeout: 5, interval: 0.05) { startedLine(g) != nil }
        let started = try #require(startedLine(g), "\(g.logText)")
        #expect(try g.fetch("GET", "/accounts").status == 200)
        return (g, started["workers"] as? Int)
    }

    /// A gateway given one CPU of several by `taskset` starts one worker. It started one per
    /// CPU of the machine (Foundation's `activeProcessorCount`), all taking turns on that one.
    @Test(.timeLimit(.minutes(1)), .enabled(if: (CPUs.allowed?.count ?? 0) >= 2 && BinaryLocator.onPath("taskset") != nil,
                                            "needs two CPUs or more, and taskset"))
    func theDefaultWorkerCountIsTheCPUsTheProcessMayRunOn() throws {
        let cpu = try #require(CPUs.allowed?.last)
        let (g, workers) = try Self.startCountingWorkers(try Testbed.current, launcher: ["taskset", "-c", "\(cpu)"])
        #expect(workers == 1)
        #expect(try Self.workerCPUs(of: g.pid) == ["\(cpu)"])
    }

    /// A CPU controller this test may make a cgroup under (root, cgroup v1's `cpu` hierarchy or
    /// v2 with `cpu` enabled for its children), and the file and text that set a quota of one
    /// CPU. Empty cgroups an interrupted run left behind are removed on the way.
    static let cpuController: (folder: String, file: String, oneCPU: String)? = {
        let v2 = "/sys/fs/cgroup"
        let candidates: [(String, String, String)] = [
            ("/sys/fs/cgroup/cpu", "cpu.cfs_quota_us", "100000"), ("/sys/fs/cgroup/cpu,cpuacct", "cpu.cfs_quota_us", "100000"),
        ] + ((try? String(contentsOfFile: v2 + "/cgroup.subtree_control", encoding: .utf8))?
            .split(whereSeparator: \.isWhitespace).contains("cpu") == true ? [(v2, "cpu.max", "100000 100000")] : [])
        for (folder, file, text) in candidates {
            for stale in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] where stale.hasPrefix("txgate-test-") {
                rmdir(folder + "/" + stale)
            }
            let probe = folder + "/txgate-test-probe-\(getpid())"
            guard mkdir(probe, 0o755) == 0 else { continue }
            let usable = FileManager.default.fileExists(atPath: probe + "/" + file)
            rmdir(probe)
            if usable { return (folder, file, text) }
        }
        return nil
    }()

    /// A new cgroup under `cpuController` with a quota of one CPU, removed when the test's bed
    /// is cleaned up.
    static func oneCPUCgroup(_ bed: Testbed) throws -> String {
        let controller = try #require(cpuController)
        let cgroup = controller.folder + "/txgate-test-\(getpid())-\(UUID().uuidString.prefix(8))"
        #expect(mkdir(cgroup, 0o755) == 0)
        bed.onCleanup {
            // The gateway has been killed by now; its cgroup goes once the kernel has let go of it.
            _ = Timing.poll(timeout: 5, interval: 0.05) { rmdir(cgroup) == 0 || errno == ENOENT }
        }
        try controller.oneCPU.write(toFile: cgroup + "/" + controller.file, atomically: false, encoding: .utf8)
        return cgroup
    }

    /// A gateway in a cgroup with a quota of one CPU (`docker run --cpus 1`, systemd's
    /// `CPUQuota=100%`) starts one worker, on a machine with more CPUs.
    @Test(.timeLimit(.minutes(1)), .enabled(if: (CPUs.allowed?.count ?? 0) >= 2 && Self.cpuController != nil,
                                            "needs two CPUs or more, and a cgroup CPU controller to make a cgroup under (root)"))
    func aCgroupCPUQuotaLimitsTheDefaultWorkerCount() throws {
        let bed = try Testbed.current
        let cgroup = try Self.oneCPUCgroup(bed)
        // The shell moves itself into the cgroup, then becomes txgate.
        let (_, workers) = try Self.startCountingWorkers(
            bed, launcher: ["sh", "-c", #"echo $$ > "$TXGATE_TEST_CGROUP/cgroup.procs" && exec "$0" "$@""#],
            environment: ["TXGATE_TEST_CGROUP": cgroup])
        #expect(workers == 1)
    }

    /// The same quota, where the hierarchy's mount is listed past the first 4 KiB of
    /// /proc/self/mountinfo, as in a container whose overlay root's line names many layers.
    /// Foundation's `Data(contentsOf:)` reads a /proc file only that far: the quota went unseen
    /// and the gateway started a worker for each CPU. The shell, in a mount namespace of its
    /// own, mounts 40 tmpfs, mounts the hierarchy again after them and drops its first mount,
    /// then becomes txgate.
    @Test(.timeLimit(.minutes(1)), .enabled(if: (CPUs.allowed?.count ?? 0) >= 2 && Self.cpuController != nil && Self.mayRemount,
                                            "needs two CPUs or more, a cgroup CPU controller to make a cgroup under (root), and a mount namespace to remount it in"))
    func aQuotaListedPastTheFirst4KiBOfMountinfoCounts() throws {
        let bed = try Testbed.current
        let controller = try #require(Self.cpuController)
        let cgroup = try Self.oneCPUCgroup(bed)
        let script = #"""
            set -e
            echo $$ > "$TXGATE_TEST_CGROUP/cgroup.procs"
            for i in $(seq 1 40); do
              d="$TXGATE_TEST_MOUNTS/a-mount-with-a-long-name-that-makes-mountinfo-longer-than-four-KiB-$i"
              mkdir -p "$d" && mount -t tmpfs txgate-test "$d"
            done
            mkdir -p "$TXGATE_TEST_MOUNTS/controller"
            mount --bind "$TXGATE_TEST_CONTROLLER" "$TXGATE_TEST_MOUNTS/controller"
            umount -l "$TXGATE_TEST_CONTROLLER"
            exec "$0" "$@"
            """#
        let (g, workers) = try Self.startCountingWorkers(
            bed, launcher: ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
            environment: ["TXGATE_TEST_CGROUP": cgroup, "TXGATE_TEST_CONTROLLER": controller.folder,
                          "TXGATE_TEST_MOUNTS": bed.dir.file("mounts").path])
        // The gateway saw what this test meant it to: its hierarchy mounted only past 4 KiB.
        let mountinfo = try #require(ProcStatus.read("/proc/\(g.pid)/mountinfo"))
        let controllerLine = try #require(mountinfo.split(separator: "\n").first { $0.contains(" \(bed.dir.file("mounts").path)/controller ") })
        #expect(mountinfo.utf8.distance(from: mountinfo.utf8.startIndex, to: controllerLine.utf8.startIndex) > 4096)
        #expect(workers == 1)
    }

    /// Whether this process may make a mount namespace and unmount the CPU controller in it
    /// (root outside a container that forbids it, and `unshare`).
    static let mayRemount: Bool = {
        guard let controller = cpuController, let unshare = BinaryLocator.onPath("unshare") else { return false }
        let r = try? SpawnedProcess.run(unshare, ["--mount", "--propagation", "private", "umount", "-l", controller.folder],
                                        directory: BinaryLocator.packageRoot, timeout: 10)
        return r?.status == 0
    }()

    /// `cpuAffinity: "auto"`: worker i on the i-th CPU the process may use, said in its
    /// "listening" line. The threads a pinned worker hands work to (password hashing here) run
    /// on every CPU: a pool thread started by a worker inherited its one CPU, and kept it.
    @Test(.timeLimit(.minutes(1)), .enabled(if: (CPUs.allowed?.count ?? 0) >= 2, "needs two CPUs or more"))
    func autoAffinityPinsEachWorkerAndNothingElse() throws {
        let bed = try Testbed.current
        let bank = try bed.startDemoBank()
        let allowed = try #require(CPUs.allowed)
        let g = try bed.startGateway(upstream: bank.url, config: TransactionKit.config(["workers": 2, "cpuAffinity": "auto"]))
        let expected = ["\(allowed[0])", "\(allowed[1])"].sorted()
        Timing.poll(timeout: 5, interval: 0.05) { (try? Self.workerCPUs(of: g.pid)) == expected }
        #expect(try Self.workerCPUs(of: g.pid) == expected)
        let listening = g.logLines().filter { $0["msg"] as? String == "listening" }
        #expect(listening.map { "\($0["worker"] ?? "-") on \($0["cpu"] ?? "-")" }.sorted() == ["0 on \(allowed[0])", "1 on \(allowed[1])"])

        // Two logins, on each worker (connections go to the one holding fewest), hash passwords.
        for _ in 0..<2 { _ = try TransactionKit.login(g) }
        let all = try Self.processCPUs(of: g.pid)
        let others = try Self.threads(of: g.pid).filter { $0.name != "txgate-worker" }
        #expect(others.count > 1, "\(others)")
        #expect(others.filter { $0.cpus != all }.map { "\($0.name) on \($0.cpus)" } == [])
    }

    /// Without `cpuAffinity`, the workers run wherever the process may.
    @Test(.timeLimit(.minutes(1)))
    func withoutAffinityTheWorkersAreNotPinned() throws {
        let bed = try Testbed.current
        let bank = try bed.startDemoBank()
        let g = try bed.startGateway(upstream: bank.url, config: ["workers": 2])
        let all = try Self.processCPUs(of: g.pid)
        Timing.poll(timeout: 5, interval: 0.05) { (try? Self.workerCPUs(of: g.pid))?.count == 2 }
        #expect(try Self.workerCPUs(of: g.pid) == [all, all])
        #expect(!g.logLines().contains { $0["msg"] as? String == "listening" && $0["cpu"] != nil })
    }
}
