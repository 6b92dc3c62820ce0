import Foundation

/// Who a policy applies to.
public enum SubjectRule: Equatable, Sendable {
    case anyone
    case authenticated
    /// Usernames, or `attribute=value` pairs matched against the user's attributes.
    case only([String])
}

/// What a request must prove on top of the subject rule.
public enum Requirement: Equatable, Sendable {
    case none
    /// The session (or token) must have completed this journey, within `maxAgeS` seconds when set.
    case stepUp(journey: String, maxAgeS: Int? = nil)
    /// Every access needs its own completed transaction.
    case transaction(TransactionRule)
}

public struct TransactionRule: Equatable, Sendable {
    /// The rule's values, in one object the configuration builds once: a decision copies the
    /// rule out of its policy, into the intent and the challenge's record, and a copy is then one
    /// retain instead of one per string, array and dictionary. Every worker shares these
    /// objects, and each retain of them is a write to a cache line the other cores fetch back.
    private struct Values: Equatable, Sendable {
        var journey: String
        var ttlS: Int
        var bindFields: [String]
        var bindWholeBody: Bool
        var display: String?
        var fieldTypes: [String: FieldType]
        var when: [String: JSONValue] = [:]
        var authorizationDetails: DetailsMapping?
    }

    /// Set while the configuration is read: each change makes a new box.
    private var box: Boxed<Values>

    public var journey: String {
        get { box.members.journey }
        set { box.update { $0.journey = newValue } }
    }
    public var ttlS: Int {
        get { box.members.ttlS }
        set { box.update { $0.ttlS = newValue } }
    }
    /// JSON Pointers of body fields the approval is bound to.
    public var bindFields: [String] {
        get { box.members.bindFields }
        set { box.update { $0.bindFields = newValue } }
    }
    /// Bind the digest of the whole body.
    public var bindWholeBody: Bool {
        get { box.members.bindWholeBody }
        set { box.update { $0.bindWholeBody = newValue } }
    }
    /// Prompt shown to the user, with `{field}` replaced by the bound values.
    public var display: String? {
        get { box.members.display }
        set { box.update { $0.display = newValue } }
    }
    /// The declared types of bound fields (`bind.types`), by JSON Pointer.
    public var fieldTypes: [String: FieldType] {
        get { box.members.fieldTypes }
        set { box.update { $0.fieldTypes = newValue } }
    }
    /// Which requests of the policy need the transaction, by JSON Pointer into the JSON body and
    /// the exact value (`{"/method": "tools/call", "/params/name": "transfer"}`: one MCP tool);
    /// the others are allowed as the policy's subjects, never from the decision cache. Empty:
    /// every request of the policy.
    public var when: [String: JSONValue] {
        get { box.members.when }
        set { box.update { $0.when = newValue } }
    }
    /// RFC 9396: the `authorization_details` type whose approval, asked for ahead of the request,
    /// opens a request of this policy with the same values (`transaction.authorizationDetails`).
    public var authorizationDetails: DetailsMapping? {
        get { box.members.authorizationDetails }
        set { box.update { $0.authorizationDetails = newValue } }
    }

    public init(journey: String, ttlS: Int = 180, bindFields: [String] = [], bindWholeBody: Bool = false, display: String? = nil,
                fieldTypes: [String: FieldType] = [:]) {
        box = Boxed(Values(journey: journey, ttlS: ttlS, bindFields: bindFields, bindWholeBody: bindWholeBody, display: display,
                         fieldTypes: fieldTypes))
    }

    public static func == (a: TransactionRule, b: TransactionRule) -> Bool { a.box == b.box }
}

/// A resource pattern: exact segments, `*` for one segment, a final `/**` for any depth.
///
/// Paths are matched after `PathNormalizer`, which removes dot segments; still, as defence in
/// depth, neither `*` nor `/**` ever matches a `.` or `..` segment, and a pattern may not name one.
public struct ResourcePattern: Equatable, Sendable {
    public let text: String
    /// Each its own `String`: most are small enough to be held inline, and matching copies
    /// none out of the pattern's text (a `Substring` of it retained that text, which every
    /// worker shares, at every comparison).
    let segments: [String]
    let anyDepth: Bool

    public init?(_ text: String) {
        guard text.hasPrefix("/"), !text.contains("?") else { return nil }
        self.text = text
        var segs = text.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map { $0 }
        if segs.last == "**" {
            anyDepth = true
            segs.removeLast()
        } else {
            anyDepth = false
        }
        if segs.contains("**") || segs.contains(where: { Self.isDotSegment($0.utf8) }) { return nil }
        segments = segs.map(String.init)
    }

