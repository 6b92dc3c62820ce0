import Foundation
import Testing
import TestSupport
import TxGate
@testable import TxGateCore

@Suite struct CPUsTests {
    /// `Cpus_allowed_list` of a `/proc/.../status` file ("0-3,8"), as CPU numbers.
    static func allowedList(status path: String) throws -> [Int] {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let line = try #require(text.split(separator: "\n").first { $0.hasPrefix("Cpus_allowed_list:") })
        var cpus: [Int] = []
        for part in line.dropFirst("Cpus_allowed_list:".count).trimmingCharacters(in: .whitespaces).split(separator: ",") {
            let bounds = part.split(separator: "-").compactMap { Int($0) }
            cpus += bounds.count == 2 ? Array(bounds[0]...bounds[1]) : bounds
        }
        return cpus
    }

    @Test func theAllowedCPUsAreTheKernelsMaskForTheProcess() throws {
        let allowed = try #require(CPUs.allowed)
        #expect(allowed == (try Self.allowedList(status: "/proc/self/status")))
        #expect(CPUs.available >= 1 && CPUs.available <= allowed.count)
    }

    @Test func aPinnedThreadRunsOnItsCPUOnly() async throws {
        let cpu = try #require(CPUs.allowed?.last)
        let seen = await withCheckedContinuation { (done: CheckedContinuation<(Int32, [Int]?, String?), Never>) in
            let t = Thread {
                CurrentThread.name("txgate-test-pinned-thread")
                let error = CurrentThread.pin(to: cpu)
                let list = try? Self.allowedList(status: "/proc/thread-self/status")
                let name = try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)
                done.resume(returning: (error, list, name))
            }
            t.start()
        }
        #expect(seen.0 == 0)
        #expect(seen.1 == [cpu])
        // Cut to the kernel's 15 bytes.
        #expect(seen.2 == "txgate-test-pin\n")
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

    @Test func theUnifiedCgroupPathIsTheZeroLine() {
        #expect(CPUs.unifiedCgroupPath("0::/system.slice/txgate.service\n") == "/system.slice/txgate.service")
        #expect(CPUs.unifiedCgroupPath("0::/\n") == "/")
        // cgroup v1, and a hybrid layout whose unified line comes last.
        #expect(CPUs.unifiedCgroupPath("12:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n") == nil)
        #expect(CPUs.unifiedCgroupPath("4:cpu,cpuacct:/x\n0::/user.slice\n") == "/user.slice")
    }

    @Test func theLowestQuotaOnTheWayUpTheHierarchyCounts() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let root = dir.path + "/cgroup"
        try FileManager.default.createDirectory(atPath: root + "/kubepods/pod1/box", withIntermediateDirectories: true)
        let cgroupFile = dir.path + "/cgroup-of-self"
        try "0::/kubepods/pod1/box\n".write(toFile: cgroupFile, atomically: true, encoding: .utf8)
        #expect(CPUs.cgroupQuota(cgroupFile: cgroupFile, root: root) == nil)

        try "max 100000\n".write(toFile: root + "/kubepods/pod1/box/cpu.max", atomically: true, encoding: .utf8)
        try "300000 100000\n".write(toFile: root + "/kubepods/pod1/cpu.max", atomically: true, encoding: .utf8)
        try "800000 100000\n".write(toFile: root + "/kubepods/cpu.max", atomically: true, encoding: .utf8)
        #expect(CPUs.cgroupQuota(cgroupFile: cgroupFile, root: root) == 3)

        try "50000 100000\n".write(toFile: root + "/kubepods/pod1/box/cpu.max", atomically: true, encoding: .utf8)
        #expect(CPUs.cgroupQuota(cgroupFile: cgroupFile, root: root) == 0.5)

        // Inside a cgroup namespace the process's cgroup is the root, whose cpu.max is the container's.
        try "0::/\n".write(toFile: cgroupFile, atomically: true, encoding: .utf8)
        try "200000 100000\n".write(toFile: root + "/cpu.max", atomically: true, encoding: .utf8)
        #expect(CPUs.cgroupQuota(cgroupFile: cgroupFile, root: root) == 2)
        #expect(CPUs.cgroupQuota(cgroupFile: dir.path + "/missing", root: root) == nil)
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

    @Test func aBadAffinityIsAnErrorThatNamesTheEntry() throws {
        let allowed = try #require(CPUs.allowed)
        let outside = allowed.max()! + 1
        #expect(errors(#""pinned""#) == [#"cpuAffinity: 'pinned' is not "none", "auto" or a list of CPU numbers"#])
        #expect(errors("[]") == [#"cpuAffinity: must be "none", "auto" or a non-empty list of CPU numbers"#])
        #expect(errors("2") == [#"cpuAffinity: must be "none", "auto" or a non-empty list of CPU numbers"#])
        #expect(errors("[\(allowed[0]), -1, \(allowed[0]), \(outside)]") == [
            "cpuAffinity[1]: -1 is not a CPU number",
            "cpuAffinity[2]: CPU \(allowed[0]) is listed twice",
            "cpuAffinity[3]: CPU \(outside) is not one this process may run on (\(CPUAffinity.describe(allowed)))",
        ])
    }
}
