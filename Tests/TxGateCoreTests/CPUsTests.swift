import Foundation
import Testing
import TestSupport
import TxGate
@testable import TxGateCore

@Suite struct CPUsTests {
    /// The CPUs a `/proc/.../status` file allows, as CPU numbers.
    static func allowedList(status path: String) throws -> [Int] {
        ProcStatus.numbers(try #require(ProcStatus.cpus(path)))
    }

    @Test func theAllowedCPUsAreTheKernelsMaskForTheProcess() throws {
        let allowed = try #require(CPUs.allowed)
        #expect(allowed == (try Self.allowedList(status: "/proc/self/status")))
        #expect(CPUs.available >= 1 && CPUs.available <= allowed.count)
    }

    @Test func aPinnedThreadRunsOnItsCPUOnlyUntilUnpinned() async throws {
        let allowed = try #require(CPUs.allowed)
        let cpu = try #require(allowed.last)
        let seen = await withCheckedContinuation { (done: CheckedContinuation<(Int32, [Int]?, String?, [Int]?), Never>) in
            let t = Thread {
                CurrentThread.name("txgate-test-pinned-thread")
                let error = CurrentThread.pin(to: cpu)
                let pinned = try? Self.allowedList(status: "/proc/thread-self/status")
                let name = try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)
                CurrentThread.unpin()
                done.resume(returning: (error, pinned, name, try? Self.allowedList(status: "/proc/thread-self/status")))
            }
            t.start()
        }
        #expect(seen.0 == 0)
        #expect(seen.1 == [cpu])
        // Cut to the kernel's 15 bytes.
        #expect(seen.2 == "txgate-test-pin\n")
        #expect(seen.3 == allowed)
    }

    @Test func aCPUTheProcessMayNotUseCannotBePinnedTo() async {
        let error = await withCheckedContinuation { (done: CheckedContinuation<Int32, Never>) in
            Thread { done.resume(returning: CurrentThread.pin(to: 1 << 16)) }.start()
        }
        #expect(error == EINVAL)
    }

    @Test func theQuotaLimitsTheCountRoundedUp() {
        #expect(CPUs.count(allowed: 8, quota: nil) == 8)
        #expect(CPUs.count(allowed: 8, quota: 1.5) == 2)
        #expect(CPUs.count(allowed: 8, quota: 0.1) == 1)
        #expect(CPUs.count(allowed: 2, quota: 16) == 2)
        #expect(CPUs.count(allowed: 0, quota: nil) == 1)
    }

    @Test func cpuMaxIsReadAsCPUs() {
        #expect(CPUs.cpuMaxQuota("max 100000\n") == nil)
        #expect(CPUs.cpuMaxQuota("200000 100000\n") == 2)
        #expect(CPUs.cpuMaxQuota("150000 100000") == 1.5)
        #expect(CPUs.cpuMaxQuota("") == nil)
        #expect(CPUs.cpuMaxQuota("0 100000") == nil)
        #expect(CPUs.cpuMaxQuota("100000") == nil)
    }

    @Test func cfsQuotaIsReadAsCPUs() {
        #expect(CPUs.cfsQuota("-1\n", period: "100000\n") == nil)
        #expect(CPUs.cfsQuota("150000\n", period: "100000\n") == 1.5)
        #expect(CPUs.cfsQuota("", period: "100000") == nil)
        #expect(CPUs.cfsQuota("50000", period: "") == nil)
    }

    /// /proc files say their size is 0; Foundation's `Data(contentsOf:)` then reads their first
    /// 4 KiB only. This process's memory map is longer than that, and its stack, near the top
    /// of the address space, comes near its end.
    @Test func aProcFileIsReadToItsEnd() {
        let maps = CPUs.read("/proc/self/maps")
        #expect(maps.utf8.count > 4096)
        #expect(maps.contains("[stack]"), "\(maps.utf8.count) bytes, no [stack] line")
        #expect(maps.hasSuffix("\n"))
        #expect(CPUs.read("/proc/self/no-such-file") == "")
    }

