import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The first hour's frictions (issue 24, items 5, 6 and 8), as the person meeting them sees
/// them: what `txgate` says on a typo, a missing file, a taken port or a publicUrl that leads
/// elsewhere; status lines with their reason; `make run`'s banner and packages.
@Suite("first run: what the commands say", .testbed)
struct FirstRunTests {
    typealias Kit = TransactionKit

    // MARK: the command line

    @Test("a mistyped command is named, with the command it resembles; exit 64")
    func unknownCommand() throws {
        let bed = try Testbed.current
        let typo = try bed.runTxgate(["chek", "--config", "a.json"])
        #expect(typo.status == 64, "\(typo)")
        #expect(typo.stderr.hasPrefix("txgate: unknown command 'chek' (did you mean 'check'?); the commands are serve, check,"), "\(typo)")
        #expect(!typo.stderr.contains("Unknown option"), "\(typo)")
        let other = try bed.runTxgate(["frobnicate"])
        #expect(other.status == 64, "\(other)")
        #expect(other.stderr.hasPrefix("txgate: unknown command 'frobnicate'; the commands are"), "\(other)")
        // Commands and top-level flags still parse as before.
        #expect(try bed.runTxgate(["--version"]).status == 0)
        #expect(try bed.runTxgate(["help", "check"]).stdout.contains("--config"))
    }

