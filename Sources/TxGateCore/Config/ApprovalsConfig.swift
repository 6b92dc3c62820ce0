import Foundation

/// `approvals`: how `ApproveElsewhere` reaches the person (issue 27). `email` needs nothing
/// here (it uses `email`); `webhook` is configured here.
public struct ApprovalsConfig: ConfigObject, Sendable, Equatable {
    public var webhook: WebhookConfig?
    public var email = ApprovalEmailConfig()

    public init() {}

    enum Key: String, ConfigKey {
        case webhook, email
    }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        webhook = o.optional(.webhook)
        email = o.value(.email, default: email)
    }
}

/// `approvals.email`: the email channel's message. Templates take `{username}`, `{display}`
/// (what is approved), `{code}` (the binding code) and, in the body, `{link}` (the approval page).
public struct ApprovalEmailConfig: ConfigObject, Sendable, Equatable {
    public static let subjectVariables = ["username", "code"]
    public static let bodyVariables = ["username", "display", "code", "link"]
    public var subject = "Approve a request (code {code})"
    public var body = "Hello {username},\n\nYou are asked to approve:\n\n{display}\n\nThe screen that asked shows the code {code}. If it does not, or you did not ask, deny it.\n\nApprove or deny here (you will sign in first):\n\n{link}\n"

    public init() {}

    enum Key: String, ConfigKey {
        case subject, body
    }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        subject = o.value(.subject, default: subject)
        body = o.value(.body, default: body)
        for (key, text, known) in [(Key.subject, subject, Self.subjectVariables), (.body, body, Self.bodyVariables)] {
            if let unknown = EmailTemplate.unknownPlaceholders(in: text, known: Set(known)).first {
                o.invalid(key, "unknown placeholder '{\(unknown)}' (this \(key.rawValue) may use " + known.map { "{\($0)}" }.joined(separator: ", ") + ")")
            }
        }
        if !body.contains("{link}") { o.invalid(.body, "must contain {link} (the approval page)") }
    }
}

/// `approvals.webhook`: a JSON POST of each approval request to `url`, signed with the secret
/// in `secretFile` (`WebhookSignature`), retried with backoff until `attempts` are spent.
public struct WebhookConfig: ConfigObject, Sendable, Equatable {
    public var url = HTTPURL(parsing: "http://127.0.0.1/")!
    /// A file holding the HMAC secret (its bytes, a trailing newline removed); at least 16 bytes.
    public var secretFile = ""
    /// Each attempt's limit: connect, send and the whole answer.
    public var timeoutMs = 5_000
    /// Attempts in all (the first and the retries).
    public var attempts = 5
    /// The wait before the first retry; each further one doubles it (at most 60 s).
    public var backoffMs = 1_000
    /// CA bundle that verifies an `https://` receiver (default: the system's).
    public var caFile: String?

    public init() {}

    /// The secret in a `secretFile`'s bytes: without a trailing newline.
    public static func secret(_ data: Data) -> [UInt8] {
        var b = [UInt8](data)
        while let last = b.last, last == 0x0A || last == 0x0D { b.removeLast() }
        return b
    }

    enum Key: String, ConfigKey {
        case url, secretFile, timeoutMs, attempts, backoffMs, caFile
    }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        if let s: String = o.required(.url) {
            if let u = HTTPURL(parsing: s) { url = u } else { o.invalid(.url, "'\(s)' is not an http:// or https:// URL") }
        }
        secretFile = o.required(.secretFile) ?? ""
        timeoutMs = o.int(.timeoutMs, default: timeoutMs, atLeast: 1)
        attempts = o.int(.attempts, default: attempts, atLeast: 1)
        if attempts > 20 { o.invalid(.attempts, "must be at most 20") }
        backoffMs = o.int(.backoffMs, default: backoffMs, atLeast: 1)
        caFile = o.optional(.caFile)
    }
}
