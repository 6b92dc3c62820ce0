import Foundation
import TxGateCrypto
import HTTPCore

/// A one-shot authorization (WIRE.md §2): created when policy needs it, completed by the
/// subject's journey, consumed by exactly one retried request.
public struct TransactionRecord: Codable, Equatable, Sendable {
    public enum State: String, Codable, Sendable { case created = "CREATED", completed = "COMPLETED" }

    /// The members, in one immutable object that copies share: a record travels through every
    /// step of a challenge and of an approval (plans, store callbacks, audit events), and a copy
    /// of a dozen strings and a dictionary retained each of them. A change makes a new object
    /// (records change once in their life: approved).
    private struct Members: Codable, Equatable, Sendable {
        var txid: String
        var state: State
        var realm: String
        var resource: String
        var method: String
        var subject: String
        var journey: String
        var bodyDigest: String?
        var bound: [String: JSONValue]
        var display: String?
        var expires: Int
        var passkey: JSONValue?
        var authorizationDetails: JSONValue?
        var knownSeal = Unequated()

        enum CodingKeys: String, CodingKey {
            case txid, state, realm, resource, method, subject, journey, bodyDigest, bound, display, expires, passkey, authorizationDetails
        }
    }

    private var box: Boxed<Members>
    private var m: Members { box.members }

    private mutating func update(_ change: (inout Members) -> Void) { box.update(change) }

    /// A change to a member the seal digests forgets the seal known.
    private mutating func updateSealed(_ change: (inout Members) -> Void) {
        update { change(&$0); $0.knownSeal = Unequated() }
    }

    public var txid: String { get { m.txid } set { update { $0.txid = newValue } } }
    public var state: State { get { m.state } set { update { $0.state = newValue } } }
    public var realm: String { get { m.realm } set { updateSealed { $0.realm = newValue } } }
    /// The path the transaction opens (without `_txid`/`_idtoken`).
    public var resource: String { get { m.resource } set { updateSealed { $0.resource = newValue } } }
    public var method: String { get { m.method } set { updateSealed { $0.method = newValue } } }
    public var subject: String { get { m.subject } set { updateSealed { $0.subject = newValue } } }
    public var journey: String { get { m.journey } set { update { $0.journey = newValue } } }
    /// SHA-256 (hex) of the canonical JSON of the bound fields, or of the whole body.
    public var bodyDigest: String? { get { m.bodyDigest } set { updateSealed { $0.bodyDigest = newValue } } }
    /// The bound values, to show the user what they approve.
    public var bound: [String: JSONValue] { get { m.bound } set { update { $0.bound = newValue } } }
    public var display: String? { get { m.display } set { update { $0.display = newValue } } }
    /// Unix seconds.
    public var expires: Int { get { m.expires } set { update { $0.expires = newValue } } }
    /// How it was approved, when with a passkey: `WebAuthn.Evidence`'s JSON, which the
    /// Txn-Token of the request it opens carries.
    public var passkey: JSONValue? { get { m.passkey } set { update { $0.passkey = newValue } } }
    /// RFC 9396: the `authorization_details` approved, when the transaction was asked for ahead
    /// of its request (`fromDetails`); the tokens and the Txn-Token carry them.
    public var authorizationDetails: JSONValue? { get { m.authorizationDetails } set { update { $0.authorizationDetails = newValue } } }
    /// `TransactionBinding.seal` of the request that created it, stored with the record: a
    /// retry consumes the record in one store step, by matching this and the state (`Store.takeIf`).
    /// Known already when digested by the request that created the record, or read with it, so
    /// that it is not digested again; forgotten when a member it digests changes.
    public var seal: String {
        m.knownSeal.value ?? TransactionBinding.seal(realm: realm, resource: resource, method: method, subject: subject, bodyDigest: bodyDigest)
    }

    /// `seal`: the seal of these members, when the caller has it already (`PolicyDecider.Intent.ownSeal`).
    public init(txid: String, state: State = .created, realm: String, resource: String, method: String, subject: String,
                journey: String, bodyDigest: String?, bound: [String: JSONValue], display: String?, expires: Int,
                passkey: JSONValue? = nil, authorizationDetails: JSONValue? = nil, seal: String? = nil) {
        box = Boxed(Members(txid: txid, state: state, realm: realm, resource: resource, method: method, subject: subject,
                          journey: journey, bodyDigest: bodyDigest, bound: bound, display: display, expires: expires,
                          passkey: passkey, authorizationDetails: authorizationDetails, knownSeal: Unequated(seal)))
    }

