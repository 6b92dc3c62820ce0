import ArgumentParser
import Foundation
import Logging
import TxGate
import TxGateCore

@main
struct TxGateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "txgate",
        abstract: "A gateway that enforces transactional authorization in front of an HTTP API.",
        discussion: """
            TxGate is a reverse proxy: every request is checked, then forwarded to the upstream \
            named in the configuration file (gateway.json). See docs/CONFIGURATION.md for the configuration keys.
            """,
        version: "txgate \(TxGateVersion.description)",
        subcommands: [Serve.self, Check.self, Audit.self, HashPassword.self, Login.self, Request.self, Resume.self, Logout.self],
        defaultSubcommand: nil)

    /// As ArgumentParser's, except that a usage error of a client command exits 2 (as its
    /// journey errors do), not 64.
    static func main() {
        let arguments = Array(CommandLine.arguments.dropFirst())
        // ArgumentParser reads an unknown first word as a stray argument and then complains
        // about the options after it (`txgate chek --config a.json`: "Unknown option
        // '--config'"); name the word instead.
        if let first = arguments.first, let message = unknownCommand(first) {
            printError("txgate: \(message)")
            printError("Run 'txgate --help' for the commands.")
            Foundation.exit(ExitCode.validationFailure.rawValue)
        }
        do {
            var command = try parseAsRoot(arguments)
            try command.run()
        } catch {
            let clientCommands: Set<String> = ["login", "request", "resume", "logout"]
            if exitCode(for: error) == .validationFailure, let first = arguments.first, clientCommands.contains(first) {
                printError(fullMessage(for: error))
                Foundation.exit(2)
            }
            exit(withError: error)
        }
    }
}

extension TxGateCommand {
    /// What to say when `word`, the first argument, names no command; nil when it does (or is
    /// an option such as --help or --version).
    static func unknownCommand(_ word: String) -> String? {
        guard !word.hasPrefix("-") else { return nil }
        let names = configuration.subcommands.map { $0._commandName } + ["help"]
        guard !names.contains(word) else { return nil }
        let close = names.map { ($0, editDistance($0, word.lowercased())) }.filter { $0.1 <= 2 }.min { $0.1 < $1.1 }
        return "unknown command '\(word)'" + (close.map { " (did you mean '\($0.0)'?)" } ?? "")
            + "; the commands are " + names.filter { $0 != "help" }.joined(separator: ", ")
    }

    /// Levenshtein distance, for the "did you mean" of a mistyped command.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        var row = Array(0...b.count)
        for i in 1...max(a.count, 1) where !a.isEmpty {
            var previous = row[0]
            row[0] = i
            for j in stride(from: 1, through: b.count, by: 1) {
                let current = row[j]
                row[j] = min(row[j] + 1, row[j - 1] + 1, previous + (a[i - 1] == b[j - 1] ? 0 : 1))
                previous = current
            }
        }
        return a.isEmpty ? b.count : row[b.count]
    }
}

