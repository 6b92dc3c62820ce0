import Foundation
import TxGateCrypto

/// A JSON Schema subset (draft 2020-12 keywords), enough to declare an `authorization_details`
/// type (RFC 9396 §2): `type`, `properties`, `required`, `additionalProperties` (true or false),
/// `enum`, `const`, `minLength`, `maxLength`, `minimum`, `maximum`, `items`, `minItems`,
/// `maxItems`, and `title`/`description` (ignored). Any other keyword is a configuration error:
/// a schema that seems to check something it does not is worse than none.
public indirect enum DetailsSchema: Equatable, Sendable {
    case node(Node)

    public struct Node: Equatable, Sendable {
        public var type: String?
        public var properties: [String: DetailsSchema] = [:]
        public var required: [String] = []
        public var additionalProperties = true
        public var enumeration: [JSONValue]?
        public var minLength: Int?
        public var maxLength: Int?
        public var minimum: Double?
        public var maximum: Double?
        public var items: DetailsSchema?
        public var minItems: Int?
        public var maxItems: Int?
    }

    static let types = ["object", "array", "string", "number", "integer", "boolean", "null"]
    static let keywords: Set<String> = ["type", "properties", "required", "additionalProperties", "enum", "const", "minLength",
                                        "maxLength", "minimum", "maximum", "items", "minItems", "maxItems", "title", "description"]

    /// Problems found in a schema, each with its JSON Pointer in the schema.
    public struct Problems: Error, Equatable, Sendable { public var messages: [String] }

    /// The schema in `value`, or the problems found.
    public static func parse(_ value: JSONValue, at path: String = "") -> Result<DetailsSchema, Problems> {
        guard case .object(let o) = value else { return .failure(Problems(messages: ["\(path.isEmpty ? "/" : path): a schema is an object"])) }
        var errors: [String] = []
        var n = Node()
        func at(_ k: String) -> String { path + "/" + k }
        func count(_ k: String) -> Int? {
            guard let v = o[k] else { return nil }
            guard let i = v.intValue, i >= 0 else { errors.append("\(at(k)): must be a whole number, 0 or more"); return nil }
            return i
        }
        for k in o.keys.sorted() where !keywords.contains(k) {
            errors.append("\(at(k)): '\(k)' is not a keyword this gateway checks (\(keywords.sorted().joined(separator: ", ")))")
        }
        if let t = o["type"] {
            if let s = t.stringValue, types.contains(s) { n.type = s } else { errors.append("\(at("type")): must be one of \(types.joined(separator: ", "))") }
        }
        if let p = o["properties"] {
            if case .object(let props) = p {
                for (name, sub) in props.sorted(by: { $0.key < $1.key }) {
                    switch parse(sub, at: at("properties") + "/" + name) {
                    case .success(let s): n.properties[name] = s
                    case .failure(let e): errors += e.messages
                    }
                }
            } else { errors.append("\(at("properties")): must be an object of schemas") }
        }
        if let r = o["required"] {
            if let names = r.arrayValue?.compactMap(\.stringValue), names.count == r.arrayValue?.count { n.required = names } else {
                errors.append("\(at("required")): must be a list of property names")
            }
        }
        if let a = o["additionalProperties"] {
            if case .bool(let b) = a { n.additionalProperties = b } else { errors.append("\(at("additionalProperties")): only true or false") }
        }
        if let e = o["enum"] {
            if let list = e.arrayValue, !list.isEmpty { n.enumeration = list } else { errors.append("\(at("enum")): must be a non-empty list") }
        }
        if let c = o["const"] { n.enumeration = [c] }
        n.minLength = count("minLength")
        n.maxLength = count("maxLength")
        n.minItems = count("minItems")
        n.maxItems = count("maxItems")
        for k in ["minimum", "maximum"] {
            guard let v = o[k] else { continue }
            guard let d = v.numberValue?.doubleValue else { errors.append("\(at(k)): must be a number"); continue }
            if k == "minimum" { n.minimum = d } else { n.maximum = d }
        }
        if let i = o["items"] {
            switch parse(i, at: at("items")) {
            case .success(let s): n.items = s
            case .failure(let e): errors += e.messages
            }
        }
        return errors.isEmpty ? .success(DetailsSchema.node(n)) : .failure(Problems(messages: errors))
    }

    var node: Node { if case .node(let n) = self { return n } else { fatalError("unreachable") } }

    /// The first way `value` breaks this schema (its JSON Pointer and what is wrong), or nil.
    public func violation(_ value: JSONValue, at path: String = "") -> String? {
        let n = node
        let here = path.isEmpty ? "/" : path
        if let t = n.type, !Self.value(value, is: t) { return "\(here) must be \(t == "integer" ? "an integer" : "a\(t == "object" || t == "array" ? "n" : "") \(t)")" }
        if let e = n.enumeration, !e.contains(where: { $0.canonical == value.canonical }) {
            return "\(here) must be one of \(e.map(\.canonical).joined(separator: ", "))"
        }
        switch value {
        case .string(let s):
            let length = s.unicodeScalars.count
            if let m = n.minLength, length < m { return "\(here) must be at least \(m) characters" }
            if let m = n.maxLength, length > m { return "\(here) must be at most \(m) characters" }
        case .number(let num):
            if let m = n.minimum, num.doubleValue < m { return "\(here) must be at least \(JSONValue.number(m).canonical)" }
            if let m = n.maximum, num.doubleValue > m { return "\(here) must be at most \(JSONValue.number(m).canonical)" }
        case .array(let a):
            if let m = n.minItems, a.count < m { return "\(here) must have at least \(m) items" }
            if let m = n.maxItems, a.count > m { return "\(here) must have at most \(m) items" }
            if let items = n.items {
                for (i, v) in a.enumerated() { if let why = items.violation(v, at: path + "/\(i)") { return why } }
            }
        case .object(let o):
            for name in n.required where o[name] == nil { return "\(path)/\(name) is required" }
            for (name, v) in o.sorted(by: { $0.key < $1.key }) {
                let token = name.replacingOccurrences(of: "~", with: "~0").replacingOccurrences(of: "/", with: "~1")
                if let s = n.properties[name] {
                    if let why = s.violation(v, at: path + "/" + token) { return why }
                } else if !n.additionalProperties {
                    return "\(path)/\(token) is not a field of this type"
                }
            }
        default: break
        }
        return nil
    }

    static func value(_ v: JSONValue, is type: String) -> Bool {
        switch (type, v) {
        case ("object", .object), ("array", .array), ("string", .string), ("number", .number), ("boolean", .bool), ("null", .null): true
        case ("integer", .number(let n)): n.intValue != nil
        default: false
        }
    }

    /// Whether the schema makes `pointer` (`/a/b`, through objects only) always present:
    /// each step is `required` by its parent.
    public func requires(_ pointer: String) -> Bool {
        var s = self
        for token in pointer.split(separator: "/", omittingEmptySubsequences: false).dropFirst() {
            let name = JSONValue.unescapePointerToken(token)
            guard s.node.required.contains(name), let next = s.node.properties[name] else { return false }
            s = next
        }
        return pointer.hasPrefix("/")
    }

    /// The JSON Pointers of the fields the schema declares (objects' properties, recursively),
    /// for checking a display template's placeholders.
    public var declaredPointers: [String] {
        node.properties.flatMap { name, s -> [String] in
            let p = "/" + name.replacingOccurrences(of: "~", with: "~0").replacingOccurrences(of: "/", with: "~1")
            return [p] + s.declaredPointers.map { p + $0 }
        }
    }
}

