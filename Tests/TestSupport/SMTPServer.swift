import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A real SMTP server: aiosmtpd on a free 127.0.0.1 port, saving every message it accepts
/// into a Maildir. `stop()` kills it; tests call it in a `defer`, and `deinit` does too.
public final class SMTPServer: @unchecked Sendable {
    // @unchecked: every stored property is immutable; Process is only asked whether it runs
    // and killed (idempotent, and `stop()` is called from one test at a time).
    public let port: Int
    public let folder: TemporaryDirectory
    public let maildir: String
    /// The certificate the server offers with STARTTLS, when started with `selfSignedTLS`.
    public let certificate: TestCertificate?
    private let process = Process()
    private let stderrPath: String

    /// `url` is `smtp://127.0.0.1:<port>`.
    public var url: String { "smtp://127.0.0.1:\(port)" }

    /// Starts the server and waits until it accepts connections.
    /// - Parameters:
    ///   - port: a given port (to start a server where a sender is already retrying), else a free one.
    ///   - selfSignedTLS: make a self-signed certificate (`certificate`): the server then offers
    ///     STARTTLS and refuses mail without it.
    public init(port: Int? = nil, selfSignedTLS: Bool = false) throws {
        self.port = try port ?? Ports.free()
        folder = try TemporaryDirectory(prefix: "txgate-smtp")
        certificate = selfSignedTLS ? try TestCertificate(in: folder) : nil
        let tls = certificate
        maildir = folder.path("Maildir")
        stderrPath = folder.path("aiosmtpd.stderr")
        _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
        let stderr = try FileHandle(forWritingTo: URL(fileURLWithPath: stderrPath))
        defer { try? stderr.close() }
        var arguments = ["-m", "aiosmtpd", "-n", "-l", "127.0.0.1:\(self.port)"]
        if let tls { arguments += ["--tlscert", tls.cert, "--tlskey", tls.key] }
        arguments += ["-c", "aiosmtpd.handlers.Mailbox", maildir]
        let command = try Python.command(arguments)
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = stderr
        try process.run()
        let up = Timing.poll(timeout: 15) { Ports.accepts(self.port) || !process.isRunning }
        guard up, process.isRunning else {
            let log = (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? ""
            stop()
            throw HarnessError("aiosmtpd did not start on port \(self.port) (\(up ? "it exited" : "not listening after 15 s")): \(log)")
        }
    }

    /// Kills and reaps the server, and removes its folder. Safe to call more than once.
    public func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        folder.remove()
    }

    deinit { stop() }

    /// What aiosmtpd wrote on stderr so far (for failure messages).
    public var stderr: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }

    /// The paths of the messages received so far.
    public func messages() -> [String] {
        let new = (maildir as NSString).appendingPathComponent("new")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: new)) ?? []
        return names.sorted().map { (new as NSString).appendingPathComponent($0) }
    }

    /// Waits (briefly: the server saves a message before it answers 250) until `count` are there.
    public func waitForMessages(_ count: Int, timeout: Double = 5) -> [String] {
        Timing.poll(timeout: timeout) { messages().count >= count }
        return messages()
    }
}

/// A self-signed certificate for 127.0.0.1 and localhost, made with the openssl tool.
public struct TestCertificate {
    public let cert: String
    public let key: String

    public init(in folder: TemporaryDirectory) throws {
        cert = folder.path("cert.pem")
        key = folder.path("key.pem")
        let r = try Python.run(["/usr/bin/env", "openssl"], [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost",
            "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ])
        guard r.status == 0 else { throw HarnessError("openssl could not make a certificate: \(r.stderr)") }
    }
}

/// A server that greets and answers EHLO, then never answers again: the transfer stalls
/// after connecting, where only the whole-attempt timeout can end it.
public final class StallingSMTPServer: @unchecked Sendable {
    // @unchecked: as SMTPServer, only immutable properties and a Process that is killed once.
    public let port: Int
    private let process = Process()

    public static let script = """
        import socket, sys
        s = socket.socket()
        s.bind(('127.0.0.1', 0))
        s.listen(16)
        print(s.getsockname()[1], flush=True)
        held = []
        while True:
            c, _ = s.accept()
            held.append(c)
            c.sendall(b'220 stall.example ESMTP\\r\\n')
            c.makefile('rb').readline()
            c.sendall(b'250 stall.example\\r\\n')
        """

    public init() throws {
        let command = try Python.command(["-c", Self.script])
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        var line = Data()
        while !line.contains(10) {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line += chunk
        }
        guard let port = Int(String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) else {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw HarnessError("the stalling server did not report its port")
        }
        self.port = port
    }

    public func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    deinit { stop() }
}
