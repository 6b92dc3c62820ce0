import CTxGateThread
import Foundation

/// The CPUs this process may use: how many workers it starts by default, and what
/// `cpuAffinity` pins them to.
///
/// As swift-nio's `System.coreCount` counts them: the CPUs of the process's affinity mask
/// (`taskset`, systemd's `CPUAffinity=`, a container's cpuset), fewer if its cgroup (or one above
/// it) has a CPU quota (`docker run --cpus 2`, a Kubernetes CPU limit: cgroup v2's `cpu.max`),
/// rounded up. Foundation's `activeProcessorCount` counts every CPU of the machine, so a gateway
/// given 2 of a host's 64 CPUs would start 64 workers that take turns on 2 of them.
public enum CPUs {
    /// The CPUs the process may run on at start-up, in increasing order; nil if the kernel
    /// would not say.
    public static let allowed: [Int]? = readAllowed()

    /// What the workers default to: the allowed CPUs, at most the cgroup quota, at least 1.
    public static let available: Int = count(
        allowed: allowed?.count ?? ProcessInfo.processInfo.activeProcessorCount,
        quota: cgroupQuota(cgroupFile: "/proc/self/cgroup", root: "/sys/fs/cgroup"))

    /// `allowed` CPUs, limited by a quota of `quota` CPUs (nil: none), at least 1.
    static func count(allowed: Int, quota: Double?) -> Int {
        var n = allowed
        if let quota { n = min(n, Int(quota.rounded(.up))) }
        return max(1, n)
    }

    static func readAllowed() -> [Int]? {
        var capacity = 256
        while true {
            var cpus = [Int32](repeating: 0, count: capacity)
            let n = Int(txgate_allowed_cpus(&cpus, Int32(capacity)))
            if n <= 0 { return nil }
            if n <= capacity { return cpus.prefix(n).map(Int.init) }
            capacity = n
        }
    }

    /// The smallest CPU quota (cgroup v2 `cpu.max`: quota / period, in CPUs) of the process's
    /// cgroup and each one above it up to `root`, or nil if none has one. `cgroupFile` is
    /// `/proc/self/cgroup`; under cgroup v1 (no `0::` line) there is no quota to read here.
    static func cgroupQuota(cgroupFile: String, root: String) -> Double? {
        guard let text = try? String(contentsOfFile: cgroupFile, encoding: .utf8),
              var path = unifiedCgroupPath(text) else { return nil }
        var lowest: Double?
        while true {
            let folder = path == "/" ? root : root + path
            if let max = try? String(contentsOfFile: folder + "/cpu.max", encoding: .utf8), let q = cpuMaxQuota(max) {
                lowest = min(lowest ?? q, q)
            }
            if path == "/" { return lowest }
            let parent = (path as NSString).deletingLastPathComponent
            path = parent.isEmpty ? "/" : parent
        }
    }

    /// The cgroup v2 path in `/proc/self/cgroup` (its `0::PATH` line), or nil under cgroup v1.
    static func unifiedCgroupPath(_ text: String) -> String? {
        for line in text.split(separator: "\n") where line.hasPrefix("0::") {
            let path = String(line.dropFirst(3))
            return path.hasPrefix("/") ? path : nil
        }
        return nil
    }

    /// `cpu.max`'s "QUOTA PERIOD" as CPUs, or nil for "max" (no limit) or anything unreadable.
    static func cpuMaxQuota(_ text: String) -> Double? {
        let parts = text.split(whereSeparator: \.isWhitespace)
        guard parts.count == 2, let quota = Double(parts[0]), let period = Double(parts[1]), quota > 0, period > 0 else {
            return nil
        }
        return quota / period
    }
}

/// `cpuAffinity`: whether each worker's thread is pinned to a CPU of its own.
public enum CPUAffinity: Sendable, Equatable {
    /// The scheduler places the workers (the default).
    case none
    /// Worker i runs on the i-th of the CPUs the process may use (modulo their count).
    case auto
    /// Worker i runs on the i-th CPU of this list (modulo its length).
    case cpus([Int])

    /// The CPU each of `workers` workers is pinned to, or nil when they are not pinned;
    /// `allowed`: the CPUs the process may run on (`auto` pins nothing without them, which the
    /// configuration refuses).
    public func plan(workers: Int, allowed: [Int]?) -> [Int]? {
        let list: [Int]
        switch self {
        case .none: return nil
        case .auto: list = allowed ?? []
        case .cpus(let cpus): list = cpus
        }
        guard !list.isEmpty else { return nil }
        return (0..<workers).map { list[$0 % list.count] }
    }

    /// The problems with a list of CPUs, each with its index: negative, repeated, or not one
    /// of `allowed` (when known).
    static func problems(in cpus: [Int], allowed: [Int]?) -> [(index: Int, message: String)] {
        var out: [(Int, String)] = []
        var seen = Set<Int>()
        for (i, cpu) in cpus.enumerated() {
            if cpu < 0 {
                out.append((i, "\(cpu) is not a CPU number"))
            } else if !seen.insert(cpu).inserted {
                out.append((i, "CPU \(cpu) is listed twice"))
            } else if let allowed, !allowed.contains(cpu) {
                out.append((i, "CPU \(cpu) is not one this process may run on (\(CPUAffinity.describe(allowed)))"))
            }
        }
        return out
    }

    /// "0-3,8": a list of CPU numbers in `taskset`'s notation.
    static func describe(_ cpus: [Int]) -> String {
        var ranges: [String] = []
        var i = 0
        let sorted = cpus.sorted()
        while i < sorted.count {
            var j = i
            while j + 1 < sorted.count && sorted[j + 1] == sorted[j] + 1 { j += 1 }
            ranges.append(i == j ? "\(sorted[i])" : "\(sorted[i])-\(sorted[j])")
            i = j + 1
        }
        return ranges.joined(separator: ",")
    }
}

/// What a thread does to itself: a name the kernel shows, a CPU of its own.
public enum CurrentThread {
    /// Names the calling thread for the kernel (`top -H`, `/proc/PID/task/TID/comm`), cut to 15
    /// bytes: Foundation's `Thread.name` does not reach it on Linux. A thread left unnamed (the
    /// call failed) works the same.
    public static func name(_ name: String) {
        _ = txgate_name_current_thread(name)
    }

    /// Restricts the calling thread to `cpu`. Returns 0, or the errno value that says why not.
    public static func pin(to cpu: Int) -> Int32 {
        txgate_pin_current_thread(Int32(cpu))
    }
}