/// `oauth2.authorizationDetailsTypes.<type>`: an RFC 9396 type the gateway accepts: its schema,
/// the sentence the person reads, the journey that approves it, and how long the approval lives.
public struct AuthorizationDetailsType: ConfigObject, Sendable, Equatable {
    public var schema = DetailsSchema.node(.init())
    /// With `{field}` or `{/pointer}` placeholders filled from the entry.
    public var display: String?
    public var journey = ""
    public var ttlS = 600

    public init(schema: DetailsSchema, journey: String, display: String? = nil, ttlS: Int = 600) {
        (self.schema, self.journey, self.display, self.ttlS) = (schema, journey, display, ttlS)
    }

    enum Key: String, ConfigKey { case schema, display, journey, ttlS }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        journey = o.required(.journey) ?? ""
        display = o.optional(.display)
        ttlS = o.int(.ttlS, default: ttlS, atLeast: 30)
        if let s: JSONValue = o.required(.schema) {
            switch DetailsSchema.parse(s) {
            case .success(let schema):
                self.schema = schema
                if schema.node.type != "object" { o.invalid(.schema, "the schema of an authorization_details type is of type object") }
            case .failure(let p): for e in p.messages { o.invalid(.schema, e) }
            }
        }
        if let display {
            let declared = schema.declaredPointers
            let known = Set(declared + declared.map { String($0.dropFirst()) })
            for name in EmailTemplate.unknownPlaceholders(in: display, known: known) {
                o.invalid(.display, "unknown placeholder '{\(name)}': not a field the schema declares")
            }
        }
    }
}

