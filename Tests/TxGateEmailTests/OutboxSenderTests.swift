import Foundation
import Testing
import TxGateCore
import TestSupport
@testable import TxGateEmail

@Suite struct OutboxSenderTests {
    @Test func writesOneParseableEmlFile() async throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let outbox = folder.path("var/outbox")
        let sender = try OutboxSender(folder: outbox, from: "noreply@bank.example")
        let body = "Hello alice,\nSign in: https://bank.example/am/XUI/?suspendedId=Ab3_x&goto=%2Fpay\n.\nBye\n"
        let before = Int64(Date().timeIntervalSince1970 * 1000)
        let delivery = await deliver(OutgoingEmail(to: "alice@example.com", subject: "Your sign-in link", body: body),
                                     with: sender)

        #expect(delivery.succeeded, "\(String(describing: delivery.error))")
        #expect(delivery.onExecutor)
        #expect(!delivery.onCallingThread)
        let names = try FileManager.default.contentsOfDirectory(atPath: outbox)
        try #require(names.count == 1, "\(names)")  // no temporary file left behind
        let name = names[0]
        #expect(name.wholeMatch(of: #/[0-9]{13}-[0-9a-f]{16}\.eml/#) != nil, "\(name)")
        let stamp = try #require(Int64(name.prefix(13)))
        #expect(stamp >= before && stamp < before + 60_000)
        let path = (outbox as NSString).appendingPathComponent(name)

        let raw = try Data(contentsOf: URL(fileURLWithPath: path))
        let bytes = [UInt8](raw)
        for (i, b) in bytes.enumerated() where b == 10 {
            #expect(i > 0 && bytes[i - 1] == 13, "a bare LF at byte \(i)")
        }
        for (i, b) in bytes.enumerated() where b == 13 {
            #expect(i + 1 < bytes.count && bytes[i + 1] == 10, "a bare CR at byte \(i)")
        }
        let text = String(decoding: bytes, as: UTF8.self)
        let parts = text.components(separatedBy: "\r\n\r\n")
        let headers = parts[0].components(separatedBy: "\r\n")
        #expect(headers.map { $0.prefix { $0 != ":" } } == [
            "Date", "From", "To", "Subject", "Message-ID", "MIME-Version", "Content-Type", "Content-Transfer-Encoding",
        ])
        #expect(headers.contains("From: noreply@bank.example"))
        #expect(headers.contains("To: alice@example.com"))
        #expect(headers.contains("Subject: Your sign-in link"))
        #expect(headers.contains("MIME-Version: 1.0"))
        #expect(headers.contains("Content-Type: text/plain; charset=utf-8"))
        #expect(headers.contains("Content-Transfer-Encoding: 7bit"))
        // Plain ASCII stays as written, so the link can be copied from the file.
        #expect(text.hasSuffix("\r\n\r\n" + body.replacingOccurrences(of: "\n", with: "\r\n")))

        let mail = try ParsedMail(file: path)
        #expect(mail.to == "alice@example.com")
        #expect(mail.from == "noreply@bank.example")
        #expect(mail.subject == "Your sign-in link")
        #expect(mail.body == body)
        #expect(mail.messageID.wholeMatch(of: #/<[0-9]{13}\.[0-9a-f]{24}@bank\.example>/#) != nil, "\(mail.messageID)")
        #expect(abs((ISO8601DateFormatter().date(from: mail.dateUTC)?.timeIntervalSince1970 ?? 0) - Double(stamp) / 1000) < 2,
                "\(mail.date)")
        #expect(mail.defects.isEmpty, "\(mail.defects)")

        // Magic links are credentials: only the gateway's user may read them.
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
    }

    @Test func nonASCIIIsQuotedPrintableAndDecodesBack() async throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let sender = try OutboxSender(folder: folder.path)
        let subject = "Grüße 🏦"
        let body = "Jürgen,\r\nthe = sign stays.\r\n" + String(repeating: "x", count: 1200) + "\r\n"
        let delivery = await deliver(OutgoingEmail(to: "jurgen@example.com", subject: subject, body: body), with: sender)
        #expect(delivery.succeeded, "\(String(describing: delivery.error))")

        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path)
        try #require(names.count == 1)
        let path = folder.path(names[0])
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.contains("\r\nContent-Transfer-Encoding: quoted-printable\r\n"))
        #expect(text.contains("\r\nSubject: =?UTF-8?B?"))
        #expect(text.contains("\r\nFrom: txgate@localhost\r\n"))
        #expect(text.unicodeScalars.allSatisfy { $0.isASCII }, "quoted-printable output is ASCII")
        for line in text.components(separatedBy: "\r\n") { #expect(line.count <= 76, "\(line.count): \(line.prefix(40))") }
        let mail = try ParsedMail(file: path)
        #expect(mail.subject == subject)
        #expect(mail.body == body.replacingOccurrences(of: "\r\n", with: "\n"))
        #expect(mail.defects.isEmpty, "\(mail.defects)")
    }

    @Test func eachMessageIsItsOwnFile() async throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let sender = try OutboxSender(folder: folder.path)
        for i in 0..<5 {
            let d = await deliver(OutgoingEmail(to: "u\(i)@example.com", subject: "n\(i)", body: "b"), with: sender)
            #expect(d.succeeded)
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        #expect(names.count == 5)
        let subjects = try names.map { try ParsedMail(file: folder.path($0)).subject }
        #expect(Set(subjects) == ["n0", "n1", "n2", "n3", "n4"])
    }

    @Test func headerInjectionWritesNothing() async throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let sender = try OutboxSender(folder: folder.path)
        for message in [
            OutgoingEmail(to: "alice@example.com", subject: "Hi\r\nBcc: mallory@evil.example", body: "b"),
            OutgoingEmail(to: "alice@example.com\nBcc: mallory@evil.example", subject: "s", body: "b"),
            OutgoingEmail(to: "alice smith@example.com", subject: "s", body: "b"),
        ] {
            let delivery = await deliver(message, with: sender)
            #expect(delivery.error != nil, "written: \(message)")
            #expect(delivery.onExecutor)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty)
    }

    @Test func aFolderThatCannotBeMadeIsRefusedAtStart() throws {
        let folder = try TemporaryDirectory()
        defer { folder.remove() }
        let file = folder.path("a-file")
        _ = FileManager.default.createFile(atPath: file, contents: Data("x".utf8))
        #expect(throws: EmailError.self) { try OutboxSender(folder: file) }
        do {
            _ = try OutboxSender(folder: file + "/outbox")
            Issue.record("an outbox under a file was accepted")
        } catch let error as EmailError {
            #expect(error.description.contains("outbox folder '\(file)/outbox' cannot be created"), "\(error)")
        }
    }
}
