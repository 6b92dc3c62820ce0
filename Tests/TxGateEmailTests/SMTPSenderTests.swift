import Foundation
import Testing
import TxGateCore
import TestSupport
@testable import TxGateEmail

/// SMTPSender against a real SMTP server (aiosmtpd) on 127.0.0.1.
@Suite struct SMTPSenderTests {
    static let link = "https://bank.example/am/XUI/?realm=/&suspendedId=Ab3_xYz-09&goto=%2Fpay"

    /// A sender from noreply@bank.example, without credentials.
    static func sender(_ url: String, startTLS: Bool = false, caFile: String? = nil, timeoutMs: Int = 5000,
                       retries: Int = 0, backoffMs: Int = 500) throws -> SMTPSender {
        try SMTPSender(url: url, username: nil, password: nil, from: "noreply@bank.example", startTLS: startTLS,
                       caFile: caFile, timeoutMs: timeoutMs, retries: retries, backoffMs: backoffMs)
    }

    @Test func deliversToARealServer() async throws {
        let server = try SMTPServer()
        defer { server.stop() }
        let sender = try Self.sender(server.url)
        // A line that is just "." would end the SMTP DATA early if it were not escaped.
        let body = "Hello alice,\n\nSign in: \(Self.link)\n.\n.hidden\nThe end.\n"
        let delivery = await deliver(OutgoingEmail(to: "alice@example.com", subject: "Your sign-in link", body: body),
                                     with: sender)

        #expect(delivery.succeeded, "\(String(describing: delivery.error))")
        #expect(delivery.onExecutor)
        #expect(!delivery.onCallingThread)
        let mail = try server.theOnlyMessage()
        #expect(mail.to == "alice@example.com")
        #expect(mail.from == "noreply@bank.example")
        #expect(mail.subject == "Your sign-in link")
        #expect(mail.body == body)
        #expect(mail.envelopeFrom == "noreply@bank.example")
        #expect(mail.envelopeTo == "alice@example.com")
        #expect(mail.contentType == "text/plain")
        #expect(mail.charset == "utf-8")
        #expect(mail.messageID.hasSuffix("@bank.example>"))
        #expect(mail.defects.isEmpty, "\(mail.defects)")
    }

    @Test func deliversNonASCIISubjectAndBody() async throws {
        let server = try SMTPServer()
        defer { server.stop() }
        let sender = try Self.sender(server.url)
        let subject = "Votre lien de connexion — Zürich 🏦 " + String(repeating: "é", count: 60)
        let body = "Grüße, Jürgen!\nCliquez: \(Self.link)\n" + String(repeating: "ü", count: 200) + "\ntrailing space \n"
        let delivery = await deliver(OutgoingEmail(to: "jurgen@example.com", subject: subject, body: body), with: sender)

        #expect(delivery.succeeded, "\(String(describing: delivery.error))")
        let mail = try server.theOnlyMessage()
        #expect(mail.subject == subject)
        #expect(mail.body == body)
        #expect(mail.transferEncoding == "quoted-printable")
        #expect(mail.defects.isEmpty, "\(mail.defects)")
    }

    @Test func serverDownFailsClearlyAfterBoundedRetries() async throws {
        let port = try Ports.free()
        let sender = try Self.sender("smtp://127.0.0.1:\(port)", timeoutMs: 1000, retries: 2, backoffMs: 100)
        let delivery = await deliver(OutgoingEmail(to: "alice@example.com", subject: "s", body: "b"), with: sender)

        let error = try #require(delivery.error)
        let text = error.description
        #expect(text.hasPrefix("email not sent: smtp://127.0.0.1:\(port): cannot connect: "), "\(text)")
        #expect(text.contains("Couldn't connect to server"), "\(text)")
        #expect(text.hasSuffix("after 3 attempts"), "\(text)")
        // Two backoffs (100 + 200 ms) were waited, and no more than that by much.
        #expect(delivery.completedAfter >= 0.3, "\(delivery.completedAfter)")
        #expect(delivery.completedAfter < 5, "\(delivery.completedAfter)")
        #expect(delivery.sendReturnedAfter < 0.1, "send blocked its caller for \(delivery.sendReturnedAfter) s")
        #expect(delivery.onExecutor)
        #expect(!delivery.onCallingThread)
    }

