/// An audit record a store writes in the same step as the operation it records (issue 22
/// item 7): the record exists if and only if the operation happened, whatever kills the
/// gateway. The bytes are opaque to the store (`AuditEvent.entry`).
public struct AuditAppend: Equatable, Sendable {
    /// Written when the operation changed state (`takeIf` took the value, `compareAndSwap` swapped).
    public var ifChanged: [UInt8]?
    /// Written when it did not (`takeIf` found the value absent, or kept it: a refused retry).
    public var ifUnchanged: [UInt8]?
    /// How long the store keeps the record (`audit.retentionDays`), in milliseconds, > 0.
    public var retentionMs: Int

    public init(ifChanged: [UInt8]? = nil, ifUnchanged: [UInt8]? = nil, retentionMs: Int) {
        self.ifChanged = ifChanged
        self.ifUnchanged = ifUnchanged
        self.retentionMs = retentionMs
    }

    /// The entry for an operation's outcome, if one is to be written.
    public func entry(changed: Bool) -> [UInt8]? { changed ? ifChanged : ifUnchanged }
}

/// One audit record as a store kept it, for the export (`txgate audit`).
public struct StoredAuditRecord: Equatable, Sendable {
    /// When the store wrote it, epoch milliseconds: the gateway's clock for SQLite (the one
    /// its expiries use), Redis's own for Redis (the stream ID).
    public var timeMs: Int64
    /// The store's identity of the record, increasing with time: SQLite's row id, Redis's
    /// stream ID (`<ms>-<seq>`).
    public var id: String
    /// The caller's bytes (`AuditAppend`, `appendAudit`).
    public var entry: [UInt8]
    /// The value the operation found under its key, in this epoch (the transaction taken or
    /// kept by `takeIf`, or read by `appendAudit`): what the user was shown, as stored.
    public var found: [UInt8]?

    public init(timeMs: Int64, id: String, entry: [UInt8], found: [UInt8]?) {
        self.timeMs = timeMs
        self.id = id
        self.entry = entry
        self.found = found
    }
}
