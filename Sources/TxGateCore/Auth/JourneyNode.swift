import Foundation
import TxGateCrypto

/// What a journey carries from step to step, inside the signed authId (so any instance that
/// shares the key can continue it, and a restart loses nothing).
public struct JourneyState: Codable, Equatable, Sendable {
    public var realm: String
    public var journey: String
    /// Index of the node whose callbacks the client is answering.
    public var node: Int
    /// The user the journey has identified (or the session's user for a step-up).
    public var username: String?
    /// Values collected along the way (e.g. what a later node needs).
    public var shared: [String: String]
    /// The transaction a composite-advice journey completes.
    public var txid: String?

    public init(realm: String, journey: String, node: Int = 0, username: String? = nil,
                shared: [String: String] = [:], txid: String? = nil) {
        self.realm = realm
        self.journey = journey
        self.node = node
        self.username = username
        self.shared = shared
        self.txid = txid
    }

    /// The state as JSON (what an authId carries).
    public var json: JSONValue {
        var o: [String: JSONValue] = [
            "realm": .string(realm), "journey": .string(journey), "node": .number(node),
            "shared": .object(shared.mapValues { .string($0) }),
        ]
        if let username { o["username"] = .string(username) }
        if let txid { o["txid"] = .string(txid) }
        return .object(o)
    }

    /// `json`'s canonical bytes, written member by member (an authId is signed at every step).
    public var canonicalBytes: [UInt8] {
        var w = CanonicalObjectWriter(capacity: 256)
        w.member("journey", journey)
        w.member("node", node)
        w.member("realm", realm)
        w.member("shared", strings: shared)
        if let txid { w.member("txid", txid) }
        if let username { w.member("username", username) }
        return w.finish()
    }

    public init?(json: JSONValue) {
        guard case .object(let o) = json, let realm = o["realm"]?.stringValue, let journey = o["journey"]?.stringValue,
              case .number(let n)? = o["node"], let node = n.intValue, let sharedJSON = o["shared"]?.objectValue
        else { return nil }
        var shared: [String: String] = [:]
        for (k, v) in sharedJSON {
            guard let s = v.stringValue else { return nil }
            shared[k] = s
        }
        let username = o["username"], txid = o["txid"]
        guard username == nil || username?.stringValue != nil, txid == nil || txid?.stringValue != nil else { return nil }
        self.init(realm: realm, journey: journey, node: node, username: username?.stringValue, shared: shared, txid: txid?.stringValue)
    }
}

/// How a node's step ended.
/// What kind of failure ended a journey. Only a journey inside a live session (an approval, a
/// step-up) tells the person which it was (`detail.reason` of the 401): an unauthenticated
/// caller gets AM's plain "Login failure" whatever happened, so that a guesser learns nothing.
public enum FailureKind: String, Equatable, Sendable {
    case wrongCode = "wrong_code"
    /// A one-time code that was already used (or an earlier one than the last accepted).
    case codeUsed = "code_used"
    case lockedOut = "locked_out"
    /// The person said no (a Confirmation step's "No").
    case declined
    /// A passkey step for a user who has registered none.
    case noPasskey = "no_passkey"
    /// The person denied an approval request on another device (`ApproveElsewhere`).
    case denied
    /// An approval request expired before anyone decided it.
    case expired
    case other
}

public enum NodeOutcome: Equatable, Sendable {
    /// Go on to the next node with this state.
    case next(JourneyState)
    /// Stay on this node: show its callbacks again, for this state, re-signed (a passkey step
    /// whose person chose the one-time code instead; `ApproveElsewhere` answering a poll while
    /// its approval request is pending).
    case again(JourneyState)
    /// The journey fails (401 Login failure). The reason is for the log only, never the client;
    /// the kind may be told to a person inside a live session (`FailureKind`), and so may
    /// `attemptsLeft`: the failures still allowed before the lockout, when this one was counted.
    case failure(reason: String, kind: FailureKind = .other, attemptsLeft: Int? = nil)
    /// A backing service is down: fail closed with 503.
    case unavailable(String)
}

