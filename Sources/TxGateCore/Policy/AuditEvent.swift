import Foundation

/// One entry of the audit trail (issue 22 item 7): what happened to a transaction, who asked,
/// what they were shown, through which journey and in which request.
///
/// The gateway writes `entry` bytes into the store in the same step as the state change
/// (`AuditAppend`); the store adds its time and the record it found. The export
/// (`txgate audit`) turns a stored record back into an event (`init?(stored:)`) and writes
/// `jsonLine`: full TxIds, since the export is the record an operator asks for; never codes,
/// passwords or tokens, which no event holds.
public struct AuditEvent: Equatable, Sendable {
    public enum Kind: String, CaseIterable, Sendable {
        /// The transaction's journey completed it (COMPLETED).
        case approved
        /// The transaction's journey failed: the user declined, or failed a step.
        case declined
        /// A retry took the approved transaction: the one request it lets through.
        case consumed
        /// A retry was refused: unknown, expired or consumed, another subject, another body...
        case refused
    }

    public var kind: Kind
    public var txid: String
    /// Who asked: the approving user, or the subject of the retry.
    public var subject: String
    public var requestId: String
    public var realm: String?
    public var method: String?
    public var resource: String?
    /// The approving journey.
    public var journey: String?
    /// What the user was shown: the display text and the bound values.
    public var display: String?
    public var bound: [String: JSONValue]
    /// Why (declined: the journey's reason; refused: `TransactionRecord.mismatch`'s).
    public var reason: String?
    /// A refused retry's body digest, kept in the entry so that the export can say how the
    /// retry differed from the record the store found (`TransactionRecord.mismatch`).
    public var bodyDigest: String?
    /// An approval made with a passkey: the evidence (`WebAuthn.Evidence`'s JSON), which
    /// anyone can check later without the gateway (WIRE-EXTENSIONS §11b).
    public var passkey: JSONValue?
    /// When the store wrote it, epoch ms (set from the stored record; not part of `entry`).
    public var timeMs: Int64?
    /// The store's identity of the record (set from the stored record; not part of `entry`).
    public var id: String?

    public init(kind: Kind, txid: String, subject: String, requestId: String, realm: String? = nil, method: String? = nil,
                resource: String? = nil, journey: String? = nil, display: String? = nil, bound: [String: JSONValue] = [:],
                reason: String? = nil, bodyDigest: String? = nil, passkey: JSONValue? = nil) {
        self.kind = kind
        self.txid = txid
        self.subject = subject
        self.requestId = requestId
        self.realm = realm
        self.method = method
        self.resource = resource
        self.journey = journey
        self.display = display
        self.bound = bound
        self.reason = reason
        self.bodyDigest = bodyDigest
        self.passkey = passkey
    }

    /// An approval: everything shown comes from the record the journey completed.
    public static func approved(_ tx: TransactionRecord, requestId: String) -> AuditEvent {
        AuditEvent(kind: .approved, txid: tx.txid, subject: tx.subject, requestId: requestId, realm: tx.realm, method: tx.method,
                   resource: tx.resource, journey: tx.journey, display: tx.display, bound: tx.bound, passkey: tx.passkey)
    }

    /// A retry's consume, for `AuditAppend`: `consumed` if the store takes the record,
    /// `refused` if not. What was shown comes from the record the store finds.
    public static func consume(txid: String, _ request: TransactionBinding, requestId: String) -> AuditAppendPair {
        let asked = AuditEvent(kind: .consumed, txid: txid, subject: request.subject, requestId: requestId, realm: request.realm,
                               method: request.method, resource: request.resource)
        var refused = asked
        refused.kind = .refused
        refused.bodyDigest = request.bodyDigest
        return AuditAppendPair(consumed: asked.entry, refused: refused.entry)
    }

    /// The bytes a store keeps: canonical JSON, without the store's time and id.
    /// Written member by member in the order of their names (`AuditEventTests` checks the
    /// bytes against the canonical form of the same members in a dictionary).
    public var entry: [UInt8] {
        var w = CanonicalObjectWriter(capacity: 384)
        if let bodyDigest { w.member("bodyDigest", bodyDigest) }
        if !bound.isEmpty { w.member("bound", .object(bound)) }
        if let display { w.member("display", display) }
        w.member("event", kind.rawValue)
        if let journey { w.member("journey", journey) }
        if let method { w.member("method", method) }
        if let passkey { w.member("passkey", passkey) }
        if let realm { w.member("realm", realm) }
        if let reason { w.member("reason", reason) }
        w.member("requestId", requestId)
        if let resource { w.member("resource", resource) }
        w.member("subject", subject)
        w.member("txid", txid)
        return w.finish()
    }