/// `transaction.authorizationDetails` of a policy: the `authorization_details` type its
/// approvals can be asked for ahead of the request (by CIBA, `authorize` or PAR), and which
/// field of an entry each bound body field must equal (`fields`: body pointer → entry pointer).
public struct DetailsMapping: Equatable, Sendable {
    public var type: String
    public var fields: [String: String]

    public init(type: String, fields: [String: String]) {
        self.type = type
        self.fields = fields
    }
}

/// RFC 9396 `authorization_details`: parsed, checked against the configured types, and turned
/// into the transaction a person approves.
public enum AuthorizationDetails {
    /// The parameter's largest size, and its most entries.
    public static let maxBytes = 8192
    public static let maxEntries = 8
    /// A transaction approved ahead of its request records this as its resource; its method is
    /// the type (`TransactionRecord.fromDetails`).
    public static let resource = "authorization_details"

    static func refuse(_ why: String) -> OAuthError { OAuthError("invalid_authorization_details", why) }

    /// The entries of `text` (a JSON array of objects, each with a configured `type`, valid
    /// against its schema, every string in it fit to be shown), or why not.
    public static func parse(_ text: String, types: [String: AuthorizationDetailsType]) -> Result<[JSONValue], OAuthError> {
        guard text.utf8.count <= maxBytes else { return .failure(refuse("authorization_details is longer than \(maxBytes) bytes")) }
        guard let v = JSONValue.parse(Array(text.utf8)), case .array(let entries) = v else {
            return .failure(refuse("authorization_details must be a JSON array of objects, without repeated keys"))
        }
        guard (1...maxEntries).contains(entries.count) else { return .failure(refuse("authorization_details must hold 1 to \(maxEntries) objects")) }
        for (i, entry) in entries.enumerated() {
            guard case .object(let o) = entry, let typeName = o["type"]?.stringValue else {
                return .failure(refuse("authorization_details[\(i)] must be an object with a string type"))
            }
            guard let type = types[typeName] else { return .failure(refuse("authorization_details[\(i)]: unknown type '\(typeName)'")) }
            var rest = o
            rest["type"] = nil
            if let why = type.schema.violation(.object(rest)) { return .failure(refuse("authorization_details[\(i)] (\(typeName)): \(why)")) }
            for (pointer, value) in leaves(entry) {
                if let why = TransactionBinding.undisplayable(value.displayText) {
                    return .failure(refuse("authorization_details[\(i)]: the value of '\(pointer)' \(why)"))
                }
            }
        }
        return .success(entries)
    }

    /// An entry's fields as the person reads them: each scalar by its JSON Pointer in the entry
    /// (arrays by index), `type` left out.
    public static func leaves(_ entry: JSONValue) -> [String: JSONValue] {
        var out: [String: JSONValue] = [:]
        func walk(_ v: JSONValue, _ path: String) {
            switch v {
            case .object(let o):
                for (k, sub) in o where !(path.isEmpty && k == "type") {
                    walk(sub, path + "/" + k.replacingOccurrences(of: "~", with: "~0").replacingOccurrences(of: "/", with: "~1"))
                }
            case .array(let a): for (i, sub) in a.enumerated() { walk(sub, path + "/\(i)") }
            default: out[path] = v
            }
        }
        walk(entry, "")
        return out
    }

