import CTxGateThread
import Foundation

/// The CPUs this process may use: how many workers it starts by default, and what
/// `cpuAffinity` pins them to.
///
/// As swift-nio's `System.coreCount` counts them: the CPUs of the process's affinity mask
/// (`taskset`, systemd's `CPUAffinity=`, a container's cpuset), fewer if its cgroup (or one above
/// it) has a CPU quota (`docker run --cpus 2`, a Kubernetes CPU limit, systemd's `CPUQuota=`:
/// cgroup v2's `cpu.max`, v1's `cpu.cfs_quota_us`), rounded up. Foundation's
/// `activeProcessorCount` counts every CPU of the machine, so a gateway given 2 of a host's 64
/// CPUs would start 64 workers that take turns on 2 of them.
public enum CPUs {
    /// The CPUs the process may run on at start-up, in increasing order; nil if the kernel
    /// would not say.
    public static let allowed: [Int]? = readAllowed()

    /// What the workers default to: the allowed CPUs, at most the cgroup quota, at least 1.
    public static let available: Int = count(
        allowed: allowed?.count ?? ProcessInfo.processInfo.activeProcessorCount,
        quota: cgroupQuota(cgroups: read("/proc/self/cgroup"), mountInfo: read("/proc/self/mountinfo")))

    /// `allowed` CPUs, limited by a quota of `quota` CPUs (nil: none), at least 1.
    static func count(allowed: Int, quota: Double?) -> Int {
        var n = allowed
        if let quota { n = min(n, Int(quota.rounded(.up))) }
        return max(1, n)
    }

