import TxGateWire

/// One callback of a journey step: something to show, or a field to fill in.
///
/// A callback is typed by ``kind``, and the JSON it came in is kept, so that an unknown type goes
/// back exactly as it came, with only its inputs changed. Fill one in with ``answer(_:)`` (or
/// ``setInput(_:at:)``), then send the step back with ``TxGateClient/next(_:)``.
public struct JourneyCallback: Sendable, Equatable {
    /// The callback types this library knows, by AM's names.
    public enum Kind: Sendable, Equatable {
        /// `NameCallback`: a user name, answered with text.
        case name
        /// `PasswordCallback`: a password or a one-time code, answered with text.
        case password
        /// `TextOutputCallback`: a message to show (what a transaction approves); no input.
        case textOutput
        /// `ConfirmationCallback`: one of ``JourneyCallback/options`` (e.g. Approve, Decline),
        /// answered with its text or its index.
        case confirmation
        /// `ChoiceCallback`: one of ``JourneyCallback/options``, answered with its text or its index.
        case choice
        /// `HiddenValueCallback`: a value the server sends for a script; nothing to show or ask.
        case hiddenValue
        /// `ValidatedCreatePasswordCallback`: a new password, answered with text.
        case validatedCreatePassword
        /// `SuspendedTextOutputCallback`: the journey waits for an emailed link (see ``JourneyStep/isSuspended``).
        case suspendedTextOutput
        /// `PollingWaitCallback`: nothing to answer; submit the step again, unchanged, after
        /// ``JourneyCallback/waitTimeMs`` (the person approves on another device).
        case pollingWait
        /// Any other type (its name): read `json`, answer with `setInput`.
        case unknown(String)

        init(_ type: String) {
            switch type {
            case "NameCallback": self = .name
            case "PasswordCallback": self = .password
            case "TextOutputCallback": self = .textOutput
            case "ConfirmationCallback": self = .confirmation
            case "ChoiceCallback": self = .choice
            case "HiddenValueCallback": self = .hiddenValue
            case "ValidatedCreatePasswordCallback": self = .validatedCreatePassword
            case "SuspendedTextOutputCallback": self = .suspendedTextOutput
            case "PollingWaitCallback": self = .pollingWait
            default: self = .unknown(type)
            }
        }
    }

    /// The type, as this library knows it.
    public let kind: Kind
    /// The type's name on the wire, e.g. `PasswordCallback`.
    public let type: String
    /// The callback as the server sent it, with the inputs set so far.
    public private(set) var json: JSONValue

    /// A callback from the JSON the server sent.
    ///
    /// - Parameter json: One element of a step's `callbacks` array.
    /// - Returns: Nil when `json` has no string `type`.
    public init?(json: JSONValue) {
        guard let type = json["type"]?.stringValue else { return nil }
        self.type = type
        self.kind = Kind(type)
        self.json = json
    }

    /// The value of the output named `name`.
    ///
    /// - Parameter name: An output's `name`, e.g. `prompt`.
    /// - Returns: Its `value`, or nil when the callback has no such output.
    public func output(_ name: String) -> JSONValue? {
        json["output"]?.arrayValue?.first { $0["name"]?.stringValue == name }?["value"]
    }

    /// `prompt` (Name, Password, Choice, Confirmation, ValidatedCreatePassword).
    public var prompt: String? { output("prompt")?.stringValue }
    /// `message` (TextOutput, SuspendedTextOutput).
    public var message: String? { output("message")?.stringValue }
    /// A PollingWaitCallback's `waitTime`: how long to wait before submitting the step again, in
    /// milliseconds (AM sends it as a string).
    public var waitTimeMs: Int? {
        guard kind == .pollingWait, let v = output("waitTime") else { return nil }
        return v.stringValue.flatMap { Int($0) } ?? v.intValue
    }
    /// `"0"` information, `"1"` warning, `"2"` error (TextOutput).
    public var messageType: String? { output("messageType").map { $0.stringValue ?? $0.canonical } }
    /// The options of a Confirmation (`options`) or the choices of a Choice (`choices`).
    public var options: [String] {
        (output("options") ?? output("choices"))?.arrayValue?.compactMap(\.stringValue) ?? []
    }
    /// The index of the option chosen when none is (`defaultOption`, or a Choice's `defaultChoice`).
    public var defaultOption: Int? { (output("defaultOption") ?? output("defaultChoice"))?.intValue }
    /// A HiddenValue's `value`.
    public var hiddenValue: String? { output("value")?.stringValue }
    /// A HiddenValue's `id`.
    public var hiddenId: String? { output("id")?.stringValue }
    /// What must be filled in: a callback with no input (TextOutput) needs nothing.
    public var needsInput: Bool { !(json["input"]?.arrayValue ?? []).isEmpty && kind != .hiddenValue }
    /// The human label: the prompt, else the message, else the type.
    public var label: String { prompt ?? message ?? type }