    /// Reads `entry` bytes back; nil if they are not an event.
    public init?(entry: [UInt8]) {
        guard case .object(let o)? = JSONValue.parse(entry),
              let kind = o["event"]?.stringValue.flatMap(Kind.init(rawValue:)),
              let txid = o["txid"]?.stringValue, let subject = o["subject"]?.stringValue,
              let requestId = o["requestId"]?.stringValue else { return nil }
        if let b = o["bound"], b.objectValue == nil { return nil }
        self.init(kind: kind, txid: txid, subject: subject, requestId: requestId, realm: o["realm"]?.stringValue,
                  method: o["method"]?.stringValue, resource: o["resource"]?.stringValue, journey: o["journey"]?.stringValue,
                  display: o["display"]?.stringValue, bound: o["bound"]?.objectValue ?? [:], reason: o["reason"]?.stringValue,
                  bodyDigest: o["bodyDigest"]?.stringValue, passkey: o["passkey"])
    }

    /// The event a store's record holds, completed from the transaction the store found: what
    /// was shown (display, bound values, journey) as stored, and for a refused retry the
    /// reason, the same as the gateway's log gave (`PolicyDecider.refusal`).
    public init?(stored: StoredAuditRecord) {
        guard var event = AuditEvent(entry: stored.entry) else { return nil }
        event.timeMs = stored.timeMs
        event.id = stored.id
        let record = stored.found.flatMap(TransactionRecord.decode)
        if let record {
            event.journey = event.journey ?? record.journey
            event.display = event.display ?? record.display
            if event.bound.isEmpty { event.bound = record.bound }
        }
        if event.kind == .refused && event.reason == nil {
            if let record {
                let request = TransactionBinding(realm: event.realm ?? "", resource: event.resource ?? "", method: event.method ?? "",
                                                 subject: event.subject, bodyDigest: event.bodyDigest)
                event.reason = (record.mismatch(request, now: Int(stored.timeMs / 1000)) ?? .other).message
            } else {
                event.reason = RetryRefusal.unknown.message
            }
        }
        self = event
    }

    /// One line of `txgate audit --format jsonl`: canonical JSON, `time` in RFC 3339 (UTC, ms).
    public var jsonLine: String {
        guard case .object(var o)? = JSONValue.parse(entry) else { return "" }
        o["bodyDigest"] = nil
        if let timeMs { o["time"] = .string(Self.rfc3339(ms: timeMs)) }
        if let id { o["id"] = .string(id) }
        return JSONValue.object(o).canonical
    }

    /// RFC 3339 UTC with milliseconds.
    public static func rfc3339(ms: Int64) -> String {
        var t = time_t(ms >= 0 ? ms / 1000 : (ms - 999) / 1000)
        let millis = Int32(((ms % 1000) + 1000) % 1000)
        var tmv = tm()
        gmtime_r(&t, &tmv)
        func p(_ v: Int32, _ w: Int = 2) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, w - s.count)) + s
        }
        return "\(p(tmv.tm_year + 1900, 4))-\(p(tmv.tm_mon + 1))-\(p(tmv.tm_mday))T\(p(tmv.tm_hour)):\(p(tmv.tm_min)):\(p(tmv.tm_sec)).\(p(millis, 3))Z"
    }
}

/// The two entries of a consume: one is written, by what the store finds.
public struct AuditAppendPair: Equatable, Sendable {
    public var consumed: [UInt8]
    public var refused: [UInt8]

    public func append(retentionMs: Int) -> AuditAppend {
        AuditAppend(ifChanged: consumed, ifUnchanged: refused, retentionMs: retentionMs)
    }
}

extension TransactionBinding {
    /// A binding as a stored audit entry describes the request (no body at hand: the digest).
    init(realm: String, resource: String, method: String, subject: String, bodyDigest: String?) {
        self.realm = realm
        self.resource = resource
        self.method = method
        self.subject = subject
        self.bodyDigest = bodyDigest
        self.bound = [:]
    }
}

/// `txgate audit --since/--until`: an RFC 3339 time, or a duration back from now.
public enum AuditTime {
    /// Epoch ms for `text`: `2024-05-01T10:00:00Z` (any offset, optional fraction), or a
    /// duration before `nowMs` (`90s`, `15m`, `24h`, `7d`). Nil if it is neither.
    public static func parse(_ text: String, nowMs: Int64) -> Int64? {
        if let unit = text.last, let n = Int64(text.dropLast()), n >= 0 {
            let per: Int64? = switch unit {
            case "s": 1000
            case "m": 60_000
            case "h": 3_600_000
            case "d": 86_400_000
            default: nil
            }
            if let per {
                let (ms, overflow) = n.multipliedReportingOverflow(by: per)
                return overflow ? nil : nowMs - ms
            }
        }
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let d = f.date(from: text) { return Int64((d.timeIntervalSince1970 * 1000).rounded()) }
        f.formatOptions = [.withInternetDateTime]
        if let d = f.date(from: text) { return Int64((d.timeIntervalSince1970 * 1000).rounded()) }
        return nil
    }
}