    @Test func mountinfoSaysWhereEachHierarchyIs() {
        let info = """
            31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
            32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct
            33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
            41 31 0:38 /docker/abc /sys/fs/cgroup/my\\040unified rw,relatime - cgroup2 cgroup2 rw
            """
        #expect(CPUs.cgroupMount(info, type: "cgroup", option: "cpu", path: "/a")! == (point: "/sys/fs/cgroup/cpu,cpuacct", root: "/"))
        #expect(CPUs.cgroupMount(info, type: "cgroup2", option: nil, path: "/docker/abc/x")!
            == (point: "/sys/fs/cgroup/my unified", root: "/docker/abc"))
        #expect(CPUs.cgroupMount(info, type: "cgroup", option: "memory", path: "/") == nil)
        // A mount whose root does not hold the process's cgroup (it was moved elsewhere) says nothing.
        #expect(CPUs.cgroupMount(info, type: "cgroup2", option: nil, path: "/other") == nil)
    }

    @Test func ofSeveralMountsTheClosestRootAndThenTheLastListedCounts() {
        let info = """
            50 31 0:29 / /host-view rw - cgroup2 cgroup2 rw
            51 31 0:29 /kubepods /pods-view rw - cgroup2 cgroup2 rw
            52 31 0:29 /kubepods /pods-view-on-top rw - cgroup2 cgroup2 rw
            53 31 0:29 /elsewhere /unrelated rw - cgroup2 cgroup2 rw
            """
        #expect(CPUs.cgroupMount(info, type: "cgroup2", option: nil, path: "/kubepods/pod1")!
            == (point: "/pods-view-on-top", root: "/kubepods"))
        #expect(CPUs.cgroupMount(info, type: "cgroup2", option: nil, path: "/system.slice")! == (point: "/host-view", root: "/"))
        // The namespace began below the mount (`unshare -C`): its point, an ancestor, is all there is.
        let unshared = "60 31 0:29 /.. /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
        #expect(CPUs.cgroupMount(unshared, type: "cgroup2", option: nil, path: "/")! == (point: "/sys/fs/cgroup", root: "/.."))
        var read: [String] = []
        _ = CPUs.lowestQuota(path: "/", mount: (point: "/sys/fs/cgroup", root: "/..")) { read.append($0); return nil }
        #expect(read == ["/sys/fs/cgroup"])
        read = []
        #expect(CPUs.lowestQuota(path: "/other", mount: (point: "/m", root: "/docker/abc")) { read.append($0); return 1 } == nil)
        #expect(read == [])
    }

    /// A cgroup tree under a temporary folder, mounted (as mountinfo says) at `point`.
    struct FakeHierarchy {
        let dir: TemporaryDirectory
        func write(_ path: String, _ text: String) throws {
            let file = dir.path + path
            try FileManager.default.createDirectory(atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try text.write(toFile: file, atomically: true, encoding: .utf8)
        }
        /// cgroup v1's quota and period in `folder`.
        func writeCFS(_ folder: String, quota: Int, period: Int = 100_000) throws {
            try write(folder + "/cpu.cfs_quota_us", "\(quota)\n")
            try write(folder + "/cpu.cfs_period_us", "\(period)\n")
        }
    }

    @Test func theLowestQuotaOnTheWayUpTheUnifiedHierarchyCounts() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let tree = FakeHierarchy(dir: dir)
        let info = "41 31 0:38 / \(dir.path)/v2 rw,relatime - cgroup2 cgroup2 rw\n"
        let cgroups = "0::/kubepods/pod1/box\n"
        try FileManager.default.createDirectory(atPath: dir.path + "/v2/kubepods/pod1/box", withIntermediateDirectories: true)
        #expect(CPUs.cgroupQuota(cgroups: cgroups, mountInfo: info) == nil)

        try tree.write("/v2/kubepods/pod1/box/cpu.max", "max 100000\n")
        try tree.write("/v2/kubepods/pod1/cpu.max", "300000 100000\n")
        try tree.write("/v2/kubepods/cpu.max", "800000 100000\n")
        #expect(CPUs.cgroupQuota(cgroups: cgroups, mountInfo: info) == 3)
        try tree.write("/v2/kubepods/pod1/box/cpu.max", "50000 100000\n")
        #expect(CPUs.cgroupQuota(cgroups: cgroups, mountInfo: info) == 0.5)

        // Inside a cgroup namespace the process's cgroup is the root, whose cpu.max is the container's.
        try tree.write("/v2/cpu.max", "200000 100000\n")
        #expect(CPUs.cgroupQuota(cgroups: "0::/\n", mountInfo: info) == 2)
        // No cgroup2 mount: nothing to read.
        #expect(CPUs.cgroupQuota(cgroups: cgroups, mountInfo: "") == nil)
    }

    @Test func theV1CPUControllerCountsOnOlderAndHybridHosts() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let tree = FakeHierarchy(dir: dir)
        // A container that mounts its own part of the host's hierarchy (root /docker/abc),
        // beside an empty unified hierarchy (a hybrid host).
        let info = """
            32 31 0:29 /docker/abc \(dir.path)/cpu,cpuacct ro,relatime - cgroup cgroup rw,cpu,cpuacct
            33 31 0:30 /docker/abc \(dir.path)/memory ro,relatime - cgroup cgroup rw,memory
            41 31 0:38 / \(dir.path)/unified rw,relatime - cgroup2 cgroup2 rw
            """
        let cgroups = "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n0::/\n"
        try tree.writeCFS("/cpu,cpuacct", quota: 250_000)
        try tree.writeCFS("/memory", quota: 10_000)
        #expect(CPUs.cgroupQuota(cgroups: cgroups, mountInfo: info) == 2.5)
        // The same hierarchy seen from the host: the container's cgroup under the mount point.
        let host = "32 31 0:29 / \(dir.path)/host rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
        try tree.writeCFS("/host/docker/abc", quota: -1)
        try tree.writeCFS("/host/docker", quota: 100_000)
        #expect(CPUs.cgroupQuota(cgroups: cgroups, mountInfo: host) == 1)
    }

    @Test func affinityPlansACPUPerWorker() {
        #expect(CPUAffinity.none.plan(workers: 4, allowed: [0, 1]) == nil)
        #expect(CPUAffinity.auto.plan(workers: 3, allowed: [2, 5]) == [2, 5, 2])
        #expect(CPUAffinity.auto.plan(workers: 2, allowed: nil) == nil)
        #expect(CPUAffinity.cpus([7, 3]).plan(workers: 3, allowed: [0]) == [7, 3, 7])
        #expect(CPUAffinity.describe([8, 0, 1, 2, 3, 10, 11]) == "0-3,8,10-11")
    }

    func decode(_ affinity: String) -> Result<GatewayConfig, ConfigErrors> {
        let json = #"{"upstream": {"url": "http://a"}, "cpuAffinity": "# + affinity + "}"
        do { return .success(try ConfigLoader.decode(Data(json.utf8), folder: "/tmp")) } catch { return .failure(error) }
    }

    func errors(_ affinity: String) -> [String] {
        if case .failure(let e) = decode(affinity) { return e.errors.map(\.description) }
        return []
    }

    @Test func theConfigurationTakesNoneAutoOrAList() throws {
        let allowed = try #require(CPUs.allowed)
        #expect(try decode(#""none""#).get().cpuAffinity == CPUAffinity.none)
        #expect(try decode(#""auto""#).get().cpuAffinity == .auto)
        #expect(try decode("[\(allowed[0])]").get().cpuAffinity == .cpus([allowed[0]]))
        #expect(try ConfigLoader.decode(Data(#"{"upstream": {"url": "http://a"}}"#.utf8), folder: "/tmp").cpuAffinity == CPUAffinity.none)
    }

    @Test func moreWorkersThanPinnedCPUsIsAWarning() throws {
        var c = try ConfigLoader.decode(Data(#"{"upstream": {"url": "http://a"}, "workers": 3}"#.utf8), folder: "/tmp")
        #expect(c.cpusShared(allowed: [0, 1]) == nil)
        c.cpuAffinity = .auto
        #expect(c.cpusShared(allowed: [0, 1, 2, 3]) == nil)
        #expect(c.cpusShared(allowed: [0, 1])
            == "cpuAffinity pins 3 workers to 2 CPUs: some take turns on one CPU; set workers to 2")
        c.cpuAffinity = .cpus([5])
        #expect(c.cpusShared(allowed: [0, 1])
            == "cpuAffinity pins 3 workers to 1 CPU: some take turns on one CPU; set workers to 1, or list more CPUs")
    }

    @Test func aBadAffinityIsAnErrorThatNamesTheEntry() throws {
        let allowed = try #require(CPUs.allowed)
        let outside = allowed.max()! + 1
        #expect(errors(#""pinned""#) == [#"cpuAffinity: 'pinned' is not "none", "auto" or a list of CPU numbers"#])
        #expect(errors("[]") == [#"cpuAffinity: must be "none", "auto" or a non-empty list of CPU numbers"#])
        #expect(errors("2") == [#"cpuAffinity: must be "none", "auto" or a non-empty list of CPU numbers"#])
        #expect(errors("[3000000000]") == ["cpuAffinity[0]: 3000000000 is not a CPU number"])
        #expect(errors("[\(allowed[0]), -1, \(allowed[0]), \(outside)]") == [
            "cpuAffinity[1]: -1 is not a CPU number",
            "cpuAffinity[2]: CPU \(allowed[0]) is listed twice",
            "cpuAffinity[3]: CPU \(outside) is not one this process may run on (\(CPUAffinity.describe(allowed)))",
        ])
    }
}