    @Test("a configuration file that cannot be read says why: no such file, a folder, permission denied")
    func unreadableConfigSaysWhy() throws {
        let bed = try Testbed.current
        let missing = try bed.runTxgate(["check", "--config", "nope.json"])
        #expect(missing.status == 1, "\(missing)")
        #expect(missing.stderr.contains("cannot read configuration file 'nope.json': No such file or directory"), "\(missing)")
        let folder = try bed.runTxgate(["serve", "--config", bed.dir.path])
        #expect(folder.status == 1, "\(folder)")
        #expect(folder.stderr.contains("cannot read configuration file '\(bed.dir.path)': it is a folder"), "\(folder)")

        let locked = try bed.dir.write("locked.json", #"{"upstream": {"url": "http://127.0.0.1:9000"}}"#)
        chmod(locked.path, 0)
        if getuid() == 0 {
            // root reads a mode-000 file: there is no permission error to provoke.
            print("SKIPPED the permission-denied case: the tests run as root")
        } else {
            let denied = try bed.runTxgate(["check", "--config", locked.path])
            #expect(denied.status == 1, "\(denied)")
            #expect(denied.stderr.contains("cannot read configuration file '\(locked.path)': Permission denied"), "\(denied)")
        }
    }

    @Test("check warns, and still exits 0, when the listen address is in use")
    func checkWarnsWhenListenIsTaken() throws {
        let bed = try Testbed.current
        let taken = try Ports.silentListener()
        defer { close(taken.fd) }
        let r = try bed.check(configText: #"{"listen": "127.0.0.1:\#(taken.port)", "upstream": {"url": "http://127.0.0.1:9000"}}"#)
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.contains("warning: listen address 127.0.0.1:\(taken.port) is in use (another process listens on it): "
            + "`txgate serve` with this file would not start"), "\(r)")
        #expect(r.stdout.contains("configuration OK"), "\(r)")
        // A free port: no such warning.
        let free = try bed.check(configText: #"{"listen": "127.0.0.1:\#(try Ports.free())", "upstream": {"url": "http://127.0.0.1:9000"}}"#,
                                 name: "free.json")
        #expect(free.status == 0 && !free.stderr.contains("listen address"), "\(free)")
    }

    @Test("check and serve warn when publicUrl leads browsers to another port of this machine (serve --listen moved the gateway)")
    func publicUrlThatMissesTheListener() throws {
        let bed = try Testbed.current
        let bank = try bed.startDemoBank()
        let filePort = try Ports.free()
        let config = #"{"listen": "127.0.0.1:\#(filePort)", "publicUrl": "http://127.0.0.1:\#(filePort)", "upstream": {"url": "\#(bank.url)"}, "workers": 1}"#
        let file = try bed.dir.write("moved.json", config)
        let same = try bed.runTxgate(["check", "--config", file.path])
        #expect(same.status == 0 && !same.stderr.contains("publicUrl"), "\(same)")

        let expected = "publicUrl http://127.0.0.1:\(filePort) names port \(filePort) on this machine"
        let listen = try Ports.free()
        let gateway = try bed.spawn(try BinaryLocator.txgate, ["serve", "--config", file.path, "--listen", "127.0.0.1:\(listen)"])
        try gateway.waitForPort(listen)
        let lines = {
            gateway.stderr.split(separator: "\n").compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] }
        }
        let warning = { lines().first { ($0["msg"] as? String)?.hasPrefix(expected) == true } }
        _ = Timing.poll(timeout: 5) { warning() != nil }
        #expect(warning()?["level"] as? String == "warning", "\(gateway.stderr)")
        #expect((warning()?["msg"] as? String)?.contains("set publicUrl to http://127.0.0.1:\(listen) ") == true, "\(gateway.stderr)")
    }

    // MARK: the wire

    @Test("a 415 from the gateway has its reason phrase: 'HTTP/1.1 415 Unsupported Media Type'")
    func reasonPhrases() throws {
        let (g, _) = try Testbed.current.startGatewayWithBank(config: Kit.config())
        let r = try g.fetch("POST", Kit.authPath, headers: [("Content-Type", "text/plain")], body: Array("{}".utf8))
        #expect(r.status == 415, "\(r)")
        #expect(r.reason == "Unsupported Media Type", "\(r)")
    }

    @Test("txgate request -i prints the standard reason phrase; on a terminal a body gets a final newline, into a pipe it is left as sent")
    func requestOutput() throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank()
        let url = "http://127.0.0.1:\(g.port)/health"
        let sessionFile = bed.dir.path("session.json")
        let shown = try bed.runTxgate(["request", url, "-i", "--session-file", sessionFile])
        #expect(shown.status == 0, "\(shown)")
        #expect(shown.stdout.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(shown)")

        // demo-bank's /health body has no final newline: into a pipe, byte for byte.
        let piped = try bed.runTxgate(["request", url, "--session-file", sessionFile])
        #expect(piped.stdout == #"{"status":"ok"}"#, "\(piped)")

        // On a terminal (script(1) gives the command a pseudo-terminal), one newline after it.
        guard let script = BinaryLocator.onPath("script") else {
            print("SKIPPED the terminal case: script(1) is not installed (not on PATH)")
            return
        }
        let command = [try BinaryLocator.txgate.path, "request", url, "--session-file", sessionFile].joined(separator: " ")
        let tty = try SpawnedProcess.run(script, ["-qec", command, "/dev/null"], directory: bed.dir.url, timeout: 30)
        #expect(tty.status == 0, "\(tty)")
        // The terminal turns "\n" into "\r\n".
        #expect(tty.stdout == "{\"status\":\"ok\"}\r\n", "\(tty)")
    }

    // MARK: make run

    /// `scripts/run-demo.sh CONFIG DEMO_LISTEN` (what `make run` runs) with the tested binaries.
    static func runDemo(_ bed: Testbed, config: URL, demoListen: String) throws -> SpawnedProcess {
        guard let bash = BinaryLocator.onPath("bash") else { throw HarnessError("bash is not installed") }
        let script = BinaryLocator.packageRoot.appendingPathComponent("scripts/run-demo.sh").path
        return try bed.spawn(bash, [script, config.path, demoListen], name: "run-demo",
                             environment: ["TXGATE_BIN_DIR": BinaryLocator.binDirectory.path])
    }

    /// The processes whose parent is `pid` (from /proc).
    static func children(of pid: Int32) -> [Int32] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.flatMap { task in
            ((try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/children", encoding: .utf8)) ?? "")
                .split(separator: " ").compactMap { Int32($0) }
        }
    }

    @Test("make run's script prints its banner once the gateway answers, and Ctrl-C's SIGTERM stops both")
    func runDemoBannerAfterListening() throws {
        let bed = try Testbed.current
        let (port, bankPort) = (try Ports.free(), try Ports.free())
        let config = try bed.writeConfig(Testbed.gatewayConfig(port: port, upstream: "http://127.0.0.1:\(bankPort)"))
        let demo = try Self.runDemo(bed, config: config, demoListen: "127.0.0.1:\(bankPort)")
        let banner = Timing.poll(timeout: 60) { demo.stdout.contains("Ctrl-C stops both.") || !demo.isRunning }
        #expect(banner && demo.isRunning, "no banner:\n\(demo.stdout)\n\(demo.stderrTail())")
        // Whoever reads the banner can use it at once.
        #expect(Ports.probe(port) == .accepted, "the banner came before the gateway listened on \(port)")
        let health = try RawHTTPClient.fetch(port: port, "GET", "/health")
        #expect(health.status == 200, "\(health)")
        #expect(demo.stdout.contains("TxGate on http://127.0.0.1:\(port)"), "\(demo.stdout)")

        // The gateway is the script's foreground child: SIGTERM it (as Ctrl-C would); the
        // script ends with it and stops demo-bank.
        let kids = Self.children(of: demo.pid)
        #expect(kids.count >= 2, "expected demo-bank and txgate under the script, found \(kids)")
        let gatewayPid = kids.first { (try? String(contentsOfFile: "/proc/\($0)/cmdline", encoding: .utf8))?.contains("serve") == true }
        #expect(gatewayPid != nil, "no txgate serve among \(kids)")
        if let gatewayPid { kill(gatewayPid, SIGTERM) }
        #expect(demo.waitForExit(timeout: 20) == 0, "\(demo.stderrTail())")
        #expect(Timing.poll(timeout: 5) { Ports.probe(bankPort) != .accepted }, "demo-bank outlived the script")
        for k in kids where kill(k, 0) == 0 { kill(k, SIGKILL) }  // nothing should be left; never leak
    }

    @Test("make run's script says the gateway's address is in use and prints no banner")
    func runDemoAddressInUse() throws {
        let bed = try Testbed.current
        let taken = try Ports.silentListener()
        defer { close(taken.fd) }
        let bankPort = try Ports.free()
        let config = try bed.writeConfig(Testbed.gatewayConfig(port: taken.port, upstream: "http://127.0.0.1:\(bankPort)"))
        let demo = try Self.runDemo(bed, config: config, demoListen: "127.0.0.1:\(bankPort)")
        let status = demo.waitForExit(timeout: 30)
        #expect(status == 1, "\(demo.stderrTail())")
        #expect(demo.stderr.contains("run-demo: 127.0.0.1:\(taken.port) is in use (another process listens on it)"), "\(demo.stderr)")
        #expect(!demo.stdout.contains("Try:"), "a banner before failing:\n\(demo.stdout)")
        #expect(Ports.probe(bankPort) != .accepted, "demo-bank was started (or left running)")
    }

    @Test("the packages `make run` installs (--build) include the demo's tools, oathtool, curl and jq; the image's build stage installs the same set")
    func demoToolsAreInTheBuildSet() throws {
        let bed = try Testbed.current
        guard let bash = BinaryLocator.onPath("bash") else { throw HarnessError("bash is not installed") }
        let script = BinaryLocator.packageRoot.appendingPathComponent("scripts/install-deps.sh").path
        let r = try SpawnedProcess.run(bash, [script, "--build", "--list"], directory: bed.dir.url)
        #expect(r.status == 0, "\(r)")
        let packages = Set(r.stdout.split(separator: "\n").map(String.init))
        // libstdc++-12-dev: the release build's static link (theImageBuildsAsMakeBuildDoes).
        #expect(packages.isSuperset(of: ["oathtool", "curl", "jq", "pkg-config", "libevent-dev", "libstdc++-12-dev"]), "\(packages.sorted())")
        // The banner's and the README's tools are what --build gives.
        let banner = try String(contentsOf: BinaryLocator.packageRoot.appendingPathComponent("scripts/run-demo.sh"), encoding: .utf8)
        #expect(banner.contains("oathtool --totp") && banner.contains("curl -i"))
        let dockerfile = try String(contentsOf: BinaryLocator.packageRoot.appendingPathComponent("docker/Dockerfile"), encoding: .utf8)
        #expect(dockerfile.contains("RUN bash scripts/install-deps.sh --build\n"), "the build stage no longer runs install-deps.sh --build")
        #expect(!dockerfile.contains("apt-get install"), "the Dockerfile installs packages of its own, not install-deps.sh's")
    }

    /// The image's binaries are built as `make build` builds them (the Swift runtime linked in,
    /// which needs libstdc++'s static library: the build set has it, demoToolsAreInTheBuildSet),
    /// so that what the suite and the benchmarks measure is what the image ships.
    @Test("the image's build stage runs make build's swift build commands")
    func theImageBuildsAsMakeBuildDoes() throws {
        let bed = try Testbed.current
        guard let make = BinaryLocator.onPath("make") else { throw HarnessError("make is not installed") }
        let dry = try SpawnedProcess.run(make, ["-n", "-C", BinaryLocator.packageRoot.path, "build"], directory: bed.dir.url)
        #expect(dry.status == 0, "\(dry)")
        let builds = dry.stdout.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { $0.hasPrefix("swift build") }
        #expect(builds == ["swift build -c release --static-swift-stdlib --product txgate",
                           "swift build -c release --static-swift-stdlib --product demo-bank"], "\(dry)")
        let dockerfile = try String(contentsOf: BinaryLocator.packageRoot.appendingPathComponent("docker/Dockerfile"), encoding: .utf8)
        for command in builds {
            #expect(dockerfile.contains(command + " "), "the image does not run `\(command)`")
        }
    }

    // MARK: the README's sample outputs

    /// The README's first inline JSON sample matching `pattern` (N: a number left open), parsed.
    static func readmeSample(_ readme: String, _ pattern: Regex<Substring>) throws -> [String: Any] {
        let match = try #require(readme.firstMatch(of: pattern), "the README has no sample matching \(pattern)")
        let json = String(match.output).replacingOccurrences(of: ":N", with: ":0")
        return try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any], "not JSON: \(json)")
    }

    @Test("the README's sample outputs (/-/health, /-/ready, the reload line, the refusal reasons) are what the demo answers")
    func readmeSamplesMatchTheDemo() throws {
        let bed = try Testbed.current
        // The README and the reference pages in docs/, where the samples may live.
        let root = BinaryLocator.packageRoot
        let pages = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("docs").path)
            .filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
        let readme = try (["README.md"] + pages).map { try String(contentsOf: root.appendingPathComponent($0), encoding: .utf8) }
            .joined(separator: "\n")
        let bank = try bed.startDemoBank()
        let port = try Ports.free()
        let demo = try String(contentsOf: BinaryLocator.packageRoot.appendingPathComponent("gateway.json"), encoding: .utf8)
        let config = try bed.dir.write("gateway.json", demo.replacingOccurrences(of: "127.0.0.1:8080", with: "127.0.0.1:\(port)")
            .replacingOccurrences(of: "localhost:8080", with: "localhost:\(port)")
            .replacingOccurrences(of: "http://127.0.0.1:9000", with: bank.url))
        let gateway = try bed.spawn(try BinaryLocator.txgate, ["serve", "--config", config.path, "--workers", "1"])
        try gateway.waitForPort(port)

        let health = try RawHTTPClient.fetch(port: port, "GET", "/-/health").json()
        let documentedHealth = try Self.readmeSample(readme, /\{"status":"ok","version":[^}]*"store":"up"\}/)
        #expect(Set(health.keys) == Set(documentedHealth.keys), "live \(health), README \(documentedHealth)")
        #expect(health["version"] as? String == documentedHealth["version"] as? String, "live \(health), README \(documentedHealth)")

        var ready: [String: Any] = [:]
        _ = Timing.poll(timeout: 10) {
            ready = (try? RawHTTPClient.fetch(port: port, "GET", "/-/ready").json()) ?? [:]
            return ready["status"] as? String == "ready"
        }
        let documentedReady = try Self.readmeSample(readme, /\{"status":"ready",[^}]*\}/)
        #expect(Set(ready.keys) == Set(documentedReady.keys), "live \(ready), README \(documentedReady)")

        // The reload line: the demo's policy count.
        gateway.signal(SIGHUP)
        var reloaded: [String: Any]?
        _ = Timing.poll(timeout: 10) {
            reloaded = gateway.stderr.split(separator: "\n").compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] }
                .first { $0["msg"] as? String == "config reloaded" }
            return reloaded != nil
        }
        let documentedReload = try Self.readmeSample(readme, /\{"ts":"[^"]*","level":"info","label":"txgate","msg":"config reloaded"[^}]*\}/)
        #expect(reloaded?["policies"] as? Int == documentedReload["policies"] as? Int, "live \(String(describing: reloaded)), README \(documentedReload)")
        #expect(Set(reloaded?.keys.map { $0 } ?? []) == Set(documentedReload.keys))

        // Every refusal reason /-/metrics exports is in the metrics table (docs/LOGS-METRICS-AUDIT.md).
        let metrics = try RawHTTPClient.fetch(port: port, "GET", "/-/metrics").bodyText
        let reasons = metrics.matches(of: /txgate_transactions_refused_total\{reason="([a-z_]+)"\}/).map { String($0.output.1) }
        #expect(!reasons.isEmpty, "\(metrics)")
        let row = try #require(readme.split(separator: "\n").first { $0.hasPrefix("| `txgate_transactions_refused_total`") })
        for reason in reasons { #expect(row.contains("`\(reason)`"), "the metrics table lacks reason \(reason): \(row)") }
    }
}