struct ConfigOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The configuration file.", valueName: "file"))
    var config: String = "gateway.json"
}

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Start the gateway.",
        discussion: """
            Runs until SIGTERM or SIGINT, then stops accepting, finishes the requests in flight (up to shutdownTimeoutMs) \
            and exits 0. SIGHUP reloads the configuration file (see docs/CONFIGURATION.md, "Reloading").
            """)

    @OptionGroup var options: ConfigOptions
    @Option(help: ArgumentHelp("Listen on HOST:PORT instead of the file's `listen`.", valueName: "host:port"))
    var listen: String?
    @Option(help: ArgumentHelp("Forward to this URL instead of the file's `upstream.url`.", valueName: "url"))
    var upstream: String?
    @Option(help: ArgumentHelp("Number of worker threads, each with its own event loop (default: the file's `workers`, else the CPUs this process may use).", valueName: "n"))
    var workers: Int?

    func run() throws {
        let config: GatewayConfig
        let source = ConfigSource(path: options.config, overrides: ConfigOverrides(listen: listen, upstream: upstream, workers: workers))
        do {
            config = try ConfigCheck.load(path: source.path, overrides: source.overrides)
        } catch {
            for e in error.errors { printError("\(options.config): \(e)") }
            throw ExitCode(1)
        }
        let level = Logger.Level(rawValue: config.log.level) ?? .info
        LoggingSystem.bootstrap { label in
            var h = JSONLogHandler(label: label)
            h.logLevel = level
            return h
        }
        let logger = Logger(label: "txgate")
        // SIGHUP's default action ends the process. The listeners accept (into the kernel's
        // backlog) from Gateway's init on, before `run` watches the signal: a reload asked for
        // in that window (a supervisor, a test that saw the port open) is ignored, not fatal.
        signal(SIGHUP, SIG_IGN)
        let gateway: Gateway
        do {
            gateway = try Gateway(config: config, logger: logger)
        } catch {
            logger.critical("cannot start: \(error)")
            printError("txgate: cannot start: \(error)")
            throw ExitCode(1)
        }
        gateway.configSource = source
        gateway.allocator = Allocator.description
        gateway.returnFreedMemory = Allocator.returnFreedMemory
        gateway.run()
    }
}

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Validate a configuration file without starting anything.",
        discussion: """
            Runs every check `serve` runs before it starts (the file, then the files, addresses, \
            signing key and email delivery it names), creating nothing. Prints every error, one per \
            line as `<json.path>: <problem>`, and exits 1 if there is any. Whether the listen address \
            can be bound now is a warning, not an error (exit 0): the gateway this file configures may \
            be the one holding it, and a reload is fine then.
            """)

    @OptionGroup var options: ConfigOptions

    func run() throws {
        do {
            let config = try ConfigCheck.load(path: options.config)
            for w in config.warnings() { printError("warning: \(w)") }
            if let w = ConfigCheck.listenProblem(config) { printError("warning: \(w)") }
        } catch {
            for e in error.errors { printError("\(e)") }
            printError("\(options.config): \(error.errors.count) error\(error.errors.count == 1 ? "" : "s")")
            throw ExitCode(1)
        }
        print("configuration OK")
    }
}

struct Audit: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Export the audit trail: approvals, denials, consumptions and refusals of transactions.",
        discussion: """
            Reads the store the configuration names (the SQLite file, or Redis) and prints one JSON object per \
            line, oldest first, for the records written from --since up to --until (default: now). A time is \
            RFC 3339 (2024-05-01T09:00:00Z) or a duration back from now (90s, 15m, 24h, 7d). Records carry \
            full TxIds: the export is the record an operator asks for. Starts nothing; the gateway may run.
            """)

    @OptionGroup var options: ConfigOptions
    @Option(help: ArgumentHelp("The oldest records to print: an RFC 3339 time or a duration back from now.", valueName: "time"))
    var since: String
    @Option(help: ArgumentHelp("Print records written before this time (default: now).", valueName: "time"))
    var until: String?
    @Option(help: ArgumentHelp("Output format: jsonl.", valueName: "format"))
    var format: String = "jsonl"

    func run() throws {
        let nowMs = WallClock.system.nowMs()
        guard format == "jsonl" else {
            printError("audit: --format '\(format)' is not supported (use jsonl)")
            throw ExitCode(2)
        }
        guard let sinceMs = AuditTime.parse(since, nowMs: nowMs) else {
            printError("audit: --since '\(since)' is neither an RFC 3339 time nor a duration such as 24h")
            throw ExitCode(2)
        }
        var untilMs = nowMs + 1
        if let until {
            guard let t = AuditTime.parse(until, nowMs: nowMs) else {
                printError("audit: --until '\(until)' is neither an RFC 3339 time nor a duration such as 24h")
                throw ExitCode(2)
            }
            untilMs = t
        }
        let config: GatewayConfig
        do {
            config = try ConfigLoader.load(path: options.config)
        } catch {
            for e in error.errors { printError("\(options.config): \(e)") }
            throw ExitCode(1)
        }
        do {
            try AuditExport.run(config, sinceMs: sinceMs, untilMs: untilMs) { line in print(line) }
        } catch {
            printError("audit: \(error)")
            throw ExitCode(1)
        }
    }
}

func printError(_ s: String) {
    FileHandle.standardError.write((s + "\n").data(using: .utf8)!)
}

struct HashPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hash-password",
        abstract: "Read a password from stdin and print its hash for `users[].passwordHash`.",
        discussion: "The hash is scrypt (N=2^15, r=8, p=1) with a random salt. From a terminal, the password is not echoed.")

    func run() throws {
        let line = readTerminalLine(prompt: isatty(0) == 1 ? "Password: " : "", echo: false)
        guard let password = line, !password.isEmpty else {
            printError("hash-password: no password on stdin")
            throw ExitCode(1)
        }
        print(PasswordHash.hash(password))
    }
}