/// What entering a node leads to, before its callbacks are shown.
public enum EntryOutcome: Sendable {
    /// Show the node's callbacks with this state.
    case show(JourneyState)
    /// The journey waits for a link: answer a SuspendedTextOutputCallback with this message.
    case suspend(message: String)
    /// Show an error text; answering it enters the node again (e.g. an email that failed).
    case error(String)
    case failure(reason: String, kind: FailureKind = .other)
    case unavailable(String)
}

/// An email a node asks to send.
/// One plain-text email to one recipient.
public struct OutgoingEmail: Equatable, Sendable {
    public var to: String
    public var subject: String
    /// Plain text. Any line ending (LF, CRLF, CR) is sent as CRLF.
    public var body: String
    public init(to: String, subject: String, body: String) { self.to = to; self.subject = subject; self.body = body }
}

/// The I/O a node may need, done elsewhere (store, password hashing off the loop). Every
/// completion runs on the caller's loop.
public protocol JourneyServices: AnyObject {
    func user(named: String) -> UserRecord?
    /// Spends the same time whether or not `user` exists.
    func verifyPassword(_ password: String, of user: UserRecord?, _ done: @escaping (Bool) -> Void)
    /// Whether `who` may not try now (their source, their account, or their session is locked).
    func isLockedOut(_ who: Attempter, _ done: @escaping (StoreResult<Bool>) -> Void)
    /// Counts a failed attempt; locks when a limit is reached. Answers how many more failures
    /// `who` may have before a lockout (the fewest of its counters); 0 when this one locked.
    func recordFailure(_ who: Attempter, _ done: @escaping (StoreResult<Int>) -> Void)
    /// Records `step` as the last TOTP time step accepted for `username` if it is later than the
    /// one recorded (RFC 6238 §5.2), unless `who` is locked out (`isLockedOut`), in one store
    /// step: `.raised` accepted; `.notHigher` that code, or a later one, was accepted already;
    /// `.blocked` locked out, nothing recorded. The record never expires, so that no purge and
    /// no clock step can re-open a code; of concurrent callers with the same step, exactly one
    /// gets `.raised`.
    func acceptTOTPStep(_ step: UInt64, of username: String, unlessLockedOut who: Attempter,
                        _ done: @escaping (StoreResult<GuardedRaise>) -> Void)
    /// Unix time in seconds.
    var now: Int { get }
    /// Sends an email; the error says what failed.
    func sendEmail(_ email: OutgoingEmail, _ done: @escaping (Result<Void, DeliveryError>) -> Void)
    /// Counts an email to `username` asked for by `who`; false when the limit is reached.
    func allowEmail(to username: String, requestedBy who: Attempter, _ done: @escaping (StoreResult<Bool>) -> Void)
    /// Keeps a value for later, once (suspended journeys, emailed codes).
    func save(_ key: String, _ value: [UInt8], ttlS: Int, _ done: @escaping (StoreResult<Void>) -> Void)
    /// Returns and removes a saved value: of concurrent callers, exactly one gets it.
    func take(_ key: String, _ done: @escaping (StoreResult<[UInt8]?>) -> Void)
    /// A keyed hash (HMAC-SHA256 with a server secret) of a one-time value, so that the store
    /// never holds a code that can be read or brute-forced offline.
    func keyedDigest(_ value: [UInt8]) -> [UInt8]
    /// The passkey nodes' services; nil (the default) where `webauthn` is not configured.
    var passkeyServices: PasskeyServices? { get }
    /// Stores a new approval request (`ApprovalRequest.key`), kept a little past its expiry so
    /// that a late poll or page is told "expired" rather than "unknown".
    func saveApproval(_ request: ApprovalRequest, _ done: @escaping (StoreResult<Void>) -> Void)
    /// Reads an approval request (a read only: polls never write).
    func readApproval(_ id: String, _ done: @escaping (StoreResult<ApprovalRequest?>) -> Void)
    /// The transaction `txid` as stored, for what an approval request shows.
    func transaction(_ txid: String, _ done: @escaping (StoreResult<TransactionRecord?>) -> Void)
    /// Sends a saved approval request on `channels`, in the background: the journey does not
    /// wait for deliveries (a webhook retries with backoff); each channel logs and counts its
    /// outcome.
    func notifyApproval(_ request: ApprovalRequest, channels: [ApprovalChannelKind])
}

