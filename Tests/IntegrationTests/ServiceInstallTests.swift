import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The service install (issue 24, item 14): `make install` puts the binaries, the systemd unit
/// and a sample configuration in place; the unit's `ExecStart` line, run as systemd would run
/// it with a `NOTIFY_SOCKET`, says READY=1 once it accepts connections, RELOADING=1/READY=1
/// around SIGHUP and STOPPING=1 at SIGTERM.
@Suite("service install: make install, the systemd unit, sd_notify", .testbed)
struct ServiceInstallTests {
    /// What `make install DESTDIR=<tmp>/root BUILT=<the tested binaries>` put where.
    struct Installed {
        let root: URL
        let output: CommandResult
        var unit: URL { root.appendingPathComponent("usr/local/lib/systemd/system/txgate.service") }
        var config: URL { root.appendingPathComponent("etc/txgate/gateway.json") }
        var txgate: URL { root.appendingPathComponent("usr/local/bin/txgate") }
        var demoBank: URL { root.appendingPathComponent("usr/local/bin/demo-bank") }

        /// The path `path` names once installed, inside the staging root.
        func staged(_ path: String) -> String { root.path + path }
    }

    /// Runs `make install` into a staging root in the testbed, with the binaries under test
    /// (BUILT: no release build), PREFIX and SYSCONFDIR left at their defaults.
    static func makeInstall(_ bed: Testbed, extra: [String] = []) throws -> Installed {
        guard let make = BinaryLocator.onPath("make") else { throw HarnessError("make is not installed (not on PATH)") }
        let root = bed.dir.file("root")
        let r = try SpawnedProcess.run(make, ["-C", BinaryLocator.packageRoot.path, "install", "DESTDIR=\(root.path)",
                                              "BUILT=\(BinaryLocator.binDirectory.path)"] + extra,
                                       directory: bed.dir.url, timeout: 120)
        guard r.status == 0 else { throw HarnessError("make install failed:\n\(r)") }
        return Installed(root: root, output: r)
    }

    /// The unit's `ExecStart=` command, split into words. The unit is kept to plain words so
    /// that this split is exactly systemd's; a quote or a specifier fails here rather than
    /// being run differently from how systemd would.
    static func execStart(_ unit: String) throws -> [String] {
        let lines = unit.split(separator: "\n").filter { $0.hasPrefix("ExecStart=") }
        guard lines.count == 1, let line = lines.first else {
            throw HarnessError("expected exactly one ExecStart= line in the unit, found \(lines.count)")
        }
        let command = line.dropFirst("ExecStart=".count)
        if let odd = command.first(where: { "\"'%$\\;".contains($0) }) {
            throw HarnessError("ExecStart uses '\(odd)', which this test does not interpret like systemd: \(line)")
        }
        return command.split(separator: " ").map(String.init)
    }

    /// The unit's value for `key` in its `[Service]` section (every value, in order).
    static func values(_ key: String, in unit: String) -> [String] {
        unit.split(separator: "\n").filter { $0.hasPrefix(key + "=") }.map { String($0.dropFirst(key.count + 1)) }
    }

    @Test("make install DESTDIR=... puts txgate, demo-bank, the unit and a sample gateway.json in place; a second install keeps the edited configuration")
    func installLayout() throws {
        let bed = try Testbed.current
        let installed = try Self.makeInstall(bed)
        let fm = FileManager.default
        #expect(fm.isExecutableFile(atPath: installed.txgate.path), "\(installed.output)")
        #expect(fm.isExecutableFile(atPath: installed.demoBank.path), "\(installed.output)")
        let unit = try String(contentsOf: installed.unit, encoding: .utf8)
        // The unit names the installed locations, not the staging root.
        #expect(try Self.execStart(unit) == ["/usr/local/bin/txgate", "serve", "--config", "/etc/txgate/gateway.json"])
        #expect(unit.firstMatch(of: /@[A-Z]+@/) == nil, "a placeholder was left in the unit:\n\(unit)")
        #expect(!unit.contains(installed.root.path), "the unit names the staging root:\n\(unit)")
        for (key, value) in [("Type", "notify"), ("DynamicUser", "yes"), ("ProtectSystem", "strict"), ("StateDirectory", "txgate"),
                             ("NoNewPrivileges", "yes"), ("CapabilityBoundingSet", "CAP_NET_BIND_SERVICE"),
                             ("AmbientCapabilities", "CAP_NET_BIND_SERVICE"), ("PrivateTmp", "yes"), ("ProtectHome", "yes"),
                             ("ExecReload", "/bin/kill -HUP $MAINPID")] {
            #expect(Self.values(key, in: unit) == [value], "\(key) in the unit:\n\(unit)")
        }
        // The sample configuration checks (with the plain-proxy warning), and keeps its state
        // in the unit's StateDirectory, the one folder the sandbox lets it write.
        let sample = try String(contentsOf: installed.config, encoding: .utf8)
        #expect(sample.contains("\"/var/lib/txgate/txgate.db\""), "\(sample)")
        let check = try bed.runTxgate(["check", "--config", installed.config.path])
        #expect(check.status == 0, "\(check)")
        #expect(check.stdout.contains("configuration OK"), "\(check)")

        // An operator's edits survive the next install.
        let edited = sample.replacingOccurrences(of: "127.0.0.1:9000", with: "127.0.0.1:9100")
        try edited.write(to: installed.config, atomically: true, encoding: .utf8)
        let again = try Self.makeInstall(bed)
        #expect(try String(contentsOf: installed.config, encoding: .utf8) == edited)
        #expect(again.output.stdout.contains("kept \(installed.config.path) (exists)"), "\(again.output)")
    }

