import Foundation
import TxGateCrypto

/// A one-shot authorization (WIRE.md §2): created when policy needs it, completed by the
/// subject's journey, consumed by exactly one retried request.
public struct TransactionRecord: Codable, Equatable, Sendable {
    public enum State: String, Codable, Sendable { case created = "CREATED", completed = "COMPLETED" }

    public var txid: String
    public var state: State
    public var realm: String
    /// The path the transaction opens (without `_txid`/`_idtoken`).
    public var resource: String
    public var method: String
    public var subject: String
    public var journey: String
    /// SHA-256 (hex) of the canonical JSON of the bound fields, or of the whole body.
    public var bodyDigest: String?
    /// The bound values, to show the user what they approve.
    public var bound: [String: JSONValue]
    public var display: String?
    /// Unix seconds.
    public var expires: Int
    /// `TransactionBinding.seal` of the request that created it, stored with the record: a
    /// retry consumes the record in one store step, by matching this and the state (`Store.takeIf`).
    public var seal: String {
        TransactionBinding.seal(realm: realm, resource: resource, method: method, subject: subject, bodyDigest: bodyDigest)
    }

    public init(txid: String, state: State = .created, realm: String, resource: String, method: String, subject: String,
                journey: String, bodyDigest: String?, bound: [String: JSONValue], display: String?, expires: Int) {
        self.txid = txid
        self.state = state
        self.realm = realm
        self.resource = resource
        self.method = method
        self.subject = subject
        self.journey = journey
        self.bodyDigest = bodyDigest
        self.bound = bound
        self.display = display
        self.expires = expires
    }

    /// What the store checks, in the same step as it deletes the record, before a retry may pass.
    public static func consumable(by request: TransactionBinding) -> [String: String] {
        ["state": State.completed.rawValue, "seal": request.seal]
    }

    public static func key(_ txid: String) -> String { "tx:" + txid }

    /// The counter of a user's transactions waiting for approval: incremented when one is
    /// created (the window is the policy's ttlS), decremented when one is approved.
    public static func pendingKey(_ subject: String) -> String { "txrate:" + subject }

    /// Canonical JSON (sorted keys): the same record always encodes to the same bytes.
    public var encoded: [UInt8] {
        var o: [String: JSONValue] = [
            "txid": .string(txid), "state": .string(state.rawValue), "realm": .string(realm), "resource": .string(resource),
            "method": .string(method), "subject": .string(subject), "journey": .string(journey), "bound": .object(bound),
            "expires": .number(expires), "seal": .string(seal),
        ]
        if let bodyDigest { o["bodyDigest"] = .string(bodyDigest) }
        if let display { o["display"] = .string(display) }
        return Array(JSONValue.object(o).canonical.utf8)
    }

    /// The record in `encoded` form (or as JSONEncoder wrote it); nil if anything is missing.
    public static func decode(_ bytes: [UInt8]) -> TransactionRecord? {
        guard case .object(let o)? = JSONValue.parse(bytes),
              let txid = o["txid"]?.stringValue, let state = o["state"]?.stringValue.flatMap(State.init(rawValue:)),
              let realm = o["realm"]?.stringValue, let resource = o["resource"]?.stringValue,
              let method = o["method"]?.stringValue, let subject = o["subject"]?.stringValue,
              let journey = o["journey"]?.stringValue, let bound = o["bound"]?.objectValue,
              let expires = o["expires"]?.intValue else { return nil }
        return TransactionRecord(txid: txid, state: state, realm: realm, resource: resource, method: method, subject: subject,
                                  journey: journey, bodyDigest: o["bodyDigest"]?.stringValue, bound: bound,
                                  display: o["display"]?.stringValue, expires: expires)
    }

    /// Why this transaction cannot open `request`, or nil if it can.
    public func mismatch(_ request: TransactionBinding, now: Int) -> String? {
        if expires <= now { return "expired" }
        if state != .completed { return "not completed" }
        if subject != request.subject { return "another subject" }
        if realm != request.realm { return "another realm" }
        if resource != request.resource || method != request.method { return "another resource or method" }
        if bodyDigest != request.bodyDigest { return "the bound body fields differ" }
        return nil
    }
}

/// What a request binds a transaction to: who, where, and (PSD2 dynamic linking) what.
public struct TransactionBinding: Equatable, Sendable {
    public var realm: String
    public var resource: String
    public var method: String
    public var subject: String
    public var bodyDigest: String?
    public var bound: [String: JSONValue]
    /// False when the rule binds body fields but the body is not one JSON document (or repeats
    /// a key): such a request cannot be bound, and is refused rather than approved blind. An
    /// empty body binds every field as null.
    public var bodyIsBindable = true

    /// Computes the body binding of `rule` for a request body. Fields that are absent bind as
    /// JSON null, so that adding them later changes the digest too.
    public init(realm: String, resource: String, method: String, subject: String, rule: TransactionRule, body: [UInt8]) {
        self.realm = realm
        self.resource = resource
        self.method = method
        self.subject = subject
        var bound: [String: JSONValue] = [:]
        if rule.bindWholeBody {
            bodyDigest = Crypto.hex(Crypto.sha256(body))
        } else if !rule.bindFields.isEmpty {
            let doc = JSONValue.parse(body)
            bodyIsBindable = doc != nil || body.isEmpty
            for p in rule.bindFields { bound[p] = doc?.at(pointer: p) ?? .null }
            bodyDigest = Crypto.hex(Crypto.sha256(Array(JSONValue.object(bound).canonical.utf8)))
        } else {
            bodyDigest = nil
        }
        self.bound = bound
    }

    /// One digest of everything a retry must repeat: realm, resource, method, subject and body.
    public var seal: String {
        Self.seal(realm: realm, resource: resource, method: method, subject: subject, bodyDigest: bodyDigest)
    }

    public static func seal(realm: String, resource: String, method: String, subject: String, bodyDigest: String?) -> String {
        let parts: [JSONValue] = [.string(realm), .string(resource), .string(method), .string(subject), bodyDigest.map { .string($0) } ?? .null]
        return Crypto.hex(Crypto.sha256(Array(JSONValue.array(parts).canonical.utf8)))
    }

    /// The rule's `display` with `{field}` (or `{/field}`) replaced by the bound values.
    /// One pass: a bound value that looks like a placeholder is shown as written, so what
    /// the user reads is exactly what is bound.
    public static func display(_ template: String?, bound: [String: JSONValue]) -> String? {
        guard let template else { return nil }
        var values: [String: String] = [:]
        for (pointer, value) in bound {
            values[pointer] = value.displayText
            values[String(pointer.dropFirst())] = value.displayText
        }
        return EmailTemplate.render(template, values)
    }
}

/// Strips `_txid` and `_idtoken` from a request target (WIRE.md §3c) and returns the TxId.
public enum RetryParameters {
    public static func strip(_ target: String) -> (target: String, txid: String?) {
        guard let q = target.firstIndex(of: "?") else { return (target, nil) }
        var txid: String?
        var kept: [Substring] = []
        for part in target[target.index(after: q)...].split(separator: "&", omittingEmptySubsequences: false) {
            let name = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)[0]
            if name == "_txid" {
                let v = part.dropFirst(name.count + 1)
                txid = String(v).removingPercentEncoding ?? String(v)
            } else if name != "_idtoken" {
                kept.append(part)
            }
        }
        let path = target[..<q]
        return (kept.isEmpty ? String(path) : path + "?" + kept.joined(separator: "&"), txid)
    }
}
