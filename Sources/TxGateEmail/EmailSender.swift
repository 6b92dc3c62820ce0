import TxGateCore

/// One plain-text email to one recipient.
public struct EmailMessage: Sendable, Equatable {
    public var to: String
    public var subject: String
    /// Plain text. Any line ending (LF, CRLF, CR) is sent as CRLF.
    public var body: String

    public init(to: String, subject: String, body: String) {
        self.to = to
        self.subject = subject
        self.body = body
    }
}

public enum EmailError: Error, Equatable, CustomStringConvertible, Sendable {
    /// What went wrong and where: the server or folder, the step, and the underlying error.
    case failed(String)

    public var description: String {
        switch self {
        case .failed(let s): return "email not sent: \(s)"
        }
    }
}

/// Where the email nodes' messages go: an SMTP server or, for development, an outbox folder.
public protocol EmailSender: AnyObject, Sendable {
    /// Delivers one message. Never blocks the caller; `done` runs on `executor`, never on the
    /// caller's stack, also when the message is refused before anything is sent.
    func send(_ message: EmailMessage, on executor: CallbackExecutor, _ done: @escaping (Result<Void, EmailError>) -> Void)
}