    /// The file's text, "" if it cannot be read. Not UTF-8 strictly: mountinfo writes a mount
    /// point's bytes as they are, and one that is not UTF-8 must not hide the others. Read to
    /// its end: `Data(contentsOf:)` reads a file whose size the kernel gives as 0 (all of
    /// /proc) only up to its first 4 KiB, and a container's mountinfo is often longer (its
    /// overlay root's line names every layer), with the cgroup mounts after that.
    static func read(_ path: String) -> String {
        guard let file = FileHandle(forReadingAtPath: path) else { return "" }
        defer { try? file.close() }
        return String(decoding: (try? file.readToEnd()) ?? Data(), as: UTF8.self)
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

    /// The smallest CPU quota, in CPUs, of the process's cgroup and each one above it, or nil
    /// if none has one. `cgroups` is `/proc/self/cgroup`'s text and `mountInfo`
    /// `/proc/self/mountinfo`'s, which says where each hierarchy is mounted. cgroup v2: `cpu.max`
    /// ("QUOTA PERIOD", or "max"); v1 (older hosts, and hybrid ones): the `cpu` controller's
    /// `cpu.cfs_quota_us` (-1: none) over `cpu.cfs_period_us`. Both are read where both exist.
    static func cgroupQuota(cgroups: String, mountInfo: String) -> Double? {
        var lowest: Double?
        func take(_ q: Double?) { if let q { lowest = min(lowest ?? q, q) } }
        for line in cgroups.split(separator: "\n") {
            // ID:CONTROLLERS:PATH; the unified (v2) hierarchy's line is 0::PATH.
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3, fields[2].hasPrefix("/") else { continue }
            let path = String(fields[2])
            if fields[0] == "0" && fields[1].isEmpty {
                guard let mount = cgroupMount(mountInfo, type: "cgroup2", option: nil, path: path) else { continue }
                take(lowestQuota(path: path, mount: mount) { folder in
                    cpuMaxQuota(read(folder + "/cpu.max"))
                })
            } else if fields[1].split(separator: ",").contains("cpu") {
                guard let mount = cgroupMount(mountInfo, type: "cgroup", option: "cpu", path: path) else { continue }
                take(lowestQuota(path: path, mount: mount) { folder in
                    cfsQuota(read(folder + "/cpu.cfs_quota_us"), period: read(folder + "/cpu.cfs_period_us"))
                })
            }
        }
        return lowest
    }

    /// Where a cgroup hierarchy is mounted (`mountinfo`'s mount point) and which cgroup that
    /// folder is (its root: "/" on a host, the container's own cgroup when a container mounts
    /// its part of the host's hierarchy, "/.." and below when the process's cgroup namespace
    /// begins below the mount's). `option`: the v1 controller the mount carries. Of several, the
    /// one whose root holds `path` most closely, and of those the last listed (the one on top).
    static func cgroupMount(_ mountInfo: String, type: String, option: String?, path: String) -> (point: String, root: String)? {
        var best: (point: String, root: String, rank: Int)?
        for line in mountInfo.split(separator: "\n") {
            // ID PARENT MAJ:MIN ROOT POINT OPTIONS [TAGS...] - TYPE SOURCE SUPER_OPTIONS
            let halves = line.components(separatedBy: " - ")
            guard halves.count == 2 else { continue }
            let mine = halves[0].split(separator: " "), theirs = halves[1].split(separator: " ")
            guard mine.count >= 5, theirs.count >= 3, theirs[0] == type else { continue }
            if let option, !theirs[2].split(separator: ",").contains(Substring(option)) { continue }
            let root = unescapeMountPath(mine[3])
            // The root's length when it holds `path`, 0 when it is above the namespace's root.
            let rank = root == "/" || path == root || path.hasPrefix(root + "/") ? root.count : root.hasPrefix("/..") ? 0 : -1
            if rank >= 0, rank >= (best?.rank ?? 0) { best = (unescapeMountPath(mine[4]), root, rank) }
        }
        return best.map { ($0.point, $0.root) }
    }

    /// mountinfo writes a space, tab, newline and backslash in a path as octal escapes (`\040`).
    static func unescapeMountPath(_ field: Substring) -> String {
        guard field.contains("\\") else { return String(field) }
        var out: [UInt8] = []
        var bytes = Array(field.utf8)[...]
        while let b = bytes.popFirst() {
            if b == UInt8(ascii: "\\"), bytes.count >= 3, let code = UInt8(String(decoding: bytes.prefix(3), as: UTF8.self), radix: 8) {
                out.append(code)
                bytes = bytes.dropFirst(3)
            } else {
                out.append(b)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The lowest of `quota(folder)` from the cgroup at `path` up to the hierarchy's mount
    /// point. A mount whose root is above the process's cgroup namespace ("/..": the namespace
    /// began below the mount, as after `unshare -C`) cannot say where in it the process is:
    /// only the mount point, an ancestor, is read then.
    static func lowestQuota(path: String, mount: (point: String, root: String), _ quota: (String) -> Double?) -> Double? {
        var relative: String
        if mount.root == "/" {
            relative = path
        } else if path == mount.root || path.hasPrefix(mount.root + "/") {
            relative = String(path.dropFirst(mount.root.count))
        } else if mount.root.hasPrefix("/..") {
            relative = "/"
        } else {
            return nil
        }
        var parts = relative.split(separator: "/").map(String.init)
        var lowest: Double?
        while true {
            if let q = quota(([mount.point] + parts).joined(separator: "/")) { lowest = min(lowest ?? q, q) }
            if parts.isEmpty { return lowest }
            parts.removeLast()
        }
    }

    /// cgroup v1's `cpu.cfs_quota_us` over `cpu.cfs_period_us`, or nil for -1 (no limit) or
    /// anything unreadable.
    static func cfsQuota(_ quota: String, period: String) -> Double? {
        guard let q = Double(quota.trimmingCharacters(in: .whitespacesAndNewlines)),
              let p = Double(period.trimmingCharacters(in: .whitespacesAndNewlines)), q > 0, p > 0 else { return nil }
        return q / p
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
            if cpu < 0 || cpu >= Int(TXGATE_MAX_CPUS) {
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