    @Test func retriesUntilTheServerComesUp() async throws {
        let port = try Ports.free()
        // Eight retries (backoffs doubling from 200 ms, some 50 s in all): in the full suite on two
        // cores this task can wait many seconds for a thread before the server below is started.
        let sender = try Self.sender("smtp://127.0.0.1:\(port)", timeoutMs: 2000, retries: 8, backoffMs: 200)
        let executor = TestExecutor()
        async let delivery = deliver(OutgoingEmail(to: "alice@example.com", subject: "late", body: "still here"),
                                     with: sender, executor: executor)
        // The first attempt finds nothing listening; the server starts during the backoff.
        try await Task.sleep(nanoseconds: 150_000_000)
        let server = try SMTPServer(port: port)
        defer { server.stop() }
        let result = await delivery

        #expect(result.succeeded, "\(String(describing: result.error))")
        #expect(result.completedAfter >= 0.2, "delivered without a retry? \(result.completedAfter) s")
        #expect(try server.theOnlyMessage().subject == "late")
    }

    @Test func silentServerTimesOut() async throws {
        let (fd, port) = try Ports.silentListener()
        defer { close(fd) }
        let sender = try Self.sender("smtp://127.0.0.1:\(port)", timeoutMs: 300, retries: 1, backoffMs: 50)
        let delivery = await deliver(OutgoingEmail(to: "alice@example.com", subject: "s", body: "b"), with: sender)

        let error = try #require(delivery.error)
        #expect(error.description.contains("smtp://127.0.0.1:\(port): timed out: "), "\(error)")
        #expect(error.description.hasSuffix("after 2 attempts"), "\(error)")
        #expect(delivery.completedAfter >= 0.6 && delivery.completedAfter < 3, "\(delivery.completedAfter)")
    }

    @Test func serverThatStallsAfterGreetingTimesOut() async throws {
        let server = try StallingSMTPServer()
        defer { server.stop() }
        let sender = try Self.sender("smtp://127.0.0.1:\(server.port)", timeoutMs: 400, retries: 1, backoffMs: 50)
        let delivery = await deliver(OutgoingEmail(to: "alice@example.com", subject: "s", body: "b"), with: sender, timeout: 10)

        let error = try #require(delivery.error)
        #expect(error.description.contains("smtp://127.0.0.1:\(server.port): timed out: "), "\(error)")
        #expect(error.description.hasSuffix("after 2 attempts"), "\(error)")
        #expect(delivery.completedAfter >= 0.8 && delivery.completedAfter < 3, "\(delivery.completedAfter)")
    }

    @Test func startTLSWithTheServersCA() async throws {
        let server = try SMTPServer(selfSignedTLS: true)
        defer { server.stop() }
        let sender = try Self.sender(server.url, startTLS: true, caFile: server.certificate?.cert)
        let delivery = await deliver(OutgoingEmail(to: "alice@example.com", subject: "over TLS", body: "secret link\n"),
                                     with: sender)

        #expect(delivery.succeeded, "\(String(describing: delivery.error))")
        let mail = try server.theOnlyMessage()
        #expect(mail.subject == "over TLS")
        #expect(mail.body == "secret link\n")
    }

    @Test func startTLSRefusesAnUntrustedCertificateWithoutRetrying() async throws {
        let server = try SMTPServer(selfSignedTLS: true)
        defer { server.stop() }
        // No caFile: the self-signed certificate is not trusted, and nothing may be sent.
        let sender = try Self.sender(server.url, startTLS: true, retries: 2, backoffMs: 2000)
        let delivery = await deliver(OutgoingEmail(to: "alice@example.com", subject: "s", body: "b"), with: sender)

        let error = try #require(delivery.error)
        #expect(error.description.contains("\(server.url): TLS certificate refused: "), "\(error)")
        #expect(error.description.hasSuffix("after 1 attempt"), "\(error)")
        #expect(delivery.completedAfter < 2, "a certificate error was retried: \(delivery.completedAfter) s")
        #expect(server.messages().isEmpty)
    }