    /// The folder `binary` loads the Swift runtime from, as `ldd` resolves it; nil when the
    /// runtime is linked in (`--static-swift-stdlib`).
    static func runtimeFolder(of binary: URL) throws -> String? {
        let ldd = try #require(BinaryLocator.onPath("ldd"), "ldd is not installed (libc-bin)")
        let r = try SpawnedProcess.run(ldd, [binary.path], directory: BinaryLocator.packageRoot)
        guard let line = r.stdout.split(separator: "\n").first(where: { $0.contains("libswiftCore.so => /") }),
              let path = line.split(separator: " ").dropFirst(2).first else { return nil }
        return String(path.dropLast("/libswiftCore.so".count))
    }

    /// A debug build (the suite's) loads the runtime from the toolchain's folder; `make build`'s
    /// binaries have it linked in, and get no warning (the suite run against them:
    /// TXGATE_BIN_DIR=.build/release).
    @Test("make install warns when a binary it installs loads the Swift runtime from the toolchain's folder, and only then")
    func installWarnsOfToolchainRuntime() throws {
        let bed = try Testbed.current
        let installed = try Self.makeInstall(bed)
        for name in ["txgate", "demo-bank"] {
            let built = BinaryLocator.binDirectory.appendingPathComponent(name)
            if let folder = try Self.runtimeFolder(of: built) {
                let warning = "install: warning: \(built.path) loads the Swift runtime from \(folder), "
                #expect(installed.output.stderr.contains(warning), "expected \"\(warning)\" in:\n\(installed.output)")
                #expect(installed.output.stderr.contains("make install` without BUILT builds it with --static-swift-stdlib"), "\(installed.output)")
            } else {
                #expect(!installed.output.stderr.contains("install: warning: \(built.path)"), "\(installed.output)")
            }
        }
    }

    @Test("make install honours PREFIX and SYSCONFDIR: the unit names the paths it installed to")
    func installPrefix() throws {
        let bed = try Testbed.current
        let installed = try Self.makeInstall(bed, extra: ["PREFIX=/opt/txgate", "SYSCONFDIR=/opt/etc"])
        let unit = try String(contentsOf: installed.root.appendingPathComponent("opt/txgate/lib/systemd/system/txgate.service"),
                              encoding: .utf8)
        #expect(try Self.execStart(unit) == ["/opt/txgate/bin/txgate", "serve", "--config", "/opt/etc/txgate/gateway.json"])
        #expect(FileManager.default.isExecutableFile(atPath: installed.staged("/opt/txgate/bin/txgate")))
        #expect(FileManager.default.fileExists(atPath: installed.staged("/opt/etc/txgate/gateway.json")))
    }

    @Test("the unit passes systemd-analyze verify, with no warning")
    func systemdAnalyzeVerify() throws {
        let bed = try Testbed.current
        guard let analyze = BinaryLocator.onPath("systemd-analyze") else {
            // Not faked: without systemd-analyze there is nothing to verify the unit with.
            print("SKIPPED systemd-analyze verify: systemd-analyze is not installed (not on PATH)")
            return
        }
        let installed = try Self.makeInstall(bed)
        // verify checks that ExecStart's binary exists: point it at the staged one. Every other
        // line is the installed unit's.
        let unit = try String(contentsOf: installed.unit, encoding: .utf8)
        let staged = unit.replacingOccurrences(of: "ExecStart=/usr/local/bin/txgate", with: "ExecStart=\(installed.txgate.path)")
        try FileManager.default.createDirectory(at: bed.dir.file("verify"), withIntermediateDirectories: true)
        let copy = try bed.dir.write("verify/txgate.service", staged)
        let r = try SpawnedProcess.run(analyze, ["verify", "--man=no", copy.path], directory: bed.dir.url, timeout: 60)
        #expect(r.status == 0, "\(r)")
        // verify exits 0 on an unknown key or a value it cannot parse; it says so on stderr.
        #expect(r.stderr.isEmpty && r.stdout.isEmpty, "systemd-analyze verify had something to say:\n\(r)")
    }

