import TxGateWire

/// One callback of a journey step (WIRE.md §4), typed; the JSON it came in is kept, so that an
/// unknown type goes back exactly as it came, with only its inputs changed.
public struct JourneyCallback: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        case name, password, textOutput, confirmation, choice, hiddenValue, validatedCreatePassword, suspendedTextOutput
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
            default: self = .unknown(type)
            }
        }
    }

    public let kind: Kind
    public let type: String
    /// The callback as the server sent it, with the inputs set so far.
    public private(set) var json: JSONValue

    public init?(json: JSONValue) {
        guard let type = json["type"]?.stringValue else { return nil }
        self.type = type
        self.kind = Kind(type)
        self.json = json
    }

    public func output(_ name: String) -> JSONValue? {
        json["output"]?.arrayValue?.first { $0["name"]?.stringValue == name }?["value"]
    }

    /// `prompt` (Name, Password, Choice, Confirmation, ValidatedCreatePassword).
    public var prompt: String? { output("prompt")?.stringValue }
    /// `message` (TextOutput, SuspendedTextOutput).
    public var message: String? { output("message")?.stringValue }
    /// `"0"` information, `"1"` warning, `"2"` error (TextOutput).
    public var messageType: String? { output("messageType").map { $0.stringValue ?? $0.canonical } }
    /// The options of a Confirmation (`options`) or the choices of a Choice (`choices`).
    public var options: [String] {
        (output("options") ?? output("choices"))?.arrayValue?.compactMap(\.stringValue) ?? []
    }
    public var defaultOption: Int? { (output("defaultOption") ?? output("defaultChoice"))?.intValue }
    /// A HiddenValue's `value` (and `id`).
    public var hiddenValue: String? { output("value")?.stringValue }
    public var hiddenId: String? { output("id")?.stringValue }
    /// What must be filled in: a callback with no input (TextOutput) needs nothing.
    public var needsInput: Bool { !(json["input"]?.arrayValue ?? []).isEmpty && kind != .hiddenValue }
    /// The human label: the prompt, else the message, else the type.
    public var label: String { prompt ?? message ?? type }

    /// The current value of input `index`.
    public func input(_ index: Int = 0) -> JSONValue? { json["input"]?.arrayValue?[safe: index]?["value"] }

    /// Sets input `index` (the first by default) to `value`.
    public mutating func setInput(_ value: JSONValue, at index: Int = 0) {
        guard case .object(var object) = json, case .array(var inputs)? = object["input"], index < inputs.count,
              case .object(var field) = inputs[index] else { return }
        field["value"] = value
        inputs[index] = .object(field)
        object["input"] = .array(inputs)
        json = .object(object)
    }

    /// Text for Name/Password/ValidatedCreatePassword/HiddenValue/unknown; for Confirmation and
    /// Choice, an option's text or its index.
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

/// A step that asks for something: the callbacks to fill in, then `TxGateClient.next(_:)`.
public struct JourneyStep: Sendable, Equatable {
    public var authId: String
    public var callbacks: [JourneyCallback]
    /// The action the next call is tagged with (AUTHENTICATE).
    let tree: String
    let treeType: String

    /// What the step shows (TextOutput messages, in order): for a transaction, what is approved.
    public var displayedMessages: [String] {
        callbacks.filter { $0.kind == .textOutput || $0.kind == .suspendedTextOutput }.compactMap(\.message)
    }

    /// The step suspended (magic link): nothing to answer, resume with the emailed URI.
    public var isSuspended: Bool { callbacks.contains { $0.kind == .suspendedTextOutput } }

    /// `{"authId": ..., "callbacks": [...]}` with the inputs as set.
    var body: String {
        #"{"authId":"\#(JSONText.escape(authId))","callbacks":["# + callbacks.map(\.json.canonical).joined(separator: ",") + "]}"
    }
}

/// A journey's successful end (WIRE.md §4).
public struct JourneySuccess: Sendable, Equatable {
    public var tokenId: String
    public var successUrl: String?
    public var realm: String?
}

/// What one journey call answered.
public enum JourneyOutcome: Sendable, Equatable {
    case step(JourneyStep)
    case success(JourneySuccess)
    case failure(AuthFailure)
}

extension Array {
    subscript(safe i: Int) -> Element? { indices.contains(i) ? self[i] : nil }
}
