import Foundation

/// The Python that has aiosmtpd: `python3` on PATH if it does, else Debian's own
/// /usr/bin/python3, where the python3-aiosmtpd package puts it (a pyenv or venv python3
/// earlier on PATH does not see Debian's packages).
public enum Python {
    public static let interpreter: Result<[String], HarnessError> = {
        let candidates = [["/usr/bin/env", "python3"], ["/usr/bin/python3"]]
        for candidate in candidates {
            if let r = try? run(candidate, ["-c", "import aiosmtpd, email"]), r.status == 0 { return .success(candidate) }
        }
        return .failure(HarnessError("no python3 with aiosmtpd (tried python3 on PATH and /usr/bin/python3); "
                                     + "run scripts/install-deps.sh, which installs python3-aiosmtpd"))
    }()

    /// `executable arguments...` with the interpreter prepended; the command line as an array.
    public static func command(_ arguments: [String]) throws -> [String] {
        try interpreter.get() + arguments
    }

    public struct Output {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs a command to completion.
    public static func run(_ command: [String], _ arguments: [String]) throws -> Output {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst()) + arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // Read before waiting, so a full pipe cannot stall the child.
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Output(status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
                      stderr: String(decoding: stderr, as: UTF8.self))
    }
}

/// A message file as Python's `email` package (a real, strict-enough mail parser) reads it:
/// encoded words and quoted-printable decoded, and any defects it found listed.
public struct ParsedMail: Decodable {
    public var to: String
    public var from: String
    public var subject: String
    public var body: String
    public var date: String
    public var dateUTC: String
    public var messageID: String
    public var mimeVersion: String
    public var contentType: String
    public var charset: String
    public var transferEncoding: String
    /// Set by aiosmtpd's handler from the SMTP envelope (MAIL FROM, RCPT TO).
    public var envelopeFrom: String?
    public var envelopeTo: String?
    public var defects: [String]

    public static let script = """
        import email, email.policy, email.utils, json, sys
        with open(sys.argv[1], 'rb') as f:
            m = email.message_from_binary_file(f, policy=email.policy.default)
        defects = [type(d).__name__ for d in m.defects]
        for name, value in m.items():
            defects += [name + ': ' + type(d).__name__ for d in getattr(value, 'defects', ())]
        def h(name):
            v = m.get(name)
            return None if v is None else str(v)
        print(json.dumps({
            'to': h('To') or '', 'from': h('From') or '', 'subject': h('Subject') or '',
            'body': m.get_content(), 'date': h('Date') or '',
            'dateUTC': email.utils.parsedate_to_datetime(m['Date']).isoformat() if m['Date'] else '',
            'messageID': h('Message-ID') or '', 'mimeVersion': h('MIME-Version') or '',
            'contentType': m.get_content_type(), 'charset': m.get_content_charset() or '',
            'transferEncoding': h('Content-Transfer-Encoding') or '',
            'envelopeFrom': h('X-MailFrom'), 'envelopeTo': h('X-RcptTo'), 'defects': defects,
        }))
        """

    public init(file path: String) throws {
        let r = try Python.run(try Python.interpreter.get(), ["-c", Self.script, path])
        guard r.status == 0 else { throw HarnessError("python could not parse \(path): \(r.stderr)") }
        self = try JSONDecoder().decode(ParsedMail.self, from: Data(r.stdout.utf8))
    }
}