    @Test("the unit's ExecStart, run with a NOTIFY_SOCKET: READY=1 once it accepts, RELOADING=1 + MONOTONIC_USEC then READY=1 around SIGHUP (also a failed one), STOPPING=1 at SIGTERM")
    func execStartNotifies() throws {
        let bed = try Testbed.current
        let installed = try Self.makeInstall(bed)
        let bank = try bed.startDemoBank()
        let port = try Ports.free()
        // The operator's edit: the sample configuration with this test's addresses.
        let sample = try String(contentsOf: installed.config, encoding: .utf8)
        let configured = sample.replacingOccurrences(of: "127.0.0.1:8080", with: "127.0.0.1:\(port)")
            .replacingOccurrences(of: "http://127.0.0.1:9000", with: bank.url)
        #expect(configured != sample && configured.contains(bank.url), "the sample's listen or upstream changed:\n\(sample)")
        try configured.write(to: installed.config, atomically: true, encoding: .utf8)

        let words = try Self.execStart(String(contentsOf: installed.unit, encoding: .utf8))
        let command = words.map { $0.hasPrefix("/") ? installed.staged($0) : $0 }
        let notify = try NotifySocket(path: bed.dir.path("notify.sock"))
        let gateway = try bed.spawn(URL(fileURLWithPath: command[0]), Array(command.dropFirst()), name: "txgate-unit",
                                    environment: ["NOTIFY_SOCKET": notify.path])

        let ready = try notify.expect("READY=1")
        // READY=1 means serving: a connection is accepted and answered at once.
        #expect(Ports.probe(port) == .accepted, "READY=1 came before the gateway accepted on \(port)")
        let health = try RawHTTPClient.fetch(port: port, "GET", "/-/health")
        #expect(health.status == 200, "\(health)")
        #expect(ready.before.isEmpty, "notifications before READY=1: \(ready.before)")

        // A reload: RELOADING=1 with the monotonic clock's time now, then READY=1.
        let before = UInt64(Timing.now() * 1_000_000)
        gateway.signal(SIGHUP)
        let reloading = try notify.expect("RELOADING=1")
        let after = UInt64(Timing.now() * 1_000_000)
        #expect(reloading.before.isEmpty, "\(reloading.before)")
        let usec = reloading.message.split(separator: "\n").first { $0.hasPrefix("MONOTONIC_USEC=") }.flatMap { UInt64($0.dropFirst(15)) }
        #expect(usec.map { $0 >= before && $0 <= after } == true,
                "MONOTONIC_USEC not within the signal's window [\(before), \(after)]: \(reloading.message)")
        let reloaded = try notify.expect("READY=1")
        #expect(reloaded.before.isEmpty, "\(reloaded.before)")
        #expect(gateway.stderr.contains("\"config reloaded\""), "\(gateway.stderrTail())")

        // A reload that fails keeps the old configuration, and still ends with READY=1.
        try "{ not json".write(to: installed.config, atomically: true, encoding: .utf8)
        gateway.signal(SIGHUP)
        _ = try notify.expect("RELOADING=1")
        _ = try notify.expect("READY=1")
        #expect(gateway.stderr.contains("config reload failed: still running the previous configuration"), "\(gateway.stderrTail())")
        #expect(try RawHTTPClient.fetch(port: port, "GET", "/-/health").status == 200)

        gateway.terminate()
        let stopping = try notify.expect("STOPPING=1")
        #expect(stopping.before.isEmpty, "\(stopping.before)")
        #expect(gateway.waitForExit(timeout: 15) == 0, "\(gateway.stderrTail())")
        #expect(notify.drain(for: 0.2).isEmpty)
    }

    @Test("a NOTIFY_SOCKET that is not a socket address stops serve at once, naming the variable")
    func badNotifySocket() throws {
        let bed = try Testbed.current
        let bank = try bed.startDemoBank()
        let config = try bed.writeConfig(Testbed.gatewayConfig(port: try Ports.free(), upstream: bank.url))
        let r = try SpawnedProcess.run(try BinaryLocator.txgate, ["serve", "--config", config.path], directory: bed.dir.url,
                                       timeout: 15, environment: ["NOTIFY_SOCKET": "relative/notify.sock"])
        #expect(r.status == 1, "\(r)")
        #expect(r.stderr.contains("NOTIFY_SOCKET 'relative/notify.sock' is neither a path nor an abstract socket address"), "\(r)")
    }
}