    /// The path's segments are the parts after its first `/`. Every request asks (once per
    /// policy until one applies), so this walks the bytes without splitting or allocating.
    public func matches(_ path: Substring) -> Bool {
        let bytes = path.utf8
        guard var start = bytes.firstIndex(of: 0x2F).map({ bytes.index(after: $0) }) else { return segments.isEmpty }
        var n = 0
        while true {
            let end = bytes[start...].firstIndex(of: 0x2F) ?? bytes.endIndex
            // Bytes, not a Substring: slicing the String checks the range's ends are Character
            // boundaries (about 140 instructions a segment).
            let part = bytes[start..<end]
            // What `*` and `/**` stand for must not be a step up or a step in place.
            if Self.isDotSegment(part) { return false }
            if n < segments.count {
                if segments[n] != "*" && !Self.same(part, segments[n]) { return false }
            } else if !anyDepth {
                return false
            }
            n += 1
            guard end < bytes.endIndex else { break }
            start = bytes.index(after: end)
        }
        return n >= segments.count
    }

    /// Byte equality, and String equality (canonical equivalence) when either is not ASCII,
    /// as the split-and-compare this replaces did.
    private static func same(_ a: Substring.UTF8View, _ b: String) -> Bool {
        if a.elementsEqual(b.utf8) { return true }
        if a.allSatisfy({ $0 < 0x80 }) && b.utf8.allSatisfy({ $0 < 0x80 }) { return false }
        return Substring(a) == b[...]
    }

    /// On the bytes: String `==` is a generic comparison, twice a segment of every request's path.
    static func isDotSegment(_ u: Substring.UTF8View) -> Bool {
        switch u.count {
        case 1: return u.first == 0x2E
        case 2: return u.first == 0x2E && u.last == 0x2E
        default: return false
        }
    }
}

/// One policy of gateway.json. A class, immutable: each request finds the one that applies
/// and keeps a reference to it, without copying its lists.
public final class Policy: Sendable {
    public let name: String
    public let resources: [ResourcePattern]
    public let actions: [String]
    public let subjects: SubjectRule
    public let requirement: Requirement

    public init(name: String, resources: [ResourcePattern], actions: [String], subjects: SubjectRule, requirement: Requirement = .none) {
        self.name = name
        self.resources = resources
        self.actions = actions
        self.subjects = subjects
        self.requirement = requirement
    }

    /// Every request asks, once per policy until one applies: the patterns are matched where
    /// they are (`contains(where:)` copied each one out, retaining its members).
    public func applies(path: Substring, method: String) -> Bool {
        guard actions.contains(method) else { return false }
        for i in resources.indices where resources[i].matches(path) { return true }
        return false
    }
}

/// `policies[]` in gateway.json.
public struct PolicyConfig: ConfigObject, Sendable {
    public var policy: Policy

    enum Key: String, ConfigKey {
        case name, resources, actions, subjects, transaction, stepUp
    }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        let name: String = o.required(.name) ?? ""
        var resources: [ResourcePattern] = []
        for r in (o.required(.resources, as: [String].self) ?? []) {
            if let p = ResourcePattern(r) { resources.append(p) } else {
                o.invalid(.resources, "'\(r)' is not a path pattern (starts with '/', no query, no '.' or '..' segment, '**' only at the end)")
            }
        }
        let actions = (o.required(.actions, as: [String].self) ?? []).map { $0.uppercased() }
        if actions.isEmpty && o.has(.actions) { o.invalid(.actions, "must list at least one HTTP method") }
        var subjects = SubjectRule.authenticated
        if o.has(.subjects) {
            if let s = o.attempt(.subjects, as: String.self) {
                switch s {
                case "anyone": subjects = .anyone
                case "authenticated": subjects = .authenticated
                default: o.invalid(.subjects, "'\(s)' is not anyone, authenticated or a list of users")
                }
            } else if let list = o.attempt(.subjects, as: [String].self), !list.isEmpty {
                subjects = .only(list)
            } else {
                o.invalid(.subjects, "must be \"anyone\", \"authenticated\" or a non-empty list of users")
            }
        }
        var requirement = Requirement.none
        if o.has(.transaction) && o.has(.stepUp) { o.invalid(.stepUp, "a policy has either transaction or stepUp, not both") }
        if let t: TransactionConfig = o.optional(.transaction) { requirement = .transaction(t.rule) }
        if let s: StepUpConfig = o.optional(.stepUp) { requirement = .stepUp(journey: s.journey, maxAgeS: s.maxAgeS) }
        if requirement != .none && subjects == .anyone {
            o.invalid(.subjects, "a policy with transaction or stepUp needs an authenticated subject")
        }
        policy = Policy(name: name, resources: resources, actions: actions, subjects: subjects, requirement: requirement)
    }
}

struct StepUpConfig: ConfigObject {
    var journey: String
    var maxAgeS: Int?
    enum Key: String, ConfigKey {
        case journey, maxAgeS
    }

