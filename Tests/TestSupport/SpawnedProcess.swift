import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A child process whose stdout and stderr go to files (so tests can read the logs), and
/// which is never leaked: it is killed with SIGKILL and reaped by `kill()`, which `deinit` and
/// `Testbed.cleanup()` both call. A child that has children of its own (nginx's master and its
/// workers) is given `stopSignal` first, so that it stops them: SIGKILL would leave them running.
public final class SpawnedProcess: @unchecked Sendable {
    // @unchecked: every stored property is immutable; Foundation's Process is thread-safe for
    // the calls made here (isRunning, terminationStatus, processIdentifier).
    public let name: String
    public let executable: URL
    public let arguments: [String]
    public let stdoutURL: URL
    public let stderrURL: URL
    /// Sent by `kill()` before SIGKILL, which follows only if the process has not exited 5 s later.
    public let stopSignal: Int32?
    private let process = Process()

    public init(_ executable: URL, _ arguments: [String], name: String? = nil, directory: URL,
         environment: [String: String]? = nil, stopSignal: Int32? = nil) throws {
        self.executable = executable
        self.stopSignal = stopSignal
        self.arguments = arguments
        let label = name ?? executable.lastPathComponent
        self.name = label
        let tag = "\(label)-\(UUID().uuidString.prefix(6))"
        stdoutURL = directory.appendingPathComponent("\(tag).stdout.log")
        stderrURL = directory.appendingPathComponent("\(tag).stderr.log")
        _ = FileManager.default.createFile(atPath: stdoutURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: stderrURL.path, contents: nil)
        let out = try FileHandle(forWritingTo: stdoutURL)
        let err = try FileHandle(forWritingTo: stderrURL)
        defer {
            try? out.close()
            try? err.close()
        }
        process.executableURL = executable
        process.arguments = arguments
        process.currentDirectoryURL = directory
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = out
        process.standardError = err
        if let environment {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        }
        do {
            try Self.withCleanSignalMask { try process.run() }
        } catch {
            throw HarnessError("cannot launch \(executable.path): \(error)")
        }
    }

    /// Runs `body` (which spawns a child) with no signal blocked in the calling thread.
    ///
    /// Why: tests run on Dispatch worker threads, which block nearly every signal, and
    /// Foundation's Process passes the spawning thread's signal mask on to the child. A gateway
    /// started that way would never see SIGTERM. A shell, systemd or docker starts it with an
    /// empty mask; so do we.
    private static func withCleanSignalMask<T>(_ body: () throws -> T) rethrows -> T {
        var empty = sigset_t()
        var saved = sigset_t()
        sigemptyset(&empty)
        pthread_sigmask(SIG_SETMASK, &empty, &saved)
        defer { pthread_sigmask(SIG_SETMASK, &saved, nil) }
        return try body()
    }

    public var pid: Int32 { process.processIdentifier }
    public var isRunning: Bool { process.isRunning }

    /// Everything the process wrote to stdout so far.
    public var stdout: String { (try? String(contentsOf: stdoutURL, encoding: .utf8)) ?? "" }
    /// Everything the process wrote to stderr so far.
    public var stderr: String { (try? String(contentsOf: stderrURL, encoding: .utf8)) ?? "" }

    /// The last lines of stderr, for failure messages.
    public func stderrTail(_ lines: Int = 20) -> String {
        stderr.split(separator: "\n", omittingEmptySubsequences: false).suffix(lines).joined(separator: "\n")
    }

    /// Polls connect() on 127.0.0.1:port until it is accepted. Fails early, with the process's
    /// stderr, if the process exits first.
    public func waitForPort(_ port: Int, timeout: Double = 15) throws {
        let deadline = Timing.now() + timeout
        while true {
            if Ports.probe(port) == .accepted { return }
            if !isRunning {
                throw HarnessError("""
                    \(name) exited (status \(process.terminationStatus)) before accepting connections on port \(port); stderr:
                    \(stderrTail())
                    """)
            }
            if Timing.now() >= deadline {
                throw HarnessError("\(name) did not accept connections on port \(port) within \(timeout) s; stderr:\n\(stderrTail())")
            }
            Timing.sleep(0.02)
        }
    }

    public func signal(_ sig: Int32) {
        if isRunning { _ = Glibc.kill(pid, sig) }
    }

    /// Sends SIGTERM.
    public func terminate() { signal(SIGTERM) }

    /// Waits for the process to exit; returns its exit status, or 128+N when killed by signal
    /// N, or nil if it is still running after `timeout` seconds.
    @discardableResult
    public func waitForExit(timeout: Double) -> Int32? {
        guard Timing.poll(timeout: timeout, interval: 0.01, { !process.isRunning }) else { return nil }
        return exitStatus
    }

    /// The exit status once the process has exited (128+N for a signal), else nil.
    public var exitStatus: Int32? {
        guard !process.isRunning else { return nil }
        switch process.terminationReason {
        case .exit: return process.terminationStatus
        case .uncaughtSignal: return 128 + process.terminationStatus
        @unknown default: return process.terminationStatus
        }
    }

    /// `stopSignal` if there is one, then SIGKILL, and reap. Safe to call more than once.
    public func kill() {
        guard process.isRunning else { return }
        if let stopSignal {
            _ = Glibc.kill(pid, stopSignal)
            if waitForExit(timeout: 5) != nil { return }
        }
        _ = Glibc.kill(pid, SIGKILL)
        _ = waitForExit(timeout: 10)
    }

    deinit { kill() }
}

/// The outcome of a command run to completion.
public struct CommandResult: CustomStringConvertible {
    public let status: Int32
    public let stdout: String
    public let stderr: String

    public var description: String { "exit \(status)\n--- stdout:\n\(stdout)\n--- stderr:\n\(stderr)" }
}

extension SpawnedProcess {
    /// Runs a command to completion (killing it after `timeout` seconds).
    public static func run(_ executable: URL, _ arguments: [String], directory: URL, timeout: Double = 30,
                           environment: [String: String]? = nil) throws -> CommandResult {
        let p = try SpawnedProcess(executable, arguments, directory: directory, environment: environment)
        defer { p.kill() }
        guard let status = p.waitForExit(timeout: timeout) else {
            throw HarnessError("\(executable.lastPathComponent) \(arguments.joined(separator: " ")) did not finish within \(timeout) s")
        }
        return CommandResult(status: status, stdout: p.stdout, stderr: p.stderr)
    }
}