    /// What the approval page lists: one entry's fields by pointer, or, for several, each
    /// under `/<index>`.
    public static func shown(_ entries: [JSONValue]) -> [String: JSONValue] {
        guard entries.count > 1 else { return entries.first.map(leaves) ?? [:] }
        var out: [String: JSONValue] = [:]
        for (i, e) in entries.enumerated() { for (p, v) in leaves(e) { out["/\(i)" + p] = v } }
        return out
    }

    /// The sentence the person reads: each entry's type `display`, filled from its fields.
    public static func display(_ entries: [JSONValue], types: [String: AuthorizationDetailsType]) -> String? {
        let lines = entries.compactMap { e -> String? in
            guard let t = e["type"]?.stringValue, let template = types[t]?.display else { return nil }
            return TransactionBinding.display(template, bound: leaves(e))
        }
        return lines.isEmpty ? nil : lines.joined(separator: "\n")
    }

    /// The one entry a transaction policy can be opened by (`mappings`: type → mapping), and
    /// the values its mapping binds (body pointer → the entry's value); nil when no entry is of
    /// a mapped type. More than one such entry is refused: one approval opens one request.
    public static func binding(_ entries: [JSONValue], mappings: [String: DetailsMapping])
        -> Result<(type: String, bound: [String: JSONValue])?, OAuthError> {
        let mapped = entries.filter { $0["type"]?.stringValue.flatMap { mappings[$0] } != nil }
        guard mapped.count <= 1 else {
            return .failure(refuse("ask for one request's approval at a time: more than one entry opens a request"))
        }
        guard let entry = mapped.first, let type = entry["type"]?.stringValue, let mapping = mappings[type] else { return .success(nil) }
        var bound: [String: JSONValue] = [:]
        for (body, field) in mapping.fields {
            guard let v = entry.at(pointer: field) else { return .failure(refuse("\(type): '\(field)' is required")) }
            bound[body] = v
        }
        return .success((type, bound))
    }

    /// The digest of what an approval ahead of the request binds: the type and the bound values
    /// by body pointer. A request's own values give the same digest when they are the same.
    public static func digest(type: String, bound: [String: JSONValue]) -> String {
        Crypto.hex(Crypto.sha256(JSONValue.array([.string(type), .object(bound)]).canonicalBytes))
    }
}

extension TransactionRecord {
    /// A transaction asked for ahead of its request (RFC 9396): waiting for `subject`'s approval
    /// through the type's journey; what it opens is a request of a policy mapping `type` whose
    /// bound body fields equal `bound` (its seal: realm, `AuthorizationDetails.resource`, the
    /// type, subject and `AuthorizationDetails.digest`).
    public static func fromDetails(txid: String, entries: [JSONValue], type: String?, bound: [String: JSONValue], realm: String,
                                   subject: String, journey: String, display: String?, expires: Int) -> TransactionRecord {
        var r = TransactionRecord(txid: txid, realm: realm, resource: AuthorizationDetails.resource, method: type ?? "",
                                  subject: subject, journey: journey,
                                  bodyDigest: type.map { AuthorizationDetails.digest(type: $0, bound: bound) }, bound: bound,
                                  display: display, expires: expires)
        r.authorizationDetails = .array(entries)
        return r
    }
}

extension TransactionBinding {
    /// The seal a request's binding has when it is opened by an approval asked for ahead
    /// (`TransactionRecord.fromDetails`) of `type`.
    public func detailsSeal(type: String) -> String {
        Self.seal(realm: realm, resource: AuthorizationDetails.resource, method: type, subject: subject,
                  bodyDigest: AuthorizationDetails.digest(type: type, bound: bound))
    }
}

extension GatewayConfig {
    /// The `authorization_details` types transaction policies map, by type (the loader checks
    /// that every policy mapping one type maps it alike).
    public var detailsMappings: [String: DetailsMapping] {
        var out: [String: DetailsMapping] = [:]
        for p in policies ?? [] {
            if case .transaction(let rule) = p.requirement, let m = rule.authorizationDetails, out[m.type] == nil { out[m.type] = m }
        }
        return out
    }
}

extension TransactionRecord {
    /// What the person is shown they approve: the `authorization_details` fields of an approval
    /// asked for ahead (`AuthorizationDetails.shown`), else the bound values.
    public var shownFields: [String: JSONValue] {
        authorizationDetails?.arrayValue.map(AuthorizationDetails.shown) ?? bound
    }
}