    init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        journey = o.required(.journey) ?? ""
        maxAgeS = o.optional(.maxAgeS)
        if let m = maxAgeS, m < 0 { o.invalid(.maxAgeS, "must be 0 or more seconds") }
    }
}

struct TransactionConfig: ConfigObject {
    var rule: TransactionRule
    enum Key: String, ConfigKey {
        case journey, ttlS, bind, display, when, authorizationDetails
    }

    init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        rule = TransactionRule(journey: o.required(.journey) ?? "", ttlS: o.value(.ttlS, default: 180))
        rule.when = o.value(.when, default: [:])
        for (pointer, value) in rule.when.sorted(by: { $0.key < $1.key }) {
            if !pointer.hasPrefix("/") { o.invalid(.when, "'\(pointer)' is not a JSON Pointer (like /method)") }
            switch value {
            case .string, .number, .bool: break
            default: o.invalid(.when, "'\(pointer)': the value must be a string, a number or true/false")
            }
        }
        if rule.ttlS <= 0 { o.invalid(.ttlS, "must be greater than 0") }
        rule.display = o.optional(.display)
        if let b: BindConfig = o.optional(.bind) {
            rule.bindFields = b.fields
            rule.bindWholeBody = b.whole
            rule.fieldTypes = b.types
        }
        if let m: DetailsMappingConfig = o.optional(.authorizationDetails) {
            rule.authorizationDetails = m.mapping
            if rule.bindFields.isEmpty {
                o.invalid(.authorizationDetails, "needs bind.body to list the fields an entry's values must equal")
            } else if Set(m.mapping.fields.keys) != Set(rule.bindFields) {
                o.invalid(.authorizationDetails, "fields must map every field of bind.body (\(rule.bindFields.joined(separator: ", "))), and only those")
            }
        }
        if let display = rule.display {
            // What the display may name: each bound pointer, with or without its leading '/'.
            let known = Set(rule.bindFields + rule.bindFields.map { String($0.dropFirst()) })
            for name in EmailTemplate.unknownPlaceholders(in: display, known: known) {
                o.invalid(.display, "unknown placeholder '{\(name)}': "
                    + (rule.bindFields.isEmpty ? "no field is bound (bind.body lists the fields a display may show)"
                        : "not a field of bind.body (\(rule.bindFields.joined(separator: ", ")))"))
            }
        }
    }
}

/// `transaction.authorizationDetails`: `{"type": "payment_initiation", "fields": {"/amount": "/instructedAmount/amount"}}`.
struct DetailsMappingConfig: ConfigObject {
    var mapping = DetailsMapping(type: "", fields: [:])
    enum Key: String, ConfigKey { case type, fields }

    init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        mapping.type = o.required(.type) ?? ""
        mapping.fields = o.required(.fields) ?? [:]
        for (body, field) in mapping.fields.sorted(by: { $0.key < $1.key }) where !body.hasPrefix("/") || !field.hasPrefix("/") {
            o.invalid(.fields, "'\(body)': '\(field)': both are JSON Pointers (a body field: the entry's field)")
        }
    }
}

struct BindConfig: ConfigObject {
    var fields: [String] = []
    var whole = false
    var types: [String: FieldType] = [:]
    enum Key: String, ConfigKey {
        case body, types
    }

    init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        if let t: [String: FieldTypeConfig] = o.optional(.types) {
            types = t.mapValues(\.type)
        }
        guard o.has(.body) else {
            if !types.isEmpty { o.invalid(.types, "types need bind.body to list the fields they type") }
            return
        }
        if let all = o.attempt(.body, as: Bool.self) { whole = all }
        else if let list = o.attempt(.body, as: [String].self) {
            for p in list where !p.hasPrefix("/") { o.invalid(.body, "'\(p)' is not a JSON Pointer (like /amount)") }
            fields = list
        } else {
            o.invalid(.body, "must be true (the whole body) or a list of JSON Pointers")
        }
        for p in types.keys.sorted() where !fields.contains(p) {
            o.invalid(.types, "'\(p)' is not a field of bind.body (\(fields.joined(separator: ", ")))")
        }
    }
}

/// Forward, ask the client to authenticate or approve, or refuse.
public enum DecisionOutcome: String, Sendable {
    case allow, challenge, deny
}

/// A consumed transaction behind a reference (`Decision.consumed`), compared by its record: its
/// TxId, and its record as decoded or as the store returned it. Stored bytes are decoded only
/// when the record is read: a request with no Transaction Token to write needs only the TxId,
/// which is the key it was taken by.
private final class ConsumedRecord: Equatable, Sendable {
    let txid: String
    private let stored: Stored
    private enum Stored { case record(TransactionRecord), bytes([UInt8]) }

    init(_ record: TransactionRecord) {
        txid = record.txid
        stored = .record(record)
    }