/// Why an email was not delivered.
public struct DeliveryError: Error, Equatable, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// One step of a journey: the callbacks it shows, and what it does with the answers.
///
/// Adding a node type is one new type conforming to this protocol and one line in
/// `JourneyNodes.registry`.
public protocol JourneyNode: Sendable {
    /// Runs when the journey reaches the node, before its callbacks are shown.
    func enter(_ state: JourneyState, _ context: JourneyContext, _ done: @escaping (EntryOutcome) -> Void)
    func callbacks(_ state: JourneyState, _ context: JourneyContext) -> [Callback]
    func process(_ submitted: [SubmittedCallback], _ state: JourneyState, _ context: JourneyContext,
                 _ done: @escaping (NodeOutcome) -> Void)
}

extension JourneyServices {
    /// Runs `then` unless `who` is locked out (the step fails) or the store is down.
    func unlessLockedOut(_ who: Attempter, _ done: @escaping (NodeOutcome) -> Void, then: @escaping () -> Void) {
        isLockedOut(who) { r in
            switch r {
            case .failure(let e): done(.unavailable(e.description))
            case .success(true): done(.failure(reason: "user is locked out", kind: .lockedOut))
            case .success(false): then()
            }
        }
    }

    /// Counts a failed attempt toward the lockout, then fails the step, with the attempts left.
    func failAttempt(_ who: Attempter, reason: String, kind: FailureKind = .other, _ done: @escaping (NodeOutcome) -> Void) {
        recordFailure(who) { r in
            switch r {
            case .failure(let e): done(.unavailable(e.description))
            case .success(let left): done(.failure(reason: reason, kind: kind, attemptsLeft: left))
            }
        }
    }
}


public extension JourneyNode {
    func enter(_ state: JourneyState, _ context: JourneyContext, _ done: @escaping (EntryOutcome) -> Void) {
        done(.show(state))
    }
}

public struct NodeConfigError: Error, Equatable {
    public let path: String
    public let message: String
}

public enum JourneyNodes {
    typealias Builder = @Sendable ([String: JSONValue], String) throws(NodeConfigError) -> JourneyNode

    static let registry: [String: Builder] = [
        "UsernamePassword": { s, p throws(NodeConfigError) in try UsernamePasswordNode(s, p) },
        "TOTP": { s, p throws(NodeConfigError) in try TOTPNode(s, p) },
        "Message": { s, p throws(NodeConfigError) in try MessageNode(s, p) },
        "Confirm": { s, p throws(NodeConfigError) in try ConfirmNode(s, p) },
        "UsernameOnly": { s, p throws(NodeConfigError) in try UsernameOnlyNode(s, p) },
        "EmailOTP": { s, p throws(NodeConfigError) in try EmailOTPNode(s, p) },
        "EmailSuspend": { s, p throws(NodeConfigError) in try EmailSuspendNode(s, p) },
        "WebAuthnRegistration": { s, p throws(NodeConfigError) in try WebAuthnRegistrationNode(s, p) },
        "WebAuthnAuthentication": { s, p throws(NodeConfigError) in try WebAuthnAuthenticationNode(s, p) },
        "ApproveElsewhere": { s, p throws(NodeConfigError) in try ApproveElsewhereNode(s, p) },
    ]

    public static var types: [String] { registry.keys.sorted() }

    public static func make(_ config: NodeConfig) throws(NodeConfigError) -> JourneyNode {
        guard let build = registry[config.type] else {
            throw NodeConfigError(path: config.path + ".type",
                                  message: config.type.isEmpty ? "required key is missing"
                                      : "'\(config.type)' is not a node type (\(types.joined(separator: ", ")))")
        }
        return try build(config.settings, config.path)
    }
}

/// Reads a node's settings strictly.
struct NodeSettings {
    let values: [String: JSONValue]
    let path: String

    init(_ values: [String: JSONValue], _ path: String, known: [String]) throws(NodeConfigError) {
        self.values = values
        self.path = path
        if let unknown = values.keys.sorted().first(where: { !known.contains($0) }) {
            throw NodeConfigError(path: "\(path).\(unknown)", message: "unknown key")
        }
    }

