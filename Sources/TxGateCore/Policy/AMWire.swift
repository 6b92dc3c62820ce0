import TxGateCrypto

/// What a remote AM (or another TxGate) says, read strictly (WIRE.md §1). Anything that is not
/// exactly a decision in AM's shape is `malformed`: the gateway then fails closed, it never
/// guesses an allow from a partial answer.
public enum AMWire {
    /// Why an answer from the AM cannot be used.
    public struct Malformed: Error, Equatable, CustomStringConvertible {
        public let description: String
        public init(_ d: String) { description = d }
    }

    /// `/json/realms/root[/realms/SUB...]` for a realm such as `/` or `/alpha/branch`.
    public static func realmPath(_ realm: String) -> String {
        realm.split(separator: "/").reduce("/json/realms/root") { $0 + "/realms/" + $1 }
    }

    /// The body of `policies?_action=evaluate` for one resource: the subject's SSO token (or an
    /// OIDC token as `jwt`), and `environment.TxId` on a retry.
    public static func evaluateRequest(resource: String, application: String, ssoToken: String?, jwt: String? = nil,
                                       txid: String?) -> String {
        var subject = "{}"
        if let jwt { subject = #"{"jwt":"\#(JSONText.escape(jwt))"}"# } else if let ssoToken { subject = #"{"ssoToken":"\#(JSONText.escape(ssoToken))"}"# }
        let environment = txid.map { #"{"TxId":["\#(JSONText.escape($0))"]}"# } ?? "{}"
        return #"{"resources":["\#(JSONText.escape(resource))"],"application":"\#(JSONText.escape(application))","subject":\#(subject),"environment":\#(environment)}"#
    }

    /// The decision for `resource` in an evaluate answer: a JSON array of decisions, one of
    /// which names the resource (or a single one, which AM sends for a single resource).
    public static func decision(_ body: [UInt8], resource: String) -> Result<Decision, Malformed> {
        guard let json = JSONValue.parse(body) else { return .failure(Malformed("the answer is not JSON")) }
        guard let list = json.arrayValue else { return .failure(Malformed("the answer is not a JSON array of decisions")) }
        guard !list.isEmpty else { return .failure(Malformed("the answer holds no decision")) }
        let named = list.filter { $0["resource"]?.stringValue == resource }
        guard let entry = named.first ?? (list.count == 1 ? list[0] : nil) else {
            return .failure(Malformed("no decision names the resource asked about"))
        }
        guard named.count <= 1 else { return .failure(Malformed("several decisions name the resource asked about")) }
        return decision(entry, resource: resource)
    }

    static func decision(_ entry: JSONValue, resource: String) -> Result<Decision, Malformed> {
        guard let o = entry.objectValue else { return .failure(Malformed("a decision is not a JSON object")) }
        if let r = o["resource"], r.stringValue == nil { return .failure(Malformed("'resource' is not a string")) }
        var d = Decision(resource: resource)
        for (method, v) in o["actions"]?.objectValue ?? [:] {
            guard case .bool(let b) = v else { return .failure(Malformed("actions.\(method) is not true or false")) }
            d.actions[method] = b
        }
        if let a = o["actions"], a.objectValue == nil, a != .null { return .failure(Malformed("'actions' is not an object")) }
        switch stringLists(o["advices"], "advices") {
        case .failure(let e): return .failure(e)
        case .success(let pairs): d.advices = Advices(pairs)
        }
        switch stringLists(o["attributes"], "attributes") {
        case .failure(let e): return .failure(e)
        case .success(let pairs): d.attributes = Dictionary(pairs, uniquingKeysWith: { a, _ in a })
        }
        if let t = o["ttl"], t != .null {
            // AM sends Long.MAX_VALUE for "cache as long as you like": it must still parse.
            guard let n = t.numberValue, let ms = Int64(n.text) else { return .failure(Malformed("'ttl' is not an integer (epoch ms)")) }
            d.ttl = ms
        }
        return .success(d)
    }

    /// `{name: [string, ...]}`, in a stable order (names sorted); a missing or null member is empty.
    static func stringLists(_ v: JSONValue?, _ name: String) -> Result<[(String, [String])], Malformed> {
        guard let v, v != .null else { return .success([]) }
        guard let o = v.objectValue else { return .failure(Malformed("'\(name)' is not an object")) }
        var out: [(String, [String])] = []
        for key in o.keys.sorted() {
            guard let items = o[key]?.arrayValue else { return .failure(Malformed("\(name).\(key) is not an array")) }
            let strings = items.compactMap(\.stringValue)
            guard strings.count == items.count else { return .failure(Malformed("\(name).\(key) holds a value that is not a string")) }
            out.append((key, strings))
        }
        return .success(out)
    }

    /// `sessions?_action=validate`: the user behind a live session, nil when AM says it is not valid.
    public static func validatedUser(_ body: [UInt8]) -> Result<(uid: String, realm: String)?, Malformed> {
        guard let o = JSONValue.parse(body)?.objectValue, case .bool(let valid)? = o["valid"] else {
            return .failure(Malformed("the session validation answer has no 'valid'"))
        }
        guard valid else { return .success(nil) }
        guard let uid = o["uid"]?.stringValue, !uid.isEmpty else { return .failure(Malformed("a valid session without 'uid'")) }
        return .success((uid, o["realm"]?.stringValue ?? "/"))
    }
}

/// The agent's side of a login journey (WIRE.md §4): answers NameCallback and PasswordCallback
/// with its credentials, step by step, until AM hands out a token. Any other callback is a
/// journey the agent cannot run.
public struct AgentLogin {
    public enum Step: Equatable {
        /// POST this body back to `authenticate`.
        case answer(String)
        case loggedIn(token: String)
        case refused(String)
    }

    public let username: String
    public let password: String

    public init(username: String, password: String) {
        self.username = username
        self.password = password
    }

    /// What to do with one `authenticate` answer (`status`, JSON `body`).
    public func next(status: Int, body: [UInt8]) -> Step {
        guard let o = JSONValue.parse(body)?.objectValue else { return .refused("the login answer (\(status)) is not a JSON object") }
        guard status == 200 else { return .refused("the login was refused (\(status)): \(o["message"]?.stringValue ?? "no message")") }
        if let token = o["tokenId"]?.stringValue, !token.isEmpty { return .loggedIn(token: token) }
        guard let authId = o["authId"]?.stringValue, let callbacks = o["callbacks"]?.arrayValue, !callbacks.isEmpty else {
            return .refused("the login answer has neither tokenId nor callbacks")
        }
        var answered: [String] = []
        for cb in callbacks {
            guard let type = cb["type"]?.stringValue else { return .refused("a callback without a type") }
            let value: String
            switch type {
            case "NameCallback": value = username
            case "PasswordCallback": value = password
            default: return .refused("the agent's journey asks for a \(type), which an agent cannot answer")
            }
            // The callback goes back as it came, its first input filled in (AM checks the rest).
            guard var c = cb.objectValue, var inputs = c["input"]?.arrayValue, var input = inputs.first?.objectValue else {
                return .refused("the \(type) has no input")
            }
            input["value"] = .string(value)
            inputs[0] = .object(input)
            c["input"] = .array(inputs)
            answered.append(JSONValue.object(c).canonical)
        }
        return .answer(#"{"authId":"\#(JSONText.escape(authId))","callbacks":[\#(answered.joined(separator: ","))]}"#)
    }
}