    public init(from decoder: Decoder) throws { box = Boxed(try Members(from: decoder)) }

    public func encode(to encoder: Encoder) throws { try m.encode(to: encoder) }

    public static func == (a: TransactionRecord, b: TransactionRecord) -> Bool { a.box == b.box }

    /// What the store checks, in the same step as it deletes the record, before a retry may pass:
    /// `seal` is the request's (`PolicyDecider.Intent.seal`).
    public static func consumable(seal: String) -> [String: String] {
        ["state": State.completed.rawValue, "seal": seal]
    }

    public static func consumable(by request: TransactionBinding) -> [String: String] { consumable(seal: request.seal) }

    public static func key(_ txid: String) -> String { "tx:" + txid }

    /// The counter of a user's transactions waiting for approval: incremented when one is
    /// created (the window is the policy's ttlS), decremented when one is approved.
    public static func pendingKey(_ subject: String) -> String { "txrate:" + subject }

    /// Which transaction was last created for one request (`PolicyDecider.Intent.pendingKey`),
    /// with the transaction's lifetime: a TxId, as text. Not fenced (`FencedKeys`): an entry
    /// brought back by a restore names a record that is not, and is replaced.
    public static func pendingIndexKey(subject: String, seal: String) -> String {
        JSONValue.array([.string(subject), .string(seal)]).canonicalDigest(prefix: "txpending:")
    }

    /// Canonical JSON (sorted keys): the same record always encodes to the same bytes. Written
    /// member by member in the order of their names (`TransactionRecordTests` checks the bytes
    /// against the canonical form of the same members in a dictionary).
    public var encoded: [UInt8] {
        var w = CanonicalObjectWriter(capacity: 640)
        if let authorizationDetails { w.member("authorizationDetails", authorizationDetails) }
        if let bodyDigest { w.member("bodyDigest", bodyDigest) }
        w.member("bound", .object(bound))
        if let display { w.member("display", display) }
        w.member("expires", .number(expires))
        w.member("journey", journey)
        w.member("method", method)
        if let passkey { w.member("passkey", passkey) }
        w.member("realm", realm)
        w.member("resource", resource)
        w.member("seal", seal)
        w.member("state", state.rawValue)
        w.member("subject", subject)
        w.member("txid", txid)
        return w.finish()
    }

    /// The record in `encoded` form (or as JSONEncoder wrote it); nil if anything is missing or
    /// a member is repeated. Read member by member (a record is read up to three times per
    /// approval): no dictionary of the members is built, and the stored seal is kept.
    public static func decode(_ bytes: [UInt8]) -> TransactionRecord? {
        var txid, state, realm, resource, method, subject, journey, bodyDigest, display, seal: String?
        var bound: [String: JSONValue]?
        var expires: Int?
        var passkey, details: JSONValue?
        var seen: UInt16 = 0
        let read = JSONValue.forEachMember(of: bytes) { key, value in
            let bit: UInt16
            switch key {
            case "txid": bit = 1 << 0; txid = value.stringValue
            case "state": bit = 1 << 1; state = value.stringValue
            case "realm": bit = 1 << 2; realm = value.stringValue
            case "resource": bit = 1 << 3; resource = value.stringValue
            case "method": bit = 1 << 4; method = value.stringValue
            case "subject": bit = 1 << 5; subject = value.stringValue
            case "journey": bit = 1 << 6; journey = value.stringValue
            case "bound": bit = 1 << 7; bound = value.objectValue
            case "expires": bit = 1 << 8; expires = value.intValue
            case "bodyDigest": bit = 1 << 9; bodyDigest = value.stringValue
            case "display": bit = 1 << 10; display = value.stringValue
            case "passkey": bit = 1 << 11; passkey = value
            case "authorizationDetails": bit = 1 << 12; details = value
            case "seal": bit = 1 << 13; seal = value.stringValue
            default: return true
            }
            guard seen & bit == 0 else { return false }
            seen |= bit
            return true
        }
        guard read, let txid, let state = state.flatMap(State.init(rawValue:)), let realm, let resource, let method, let subject,
              let journey, let bound, let expires else { return nil }
        return TransactionRecord(txid: txid, state: state, realm: realm, resource: resource, method: method, subject: subject,
                                 journey: journey, bodyDigest: bodyDigest, bound: bound, display: display, expires: expires,
                                 passkey: passkey, authorizationDetails: details, seal: seal)
    }

