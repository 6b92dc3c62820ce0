import Foundation
import TxGateCrypto

/// How an approval request reaches the person (`ApproveElsewhere`'s `channels`). No webpush:
/// see docs/WIRE-EXTENSIONS.md.
public enum ApprovalChannelKind: String, CaseIterable, Codable, Sendable {
    case email, webhook
}

/// What a channel delivers: the link to the approval page, what is approved and the binding
/// code. Never logged whole (the link names the request).
public struct ApprovalNotice: Equatable, Sendable {
    public var id: String
    public var subject: String
    public var link: String
    public var display: String
    public var bindingCode: String
    public var expiresMs: Int64

    public init(_ request: ApprovalRequest, publicURL: String) {
        id = request.id
        subject = request.subject
        link = Self.link(publicURL: publicURL, id: request.id)
        display = request.displayText
        bindingCode = request.bindingCode
        expiresMs = request.expiresMs
    }

    /// The approval page for request `id` (the page names it; the person's own session decides).
    public static func link(publicURL: String, id: String) -> String {
        publicURL + ApprovalPagePath.path + "?id=" + id
    }

    /// The webhook's JSON body (docs/WIRE-EXTENSIONS.md §"Approve elsewhere"), keys sorted.
    public var webhookBody: [UInt8] {
        JSONValue.object([
            "type": "approval_request", "id": .string(id), "subject": .string(subject), "link": .string(link),
            "display": .string(display), "bindingCode": .string(bindingCode), "expiresAt": .number(Int(expiresMs / 1000)),
        ]).canonicalBytes
    }

    /// The email: a link to the approval page, with what is approved and the code
    /// (`approvals.email`'s templates).
    public func email(to address: String, _ templates: ApprovalEmailConfig = ApprovalEmailConfig()) -> OutgoingEmail {
        let values = ["username": subject, "display": display, "code": bindingCode, "link": link]
        return OutgoingEmail(to: address, subject: EmailTemplate.render(templates.subject, values),
                             body: EmailTemplate.render(templates.body, values))
    }
}

public enum ApprovalPagePath {
    public static let path = "/am/XUI/approval"
}

extension ApprovalRequest {
    /// What the person is asked to approve, as one text.
    public var displayText: String {
        switch matter {
        case .transaction(_, let display, let bound):
            let rows = bound.keys.sorted().map { "\($0): \(bound[$0].map(Self.plain) ?? "")" }
            return ([display].compactMap { $0 } + rows).joined(separator: "\n").nonEmpty ?? "A transaction"
        case .stepUp(let journey):
            return "Sign-in (\(journey))"
        }
    }

    private static func plain(_ v: JSONValue) -> String { v.stringValue ?? v.canonical }

    /// The approval page's status answer: what the page shows, for the request's own user.
    public func statusJSON(nowMs: Int64) -> String {
        let shown: State? = state == .pending && isExpired(nowMs: nowMs) ? nil : state
        return JSONValue.object([
            "id": .string(id), "state": .string(shown?.rawValue ?? "expired"), "display": .string(displayText),
            "bindingCode": .string(bindingCode), "expiresInS": .number(Int(max(0, expiresMs - nowMs) / 1000)),
        ]).canonical
    }
}

private extension String {
    var nonEmpty: String? { isEmpty ? nil : self }
}

/// The webhook's signature: HMAC-SHA256 over `"<timestamp>." + body` with the configured
/// secret, hex, as `X-TxGate-Signature: v1=<hex>`; the timestamp (Unix seconds) in
/// `X-TxGate-Timestamp`. The receiver recomputes it and refuses an old timestamp (replay).
public enum WebhookSignature {
    public static let signatureHeader = "X-TxGate-Signature"
    public static let timestampHeader = "X-TxGate-Timestamp"

    public static func sign(secret: [UInt8], timestamp: Int, body: [UInt8]) -> String {
        "v1=" + Crypto.hex(Crypto.hmacSHA256(key: secret, data: Array("\(timestamp).".utf8) + body))
    }

    /// Milliseconds to wait before attempt `attempt` (2, 3, ...): doubling from `baseMs`, at most 60 s.
    public static func backoffMs(attempt: Int, baseMs: Int) -> Int {
        min(60_000, baseMs << min(max(0, attempt - 2), 16))
    }
}