    init(txid: String, bytes: [UInt8]) {
        self.txid = txid
        stored = .bytes(bytes)
    }

    /// The record, nil if the stored bytes do not decode.
    var record: TransactionRecord? {
        switch stored {
        case .record(let r): r
        case .bytes(let b): TransactionRecord.decode(b)
        }
    }

    static func == (a: ConsumedRecord, b: ConsumedRecord) -> Bool { a.txid == b.txid && a.record == b.record }
}

/// AM's decision for one resource (WIRE.md §1).
///
/// Its members live in one immutable box: a request copies its decision a few times (out of the
/// worker's cache, into the request, into its summary), and a copy of six members was seven
/// retains and releases; it is now one. A change makes a new box.
public struct Decision: Equatable, Sendable {
    private struct Members: Equatable {
        var resource: String
        var actions: [String: Bool]
        var attributes: [String: [String]]
        var advices: Advices
        var ttl: Int64?
        var consumedRecord: ConsumedRecord?
    }

    private var box: Boxed<Members>

    public var resource: String { get { box.members.resource } set { box.update { $0.resource = newValue } } }
    public var actions: [String: Bool] { get { box.members.actions } set { box.update { $0.actions = newValue } } }
    public var attributes: [String: [String]] { get { box.members.attributes } set { box.update { $0.attributes = newValue } } }
    public var advices: Advices { get { box.members.advices } set { box.update { $0.advices = newValue } } }
    /// Absolute expiry in epoch milliseconds; nil means "use the default cache time".
    public var ttl: Int64? { get { box.members.ttl } set { box.update { $0.ttl = newValue } } }
    /// The transaction this one-shot allow consumed (what the user approved, for the
    /// Transaction Token); not part of AM's format.
    public var consumed: TransactionRecord? {
        get { box.members.consumedRecord?.record }
        set { box.update { $0.consumedRecord = newValue.map(ConsumedRecord.init) } }
    }
    /// The TxId of the transaction consumed, without reading its record.
    public var consumedTxid: String? { box.members.consumedRecord?.txid }

    public init(resource: String, actions: [String: Bool] = [:], attributes: [String: [String]] = [:],
                advices: Advices = Advices([]), ttl: Int64? = nil, consumed: TransactionRecord? = nil) {
        self.init(Members(resource: resource, actions: actions, attributes: attributes, advices: advices, ttl: ttl,
                          consumedRecord: consumed.map(ConsumedRecord.init)))
    }

    private init(_ m: Members) { box = Boxed(m) }

    public static func == (a: Decision, b: Decision) -> Bool { a.box == b.box }

    /// A one-shot allow that consumed transaction `txid`, whose record the store returned as
    /// `record` (decoded when `consumed` is read).
    public static func consuming(_ txid: String, record: [UInt8], resource: String, method: String, ttl: Int64) -> Decision {
        Decision(Members(resource: resource, actions: [method: true], attributes: [:], advices: Advices([]), ttl: ttl,
                         consumedRecord: ConsumedRecord(txid: txid, bytes: record)))
    }

    public func allows(_ method: String) -> Bool {
        // A decision names one method or a few (every request asks, two or three times):
        // comparing them costs less than hashing `method` (about 300 instructions a lookup).
        if actions.count <= 4 { return actions.contains { $0.key == method && $0.value } }
        return actions[method] == true
    }

    /// What the PEP does with this decision for `method` (the challenge phase's rule).
    public func outcome(for method: String) -> DecisionOutcome {
        allows(method) ? .allow : advices.isEmpty ? .deny : .challenge
    }

    public var json: String {
        let acts = actions.keys.sorted().map { "\"\(JSONText.escape($0))\":\(actions[$0]! ? "true" : "false")" }.joined(separator: ",")
        let attrs = attributes.keys.sorted().map { k in
            "\"\(JSONText.escape(k))\":[" + attributes[k]!.map { "\"\(JSONText.escape($0))\"" }.joined(separator: ",") + "]"
        }.joined(separator: ",")
        // A missing ttl tells the PEP to use its default cache time.
        return #"{"resource":"\#(JSONText.escape(resource))","actions":{\#(acts)},"attributes":{\#(attrs)},"advices":\#(advices.json)"#
            + (ttl.map { #","ttl":\#($0)}"# } ?? "}")
    }
}

extension Policy {
    /// The journey of a transaction policy, for RFC 9470's `acr_values`.
    public var transactionJourney: String? {
        guard case .transaction(let rule) = requirement else { return nil }
        return rule.journey
    }

    /// The `maxAgeS` of a step-up policy, for RFC 9470's `max_age`.
    public var stepUpMaxAge: Int? {
        guard case .stepUp(_, let maxAgeS) = requirement else { return nil }
        return maxAgeS
    }
}
