import TxGateCore

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
    func send(_ message: OutgoingEmail, on executor: CallbackExecutor, _ done: @escaping (Result<Void, EmailError>) -> Void)
}