    func int(_ key: String, default d: Int) throws(NodeConfigError) -> Int {
        guard let v = values[key] else { return d }
        guard let n = v.intValue, case .number = v, n > 0 else {
            throw NodeConfigError(path: "\(path).\(key)", message: "must be a whole number greater than 0")
        }
        return n
    }

    func string(_ key: String, default d: String) throws(NodeConfigError) -> String {
        guard let v = values[key] else { return d }
        guard let s = v.stringValue else { throw NodeConfigError(path: "\(path).\(key)", message: "wrong type: expected a string") }
        return s
    }

    /// A string whose `{name}` placeholders must all be among `variables` (a typo would reach
    /// the user as written).
    func template(_ key: String, variables: [String], default d: String) throws(NodeConfigError) -> String {
        let s = try string(key, default: d)
        if let unknown = EmailTemplate.unknownPlaceholders(in: s, known: Set(variables)).first {
            throw NodeConfigError(path: "\(path).\(key)", message: "unknown placeholder '{\(unknown)}' (this \(key) may use "
                + variables.map { "{\($0)}" }.joined(separator: ", ") + ")")
        }
        return s
    }
}

/// NameCallback + PasswordCallback on one page.
struct UsernamePasswordNode: JourneyNode {
    let usernamePrompt: String
    let passwordPrompt: String

    init(_ s: [String: JSONValue], _ path: String) throws(NodeConfigError) {
        let n = try NodeSettings(s, path, known: ["usernamePrompt", "passwordPrompt"])
        usernamePrompt = try n.string("usernamePrompt", default: "User Name")
        passwordPrompt = try n.string("passwordPrompt", default: "Password")
    }

    func callbacks(_ state: JourneyState, _ context: JourneyContext) -> [Callback] {
        [.name(usernamePrompt), .password(passwordPrompt)]
    }

    func process(_ submitted: [SubmittedCallback], _ state: JourneyState, _ context: JourneyContext,
                 _ done: @escaping (NodeOutcome) -> Void) {
        let username = (submitted[0].text ?? "").trimmingWhitespaces()
        let password = submitted[1].text ?? ""
        let services = context.services
        let user = services.user(named: username)
        guard !username.isEmpty else {
            services.verifyPassword(password, of: nil) { _ in done(.failure(reason: "empty username")) }
            return
        }
        services.isLockedOut(context.attempter(username)) { locked in
            switch locked {
            case .failure(let e): done(.unavailable(e.description))
            case .success(true):
                // Same work, same answer as a wrong password.
                services.verifyPassword(password, of: nil) { _ in done(.failure(reason: "user is locked out", kind: .lockedOut)) }
            case .success(false):
                services.verifyPassword(password, of: user) { ok in
                    if ok, user != nil {
                        var next = state
                        next.username = username
                        done(.next(next))
                        return
                    }
                    services.failAttempt(context.attempter(username), reason: user == nil ? "unknown user" : "wrong password", done)
                }
            }
        }
    }
}

/// Where a user's last accepted TOTP time step is kept (`Store.raise`, never expiring), and how
/// long a lost or rolled-back one matters.
public enum TOTPStepRecord {
    public static let keyPrefix = "totp-step:"
    public static func key(_ username: String) -> String { keyPrefix + username }
    /// How long after its last use a code is still inside the acceptance window (its own step
    /// and `TOTPNode.window` steps either side), rounded up: a store that may have rolled the
    /// last accepted step back refuses TOTP for this long, after which no code it could have
    /// covered is accepted anyway (`FencedKeys`).
    public static let replayWindowMs = (2 * TOTPNode.window + 2) * TOTPNode.period * 1000
}

/// RFC 6238 one-time password (SHA-1, 30 s, 6 digits, ±1 step). Each user's time steps are
/// accepted in increasing order only: a code is refused once it, or a later one, has been used.
struct TOTPNode: JourneyNode {
    let prompt: String
    static let window = 1
    static let period = 30

    init(_ s: [String: JSONValue], _ path: String) throws(NodeConfigError) {
        let n = try NodeSettings(s, path, known: ["prompt"])
        prompt = try n.string("prompt", default: "One Time Password")
    }

    func callbacks(_ state: JourneyState, _ context: JourneyContext) -> [Callback] { context.codePage(prompt) }