    /// Why this transaction cannot open `request`, or nil if it can.
    public func mismatch(_ request: TransactionBinding, now: Int) -> RetryRefusal? {
        if expires <= now { return .expired }
        if state != .completed { return .notCompleted }
        if subject != request.subject { return .anotherSubject }
        if realm != request.realm { return .anotherRealm }
        // Approved ahead (RFC 9396): for a request of a policy mapping its type, with these values.
        if resource == AuthorizationDetails.resource {
            return seal == request.detailsSeal(type: method) ? nil : method.isEmpty ? .anotherResource : .bodyDiffers
        }
        if resource != request.resource || method != request.method { return .anotherResource }
        if bodyDigest != request.bodyDigest { return .bodyDiffers }
        return nil
    }
}

/// A value that takes no part in its owner's equality: what is cached beside a value's members.
private struct Unequated: Equatable, Sendable {
    var value: String?
    init(_ value: String? = nil) { self.value = value }
    static func == (_: Unequated, _: Unequated) -> Bool { true }
}

/// Why a retry (`_txid`) did not consume its transaction: `message` for the log line and the
/// audit trail, `metricLabel` for `txgate_transactions_refused_total`'s `reason`.
public enum RetryRefusal: CaseIterable, Sendable {
    /// The store has no such transaction: never issued, expired and purged, or already consumed.
    case unknown
    case expired
    case notCompleted
    case anotherSubject
    case anotherRealm
    case anotherResource
    case bodyDiffers
    /// Any other: a stored record that cannot be read, or one the store's atomic check kept.
    case other

    public var message: String {
        switch self {
        case .unknown: "unknown, expired or consumed"
        case .expired: "expired"
        case .notCompleted: "not completed"
        case .anotherSubject: "another subject"
        case .anotherRealm: "another realm"
        case .anotherResource: "another resource or method"
        case .bodyDiffers: "the bound body fields differ"
        case .other: "does not match this request"
        }
    }

    public var metricLabel: String {
        switch self {
        case .unknown: "unknown"
        case .expired: "expired"
        case .notCompleted: "not_completed"
        case .anotherSubject: "another_subject"
        case .anotherRealm: "another_realm"
        case .anotherResource: "another_resource"
        case .bodyDiffers: "body_differs"
        case .other: "other"
        }
    }
}

/// Whether a request body can be bound as its rule asks; anything but `.bindable` is refused
/// rather than approved blind.
public enum BodyBindingOutcome: Equatable, Sendable {
    case bindable
    /// 415: the rule binds body fields, and the body's media type is missing, not JSON or a
    /// form, or not UTF-8 (or, for a whole-body binding, the Content-Type is not valid).
    case unsupportedMediaType(String)
    /// 400: the body is not one JSON document, or not a valid form (a bad `%` escape, not UTF-8).
    case malformed(String)
    /// 400: a bound field could be read two ways (a repeated form field, repeated JSON key).
    case ambiguous(String)
    /// 400: a bound field is not in the body (the pointer, and the media type the body was
    /// read as): the user is never asked to approve a null that was not sent.
    case missingField(String, readAs: String? = nil)
    /// 400: a bound field's value is not of its declared type (`bind.types`): the pointer, the
    /// rule, the value as sent.
    case invalidField(String, rule: String, value: String)

    /// The status to answer with when not bindable (200 for `.bindable`).
    public var status: Int {
        switch self {
        case .bindable: return 200
        case .unsupportedMediaType: return 415
        case .malformed, .ambiguous, .missingField, .invalidField: return 400
        }
    }

    /// What is wrong, for the error body (empty for `.bindable`).
    public var message: String {
        switch self {
        case .bindable: return ""
        case .unsupportedMediaType(let m), .malformed(let m), .ambiguous(let m): return m
        case .missingField(let pointer, let type):
            return "this request needs its own approval of '\(pointer)', which is not in the body"
                + (type.map { " (read as \($0), its Content-Type)" } ?? "")
        case .invalidField(let pointer, let rule, let value):
            let shown = value.count > 40 ? String(value.prefix(40)) + "…" : value
            return "'\(pointer)' must be \(rule), not '\(shown)'"
        }
    }
}

