import Dispatch
import Foundation
import TxGateCore

/// Development delivery: each message becomes one RFC 5322 `.eml` file in a folder, exactly
/// as an SMTP server would have received it. Mail clients open these files directly.
///
/// Files are written on the sender's own queue, never on an event loop. Each is written to a
/// hidden temporary file and renamed into place, so a reader watching the folder never sees
/// half a message. The files hold magic links, which are credentials: they are readable by
/// the owner only.
public final class OutboxSender: EmailSender, Sendable {
    public let folder: String
    private let from: String
    private let queue = DispatchQueue(label: "txgate.email.outbox")

    /// Creates `folder` (and its parents) if needed.
    public init(folder: String, from: String = "txgate@localhost") throws {
        if let problem = MessageFormat.addressProblem(from) { throw EmailError.failed("outbox from '\(from)' \(problem)") }
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw EmailError.failed("outbox folder '\(folder)' cannot be created: \(Self.reason(error))")
        }
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder), isFolder.boolValue else {
            throw EmailError.failed("outbox '\(folder)' is not a folder")
        }
        self.folder = folder
        self.from = from
    }

    public func send(_ message: OutgoingEmail, on executor: CallbackExecutor,
                     _ done: @escaping (Result<Void, EmailError>) -> Void) {
        let reply = Completion(on: executor, done)
        queue.async {
            CurrentThread.unpin()
            reply(self.write(message).map { _ in () })
        }
    }

    /// Writes the message; returns the file's path. Runs on `queue`.
    func write(_ message: OutgoingEmail) -> Result<String, EmailError> {
        if let refusal = MessageFormat.check(message) { return .failure(refusal) }
        let now = MessageFormat.nowMs()
        let bytes = MessageFormat.render(message, from: from, epochMs: now,
                                         messageID: MessageFormat.newMessageID(from: from, epochMs: now))
        let name = "\(now)-\(MessageFormat.randomHex(bytes: 8)).eml"
        let path = (folder as NSString).appendingPathComponent(name)
        let temporary = (folder as NSString).appendingPathComponent(".\(name).tmp")
        if let problem = Self.writeFile(temporary, bytes) {
            unlink(temporary)
            return .failure(.failed("outbox '\(folder)': writing \(name): \(problem)"))
        }
        guard rename(temporary, path) == 0 else {
            let problem = String(cString: strerror(errno))
            unlink(temporary)
            return .failure(.failed("outbox '\(folder)': renaming into \(name): \(problem)"))
        }
        return .success(path)
    }

    /// Writes and flushes `bytes` to a new file; nil, or what went wrong.
    private static func writeFile(_ path: String, _ bytes: [UInt8]) -> String? {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return String(cString: strerror(errno)) }
        defer { close(fd) }
        var written = 0
        while written < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + written, bytes.count - written) }
            if n < 0 {
                if errno == EINTR { continue }
                return String(cString: strerror(errno))
            }
            written += n
        }
        // Flushed before the rename, so a crash leaves either no file or a whole one.
        guard fsync(fd) == 0 else { return String(cString: strerror(errno)) }
        return nil
    }

    private static func reason(_ error: Error) -> String {
        let underlying = (error as NSError).userInfo[NSUnderlyingErrorKey] as? NSError
        if let underlying, underlying.domain == NSPOSIXErrorDomain, let code = POSIXErrorCode(rawValue: Int32(underlying.code)) {
            return String(cString: strerror(code.rawValue))
        }
        return error.localizedDescription
    }
}