    /// The current value of an input.
    ///
    /// - Parameter index: Which input, the first by default.
    /// - Returns: Its `value`, or nil when there is no such input.
    public func input(_ index: Int = 0) -> JSONValue? { json["input"]?.arrayValue?[safe: index]?["value"] }

    /// Sets the value of an input; does nothing when there is no such input.
    ///
    /// - Parameters:
    ///   - value: The value to send back.
    ///   - index: Which input, the first by default.
    public mutating func setInput(_ value: JSONValue, at index: Int = 0) {
        guard case .object(var object) = json, case .array(var inputs)? = object["input"], index < inputs.count,
              case .object(var field) = inputs[index] else { return }
        field["value"] = value
        inputs[index] = .object(field)
        object["input"] = .array(inputs)
        json = .object(object)
    }

    /// Answers the callback with text, the way a person would.
    ///
    /// - Parameter text: For a Name, Password, ValidatedCreatePassword, HiddenValue or unknown
    ///   callback, the text to send. For a Confirmation or a Choice, an option's text (as in
    ///   ``options``) or its index; one that is neither sends `-1`, which names no option.
    public mutating func answer(_ text: String) {
        switch kind {
        case .confirmation, .choice:
            let index = options.firstIndex(of: text) ?? Int(text) ?? -1
            setInput(.number(index))
        default:
            setInput(.string(text))
        }
    }
}

/// A journey's step that asks for something: fill in its ``callbacks``, then send it back with
/// ``TxGateClient/next(_:)``.
public struct JourneyStep: Sendable, Equatable {
    /// The journey's state, signed by the server; sent back unchanged.
    public var authId: String
    /// What the step shows and asks for, in the server's order.
    public var callbacks: [JourneyCallback]
    /// The action the next call is tagged with (AUTHENTICATE).
    let tree: String
    let treeType: String

    /// What the step shows (TextOutput messages, in order): for a transaction, what is approved.
    public var displayedMessages: [String] {
        callbacks.filter { $0.kind == .textOutput || $0.kind == .suspendedTextOutput }.compactMap(\.message)
    }

    /// The step waits for something done elsewhere (`PollingWaitCallback`): submit it again,
    /// unchanged, after this many milliseconds.
    public var pollingWaitMs: Int? { callbacks.lazy.compactMap(\.waitTimeMs).first }

    /// The step suspended (magic link): nothing to answer, resume with the emailed URI.
    public var isSuspended: Bool { callbacks.contains { $0.kind == .suspendedTextOutput } }

    /// The step asks for a passkey (AM's WebAuthn callbacks: the `webAuthnOutcome` hidden value
    /// beside a MetadataCallback), which only a browser or a platform's WebAuthn API can answer.
    public var isPasskeyStep: Bool {
        callbacks.contains { $0.kind == .hiddenValue && $0.hiddenId == "webAuthnOutcome" }
            && callbacks.contains { $0.type == "MetadataCallback" }
    }

    /// `{"authId": ..., "callbacks": [...]}` with the inputs as set.
    var body: String {
        #"{"authId":"\#(JSONText.escape(authId))","callbacks":["# + callbacks.map(\.json.canonical).joined(separator: ",") + "]}"
    }
}

/// A journey's successful end: the session it started (or went on with).
///
/// The client has already saved ``tokenId`` in its ``TokenStore`` when it hands this back.
public struct JourneySuccess: Sendable, Equatable {
    /// The session token (`tokenId`).
    public var tokenId: String
    /// Where a browser would go next (`successUrl`), if the server named a page.
    public var successUrl: String?
    /// The realm the session is in (`realm`), e.g. `/`.
    public var realm: String?
}

/// What one journey call answered: a step to fill in, the journey's success, or its failure.
public enum JourneyOutcome: Sendable, Equatable {
    /// The journey asks for something: answer the step and send it with ``TxGateClient/next(_:)``.
    case step(JourneyStep)
    /// The journey ended well; the session token is saved.
    case success(JourneySuccess)
    /// The journey ended in a failure (a wrong code, a timeout, a declined transaction).
    case failure(AuthFailure)
}

extension Array {
    subscript(safe i: Int) -> Element? { indices.contains(i) ? self[i] : nil }
}