/// What a request binds a transaction to: who, where, and (PSD2 dynamic linking) what.
public struct TransactionBinding: Equatable, Sendable {
    public var realm: String
    public var resource: String
    public var method: String
    public var subject: String
    /// SHA-256 (hex) of the media type with the bound fields, or with the whole body; nil when
    /// the rule binds nothing from the body (or the body is not bindable).
    public var bodyDigest: String?
    public var bound: [String: JSONValue]
    /// Refuse the request (`status`, `message`) unless this is `.bindable`.
    public var bodyOutcome: BodyBindingOutcome = .bindable
    /// The media type bound with the body (`MediaType.essence` for fields, `.normalized` for a
    /// whole body), nil when nothing is bound from the body.
    public var mediaType: String?

    /// Computes the body binding of `rule` for a request body and its `Content-Type` (nil when
    /// the request has none).
    ///
    /// - Fields (`bind.body` pointers): the media type decides how the body reads, as the
    ///   backend will read it. JSON (`application/json`, any `+json`) is parsed as JSON; a form
    ///   (`application/x-www-form-urlencoded`) with `FormBody`, where a pointer of one segment
    ///   (`/amount`, or `/a~1b` for `a/b`) names a field and a repeated bound field is
    ///   ambiguous; a form value binds as a string. A `charset` other than utf-8 is unsupported
    ///   (the gateway reads UTF-8; a backend honouring the charset would read other text), and
    ///   so is any other media type or none. Every bound field must be present (an explicit
    ///   JSON null is present); an empty body has none.
    /// - Whole body (`bind.body: true`): the exact bytes, with the normalized media type (or
    ///   its absence), whatever it is.
    /// - Neither: nothing from the body, and the media type does not matter.
    ///
    /// The media type goes into `bodyDigest`, so a retry must carry the same one as the approved
    /// request: an approved JSON body resent as a form (whose fields may say something else)
    /// has another digest, another seal.
    public init(realm: String, resource: String, method: String, subject: String, rule: TransactionRule,
                body: [UInt8], contentType: String?) {
        self.realm = realm
        self.resource = resource
        self.method = method
        self.subject = subject
        bound = [:]
        if rule.bindWholeBody {
            var normalized: JSONValue = .null
            if let contentType {
                guard let type = MediaType(contentType) else {
                    bodyOutcome = .unsupportedMediaType("the Content-Type '\(contentType)' is not a valid media type")
                    return
                }
                mediaType = type.normalized
                normalized = .string(type.normalized)
            }
            let parts: [JSONValue] = [normalized, .string(body.withUnsafeBytes { Crypto.sha256Hex($0) })]
            bodyDigest = JSONValue.array(parts).canonicalDigest()
        } else if !rule.bindFields.isEmpty {
            switch Self.readFields(rule.bindFields, body: body, contentType: contentType) {
            case .success(let (type, fields)):
                for p in rule.bindFields {
                    if let t = rule.fieldTypes[p], let value = fields[p], let why = t.violation(value) {
                        bodyOutcome = .invalidField(p, rule: why, value: value.displayText)
                        return
                    }
                }
                mediaType = type
                bound = fields
                let parts: [JSONValue] = [.string(type), .object(fields)]
                bodyDigest = JSONValue.array(parts).canonicalDigest()
            case .failure(let refusal):
                bodyOutcome = refusal.outcome
            }
        }
    }

    /// The binding when the PDP is asked without the request (AM's REST evaluate carries
    /// resources, no body): the body reads as JSON whatever its type, and absent fields (all of
    /// them, for an empty body) bind as null. Only `.bindable` or `.malformed`.
    public init(realm: String, resource: String, method: String, subject: String, rule: TransactionRule, body: [UInt8]) {
        self.realm = realm
        self.resource = resource
        self.method = method
        self.subject = subject
        var bound: [String: JSONValue] = [:]
        if rule.bindWholeBody {
            bodyDigest = body.withUnsafeBytes { Crypto.sha256Hex($0) }
        } else if !rule.bindFields.isEmpty {
            let doc = JSONValue.parse(body)
            if doc == nil && !body.isEmpty {
                bodyOutcome = .malformed("this request needs its own approval of fields in its body, "
                    + "so the body must be one JSON document without repeated keys")
            }
            for p in rule.bindFields { bound[p] = doc?.at(pointer: p) ?? .null }
            bodyDigest = JSONValue.object(bound).canonicalDigest()
        }
        self.bound = bound
    }