    func process(_ submitted: [SubmittedCallback], _ state: JourneyState, _ context: JourneyContext,
                 _ done: @escaping (NodeOutcome) -> Void) {
        let services = context.services
        guard let username = state.username else {
            done(.failure(reason: "one-time password asked before the user is known"))
            return
        }
        let code = (submitted.last?.text ?? "").trimmingWhitespaces()
        let who = context.attempter(username)
        guard let secret = services.user(named: username)?.totpSecret.flatMap(Base32.decode),
              let counter = TOTP(secret: secret, digits: 6, period: Self.period)
                .matchingCounter(code, at: services.now, window: Self.window) else {
            // Locked out, a wrong code is answered as a right one is: locked out, nothing counted.
            services.unlessLockedOut(who, done) {
                services.failAttempt(who, reason: "wrong one-time password", kind: .wrongCode, done)
            }
            return
        }
        // The lockout is checked by the step that records the code, not read before it. Not a
        // marker per code that expires on the wall clock: a clock stepped back past a purged
        // marker would accept the spent code again.
        services.acceptTOTPStep(counter, of: username, unlessLockedOut: who) { accepted in
            switch accepted {
            case .failure(let e): done(.unavailable(e.description))
            case .success(.blocked): done(.failure(reason: "user is locked out", kind: .lockedOut))
            case .success(.notHigher):
                done(.failure(reason: "one-time password already used (or an earlier one than the last accepted)", kind: .codeUsed))
            case .success(.raised): done(.next(state))
            }
        }
    }
}

/// A message to read (TextOutputCallback); any answer goes on.
struct MessageNode: JourneyNode {
    let message: String
    let messageType: String

    init(_ s: [String: JSONValue], _ path: String) throws(NodeConfigError) {
        let n = try NodeSettings(s, path, known: ["message", "messageType"])
        message = try n.string("message", default: "")
        let t = try n.string("messageType", default: "info")
        switch t {
        case "info": messageType = "0"
        case "warning": messageType = "1"
        case "error": messageType = "2"
        default: throw NodeConfigError(path: "\(path).messageType", message: "'\(t)' is not info, warning or error")
        }
        if message.isEmpty { throw NodeConfigError(path: "\(path).message", message: "required key is missing") }
    }

    func callbacks(_ state: JourneyState, _ context: JourneyContext) -> [Callback] {
        [.text(message, messageType: messageType)]
    }

    func process(_ submitted: [SubmittedCallback], _ state: JourneyState, _ context: JourneyContext,
                 _ done: @escaping (NodeOutcome) -> Void) {
        done(.next(state))
    }
}

/// A Yes/No question (ConfirmationCallback); "No" ends the journey in failure.
struct ConfirmNode: JourneyNode {
    let prompt: String

    init(_ s: [String: JSONValue], _ path: String) throws(NodeConfigError) {
        let n = try NodeSettings(s, path, known: ["prompt"])
        prompt = try n.string("prompt", default: "Do you approve?")
    }

    func callbacks(_ state: JourneyState, _ context: JourneyContext) -> [Callback] {
        [.confirmation(context.display ?? prompt, options: ["Yes", "No"], defaultOption: 1)]
    }

    func process(_ submitted: [SubmittedCallback], _ state: JourneyState, _ context: JourneyContext,
                 _ done: @escaping (NodeOutcome) -> Void) {
        if submitted.last?.inputs.first?.intValue == 0 {
            done(.next(state))
        } else {
            done(.failure(reason: "declined", kind: .declined))
        }
    }
}

extension String {
    /// `trimmingCharacters(in: .whitespaces)`, which is Foundation's (`NSString`, about 8,000
    /// instructions), only for a string that has whitespace at an end: one that begins and
    /// ends with printable ASCII other than a space (nearly every typed code and name) is
    /// returned as it is, since no such byte is whitespace or part of a longer character.
    func trimmingWhitespaces() -> String {
        guard let first = utf8.first, let last = utf8.last else { return self }
        func plain(_ b: UInt8) -> Bool { b > 0x20 && b < 0x7F }
        return plain(first) && plain(last) ? self : trimmingCharacters(in: .whitespaces)
    }
}