    @Test func permanentRefusalIsNotRetried() async throws {
        // This server requires STARTTLS; a sender without it is refused with "530 ...".
        let server = try SMTPServer(selfSignedTLS: true)
        defer { server.stop() }
        let sender = try Self.sender(server.url, retries: 2, backoffMs: 2000)
        let delivery = await deliver(OutgoingEmail(to: "alice@example.com", subject: "s", body: "b"), with: sender)

        let error = try #require(delivery.error)
        #expect(error.description.contains(server.url), "\(error)")
        #expect(error.description.contains("530"), "\(error)")
        #expect(error.description.hasSuffix("after 1 attempt"), "\(error)")
        #expect(delivery.completedAfter < 2, "a 5xx reply was retried: \(delivery.completedAfter) s")
        #expect(server.messages().isEmpty)
    }

    @Test func headerInjectionIsRefusedAndNothingIsSent() async throws {
        let server = try SMTPServer()
        defer { server.stop() }
        let sender = try Self.sender(server.url)
        let refused = [
            OutgoingEmail(to: "alice@example.com", subject: "Hi\r\nBcc: mallory@evil.example", body: "b"),
            OutgoingEmail(to: "alice@example.com", subject: "Hi\nBcc: mallory@evil.example", body: "b"),
            OutgoingEmail(to: "alice@example.com", subject: "Hi\rBcc: mallory@evil.example", body: "b"),
            OutgoingEmail(to: "alice@example.com\r\nBcc: mallory@evil.example", subject: "s", body: "b"),
            OutgoingEmail(to: "alice@example.com\n", subject: "s", body: "b"),
        ]
        for message in refused {
            let delivery = await deliver(message, with: sender)
            let error = try #require(delivery.error, "sent: \(message)")
            #expect(error.description.contains("line break"), "\(error)")
            #expect(delivery.onExecutor)
            #expect(!delivery.onCallingThread)
        }
        for to in ["alice", "alice@", "@example.com", "alice@bob@example.com", "alice smith@example.com",
                   "<alice@example.com>", "alice@example.com,mallory@evil.example", "ålice@example.com", ""] {
            let delivery = await deliver(OutgoingEmail(to: to, subject: "s", body: "b"), with: sender)
            let error = try #require(delivery.error, "sent to '\(to)'")
            #expect(error.description.contains("recipient '\(to)' is not an email address"), "\(error)")
        }
        // The server is up and would have taken them: a good message after them is the only one.
        let good = await deliver(OutgoingEmail(to: "alice@example.com", subject: "only this", body: "b"), with: sender)
        #expect(good.succeeded, "\(String(describing: good.error))")
        #expect(try server.theOnlyMessage().subject == "only this")
    }

    @Test func badConfigurationIsRefusedAtStart() throws {
        #expect(throws: EmailError.failed("smtp url 'http://mail.example:25' is not smtp://host:port or smtps://host:port")) {
            try SMTPSender(url: "http://mail.example:25", username: nil, password: nil, from: "a@b.example", startTLS: true)
        }
        #expect(throws: EmailError.self) {
            try SMTPSender(url: "smtp://mail.example:25", username: nil, password: nil, from: "not an address", startTLS: true)
        }
        #expect(throws: EmailError.failed("smtp caFile '/nonexistent/ca.pem' cannot be read")) {
            try SMTPSender(url: "smtp://mail.example:25", username: nil, password: nil, from: "a@b.example",
                           startTLS: true, caFile: "/nonexistent/ca.pem")
        }
    }

    @Test func serverNameInErrorsLeavesOutCredentials() {
        #expect(SMTPSender.server(of: "smtps://user:secret@mail.example:465/helo.example") == "smtps://mail.example:465")
        #expect(SMTPSender.server(of: "smtp://127.0.0.1:2525") == "smtp://127.0.0.1:2525")
    }
}

extension SMTPServer {
    /// The one message the server received, as Python's email package reads it; fails the
    /// test unless exactly one arrived.
    func theOnlyMessage(sourceLocation: SourceLocation = #_sourceLocation) throws -> ParsedMail {
        let files = waitForMessages(1)
        try #require(files.count == 1, sourceLocation: sourceLocation)
        return try ParsedMail(file: files[0])
    }
}
