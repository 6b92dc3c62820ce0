import Foundation

/// `audit`: the audit trail of approvals, denials, consumptions and refusals, kept in the store
/// (issue 22 item 7).
public struct AuditConfig: ConfigObject, Sendable, Equatable {
    /// How long a record is kept, in days (1 to 3650).
    public var retentionDays = 90

    public init() {}

    enum Key: String, ConfigKey {
        case retentionDays
    }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        retentionDays = o.int(.retentionDays, default: retentionDays, atLeast: 1)
        if retentionDays > 3650 { o.invalid(.retentionDays, "must be at most 3650 (ten years)") }
    }

    /// `retentionDays` in milliseconds, as the stores take it.
    public var retentionMs: Int { retentionDays * 86_400_000 }
}