    private struct Refusal: Error { var outcome: BodyBindingOutcome }

    /// The values at `pointers` in a JSON or form body, read exactly as the gateway binds them
    /// (a backend checking a Transaction Token's `tctx` compares with these); nil when the body
    /// cannot be read that way.
    public static func boundValues(_ pointers: [String], body: [UInt8], contentType: String?) -> [String: JSONValue]? {
        guard case .success(let (_, bound)) = readFields(pointers, body: body, contentType: contentType) else { return nil }
        return bound
    }

    /// The media type's essence and the bound values, or why they cannot be read.
    private static func readFields(_ pointers: [String], body: [UInt8], contentType: String?)
        -> Result<(String, [String: JSONValue]), Refusal> {
        let needs = "this request needs its own approval of fields in its body, so its Content-Type must be "
            + "application/json or application/x-www-form-urlencoded"
        guard let contentType else { return .failure(Refusal(outcome: .unsupportedMediaType(needs + "; it has none"))) }
        guard let type = MediaType(contentType), type.isJSON || type.isForm else {
            return .failure(Refusal(outcome: .unsupportedMediaType(needs + ", not '\(contentType)'")))
        }
        if let charset = type.parameters["charset"], charset != "utf-8" {
            return .failure(Refusal(outcome: .unsupportedMediaType("the charset of a body with fields to approve must be utf-8, not '\(charset)'")))
        }
        if body.isEmpty { return .failure(Refusal(outcome: .missingField(pointers[0], readAs: type.essence))) }
        // Made with room for every field: grown from empty, it rehashed at each insert.
        var bound = [String: JSONValue](minimumCapacity: pointers.count)
        if type.isJSON {
            guard let doc = JSONValue.parse(body) else {
                return .failure(Refusal(outcome: .malformed("the body must be one JSON document without repeated keys")))
            }
            for p in pointers {
                guard let v = doc.at(pointer: p) else { return .failure(Refusal(outcome: .missingField(p, readAs: type.essence))) }
                bound[p] = v
            }
        } else {
            guard let fields = FormBody.parse(body) else {
                return .failure(Refusal(outcome: .malformed("the form body has a '%' not followed by two hex digits, or is not UTF-8")))
            }
            for p in pointers {
                let tokens = p.dropFirst().split(separator: "/", omittingEmptySubsequences: false)
                guard p.hasPrefix("/"), tokens.count == 1 else {
                    return .failure(Refusal(outcome: .unsupportedMediaType(
                        "this request needs its own approval of '\(p)', which only a JSON body can carry; send application/json")))
                }
                let name = JSONValue.unescapePointerToken(tokens[0])
                let values = fields.filter { $0.name == name }
                guard values.count <= 1 else {
                    return .failure(Refusal(outcome: .ambiguous("the form field '\(name)' appears more than once")))
                }
                guard let v = values.first else { return .failure(Refusal(outcome: .missingField(p, readAs: type.essence))) }
                bound[p] = .string(v.value)
            }
        }
        for p in pointers {
            if let why = Self.undisplayable(bound[p]?.displayText ?? "") {
                return .failure(Refusal(outcome: .malformed("the value of '\(p)' \(why); what is approved must read as it is")))
            }
        }
        return .success((type.essence, bound))
    }

    /// The longest bound value shown to the user, in characters.
    public static let maxDisplayedLength = 256

