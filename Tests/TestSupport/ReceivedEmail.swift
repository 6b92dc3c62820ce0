import Foundation

/// One email as received (an outbox `.eml` file, or a message in the SMTP server's Maildir),
/// split into its header fields and its body. Line endings are normalized to LF; folded header
/// lines are unfolded.
public struct ReceivedEmail: CustomStringConvertible {
    public let file: URL
    public let raw: String
    public let headers: [(name: String, value: String)]
    public let body: String

    public init(file: URL) throws {
        guard let data = FileManager.default.contents(atPath: file.path) else {
            throw HarnessError("cannot read the email \(file.path)")
        }
        self.file = file
        raw = String(decoding: data, as: UTF8.self)
        let text = raw.replacingOccurrences(of: "\r\n", with: "\n")
        let head: Substring
        if let split = text.range(of: "\n\n") {
            head = text[..<split.lowerBound]
            body = String(text[split.upperBound...])
        } else {
            head = text[...]
            body = ""
        }
        var fields: [(name: String, value: String)] = []
        for line in head.split(separator: "\n", omittingEmptySubsequences: false) {
            if let first = line.first, first == " " || first == "\t", !fields.isEmpty {
                fields[fields.count - 1].value += " " + line.trimmingCharacters(in: .whitespaces)
                continue
            }
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields.append((name: String(line[..<colon]),
                           value: line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        headers = fields
    }

    public func header(_ name: String) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    /// The first magic link in the body: `<prefix>suspendedId=<id>`; nil if there is none.
    public func magicLink() -> (link: String, id: String)? {
        let pattern = #/(https?://[^\s]*[?&]suspendedId=([A-Za-z0-9_-]+))/#
        guard let m = body.firstMatch(of: pattern) else { return nil }
        return (String(m.output.1), String(m.output.2))
    }

    /// The six-digit code of an EmailOTP message, or nil.
    public func oneTimeCode() -> String? {
        guard let m = body.firstMatch(of: #/Your one-time code is ([0-9]{6})\./#) else { return nil }
        return String(m.output.1)
    }

    public var description: String { "\(file.lastPathComponent):\n\(raw.count > 2000 ? String(raw.prefix(2000)) + "…" : raw)" }
}

/// The shared SMTP sink (TestSupport's `SMTPServer`: aiosmtpd with its Mailbox handler, which
/// adds X-MailFrom and X-RcptTo, the envelope it saw), read as `ReceivedEmail`s.
extension SMTPServer {
    /// The messages delivered so far (Maildir `new/`), oldest first.
    public func receivedEmails() throws -> [ReceivedEmail] {
        let files = messages().map { URL(fileURLWithPath: $0) }
        let dated = files.map { f -> (URL, Date) in
            let d = (try? FileManager.default.attributesOfItem(atPath: f.path)[.modificationDate] as? Date) ?? .distantPast
            return (f, d)
        }
        return try dated.sorted { $0.1 < $1.1 }.map { try ReceivedEmail(file: $0.0) }
    }

    /// Waits until at least `count` messages have arrived; returns them all.
    public func waitForEmails(_ count: Int = 1, timeout: Double = 10) throws -> [ReceivedEmail] {
        var found: [ReceivedEmail] = []
        let ok = try Timing.poll(timeout: timeout, interval: 0.05) {
            found = try receivedEmails()
            return found.count >= count
        }
        guard ok else {
            throw HarnessError("aiosmtpd received \(found.count) message(s), expected \(count), within \(timeout) s; its stderr:\n\(stderr.suffix(2000))")
        }
        return found
    }
}

public enum MailTools {
    /// The `.eml` files in an outbox folder (hidden temporary files excluded), oldest first
    /// (their names start with the epoch milliseconds).
    public static func outboxFiles(_ folder: URL) -> [URL] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return names.filter { $0.hasSuffix(".eml") && !$0.hasPrefix(".") }.sorted().map { folder.appendingPathComponent($0) }
    }

    /// Everything in an outbox folder, hidden files included (an empty outbox is really empty).
    public static func outboxEntries(_ folder: URL) -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
    }

    /// Waits until the outbox holds at least `count` messages; returns them, oldest first.
    public static func waitForOutbox(_ folder: URL, count: Int = 1, timeout: Double = 10) throws -> [ReceivedEmail] {
        var files: [URL] = []
        let ok = Timing.poll(timeout: timeout, interval: 0.05) {
            files = outboxFiles(folder)
            return files.count >= count
        }
        guard ok else {
            throw HarnessError("the outbox \(folder.path) holds \(files.count) message(s), expected \(count), after \(timeout) s: \(outboxEntries(folder))")
        }
        return try files.map { try ReceivedEmail(file: $0) }
    }
}

extension Testbed {
    /// Starts the SMTP sink on a free port; `cleanup()` stops it.
    public func startSMTPServer() throws -> SMTPServer {
        let server = try SMTPServer()
        onCleanup { server.stop() }
        return server
    }
}