    /// Why a bound value cannot be shown to the user faithfully, or nil. Refused: control
    /// characters (CR/LF would add lines to an approval email), format characters (bidi
    /// overrides make `boB` read as `Bob`; zero-width characters hide), line and paragraph
    /// separators, and values too long to read.
    public static func undisplayable(_ text: String) -> String? {
        // Printable ASCII (an amount, a currency, most names) has nothing to refuse but length.
        if text.utf8.count <= maxDisplayedLength, text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) { return nil }
        var count = 0
        for scalar in text.unicodeScalars {
            count += 1
            switch scalar.properties.generalCategory {
            case .control: return "contains the control character U+\(hex(scalar))"
            case .format: return "contains the invisible formatting character U+\(hex(scalar))"
            case .lineSeparator, .paragraphSeparator: return "contains the line separator U+\(hex(scalar))"
            default: break
            }
        }
        return count > maxDisplayedLength ? "is longer than \(maxDisplayedLength) characters" : nil
    }

    private static func hex(_ scalar: Unicode.Scalar) -> String {
        let h = String(scalar.value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, 4 - h.count)) + h
    }

    /// One digest of everything a retry must repeat: realm, resource, method, subject and body.
    public var seal: String {
        Self.seal(realm: realm, resource: resource, method: method, subject: subject, bodyDigest: bodyDigest)
    }

    public static func seal(realm: String, resource: String, method: String, subject: String, bodyDigest: String?) -> String {
        let parts: [JSONValue] = [.string(realm), .string(resource), .string(method), .string(subject), bodyDigest.map { .string($0) } ?? .null]
        return JSONValue.array(parts).canonicalDigest()
    }

    /// The rule's `display` with `{field}` (or `{/field}`) replaced by the bound values: `{field}`
    /// names the pointer `/field`, `{/field}` the pointer as written, each value looked up only
    /// where the template names it. One pass: a bound value that looks like a placeholder is
    /// shown as written, so what the user reads is exactly what is bound.
    public static func display(_ template: String?, bound: [String: JSONValue]) -> String? {
        guard let template else { return nil }
        return EmailTemplate.render(template) { name in
            (name.utf8.first == UInt8(ascii: "/") ? bound[name] : bound["/" + name])?.displayText
        }
    }
}

/// Strips `_txid` and `_idtoken` from a request target (WIRE.md §3c) and returns the TxId.
public enum RetryParameters {
    public static func strip(_ target: String) -> (target: String, txid: String?) {
        guard let q = target.utf8.firstIndex(of: UInt8(ascii: "?")) else { return (target, nil) }
        var txid: String?
        var kept: [Substring] = []
        for part in target[target.index(after: q)...].split(byte: UInt8(ascii: "&"), omittingEmptySubsequences: false) {
            let name = part.split(byte: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)[0]
            if name == "_txid" {
                let v = part.utf8.dropFirst(name.utf8.count + 1)
                // A malformed escape leaves the value as sent (it then names no transaction).
                txid = PercentEncoding.decode(utf8: v, plusIsSpace: false) ?? String(Substring(v))
            } else if name != "_idtoken" {
                kept.append(part)
            }
        }
        let path = target[..<q]
        return (kept.isEmpty ? String(path) : path + "?" + kept.joined(separator: "&"), txid)
    }
}

/// The transaction lifecycle's checks, pure: who may approve a record, and what approving it writes.
extension TransactionRecord {
    public enum ApprovalRefusal: Equatable, Sendable {
        /// Unknown, expired, or approved already.
        case gone
        /// Another user's transaction, or another realm's.
        case anotherSubject

        public var message: String {
            switch self {
            case .gone: return "the transaction is unknown, expired or already approved"
            case .anotherSubject: return "this transaction belongs to another user"
            }
        }
    }

    /// Why the session of `uid` in `realm` cannot start this transaction's journey, or nil.
    public func approvalRefusal(by uid: String, realm: String, now: Int) -> ApprovalRefusal? {
        guard state == .created, expires > now else { return .gone }
        guard subject == uid, self.realm == realm else { return .anotherSubject }
        return nil
    }

    /// The record as its completed journey leaves it (COMPLETED), or nil when `uid` cannot
    /// complete it (no longer CREATED, or another subject's).
    /// `passkey`: the evidence of an approval made with a passkey, kept with the record.
    public func approved(by uid: String?, passkey: JSONValue? = nil) -> TransactionRecord? {
        guard state == .created, subject == uid else { return nil }
        var done = self
        done.update {
            $0.state = .completed
            $0.passkey = passkey
        }
        return done
    }
}

extension JSONValue {
    /// The SHA-256 of `canonicalBytes` in lower-case hexadecimal, hashed where it was written:
    /// the seals and digests of a transaction's binding.
    /// With `prefix` written before it, in the same string.
    func canonicalDigest(prefix: StaticString = "") -> String {
        var out = ByteWriter(capacity: 256)
        write(&out)
        return out.withBytes { Crypto.sha256Hex($0, prefix: prefix) }
    }
}
