import HTTPCore

/// An AM authentication callback, as ForgeRock SDKs render and submit it (WIRE.md §4).
public struct Callback: Equatable, Sendable {
    public struct Field: Equatable, Sendable {
        public var name: String
        public var value: JSONValue
        public init(_ name: String, _ value: JSONValue) { self.name = name; self.value = value }
    }

    public var type: String
    public var output: [Field]
    public var input: [Field]

    public init(type: String, output: [Field], input: [Field] = []) {
        self.type = type
        self.output = output
        self.input = input
    }

    /// AM's field order: type, output, input, _id. Inputs are named `IDToken<n>` after the
    /// callback's position on the page (1-based), as AM does.
    public func json(id: Int) -> String {
        var out = ByteWriter(capacity: 256)
        write(id: id, into: &out)
        return out.string
    }

    /// `json(id:)`'s bytes appended to `out`: a step's callbacks are written at every step.
    public func write(id: Int, into out: inout ByteWriter) {
        out.append(#"{"type":"# as StaticString)
        JSONText.write(type, into: &out)
        out.append(#","output":["# as StaticString)
        for (i, field) in output.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.append(#"{"name":"# as StaticString)
            JSONText.write(field.name, into: &out)
            out.append(#","value":"# as StaticString)
            field.value.write(&out)
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "]"))
        if !input.isEmpty {
            out.append(#","input":["# as StaticString)
            for (i, f) in input.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                out.append(#"{"name":"IDToken"# as StaticString)
                out.appendDecimal(id + 1)
                if input.count > 1 && i > 0 {
                    out.append(UInt8(ascii: "_"))
                    out.appendDecimal(i - 1)
                }
                out.append(#"","value":"# as StaticString)
                f.value.write(&out)
                out.append(UInt8(ascii: "}"))
            }
            out.append(UInt8(ascii: "]"))
        }
        out.append(#","_id":"# as StaticString)
        out.appendDecimal(id)
        out.append(UInt8(ascii: "}"))
    }

    public static func name(_ prompt: String) -> Callback {
        Callback(type: "NameCallback", output: [Field("prompt", .string(prompt))], input: [Field("IDToken", "")])
    }

    public static func password(_ prompt: String) -> Callback {
        Callback(type: "PasswordCallback", output: [Field("prompt", .string(prompt))], input: [Field("IDToken", "")])
    }

    /// `messageType` "0" information, "1" warning, "2" error.
    public static func text(_ message: String, messageType: String = "0") -> Callback {
        Callback(type: "TextOutputCallback", output: [Field("message", .string(message)), Field("messageType", .string(messageType))])
    }

    public static func suspended(_ message: String) -> Callback {
        Callback(type: "SuspendedTextOutputCallback", output: [Field("message", .string(message)), Field("messageType", "0")])
    }

    /// AM's PollingWaitCallback (WIRE.md §12): no input; the client waits `waitTimeMs` and
    /// submits the step again, unchanged. `waitTime` is a string of milliseconds, as AM sends it.
    public static func pollingWait(waitTimeMs: Int, message: String) -> Callback {
        Callback(type: "PollingWaitCallback", output: [Field("waitTime", .string(String(waitTimeMs))), Field("message", .string(message))])
    }

    /// AM's MetadataCallback: one output, `data`, for the client's own code (a WebAuthn step's
    /// options); no input.
    public static func metadata(_ data: JSONValue) -> Callback {
        Callback(type: "MetadataCallback", output: [Field("data", data)])
    }

    /// AM's HiddenValueCallback: the client writes into its input; AM's input starts out
    /// holding the id (`webAuthnOutcome`), its output `value` "false".
    public static func hiddenValue(id: String) -> Callback {
        Callback(type: "HiddenValueCallback", output: [Field("value", "false"), Field("id", .string(id))],
                 input: [Field("IDToken", .string(id))])
    }

    public static func confirmation(_ prompt: String, options: [String], defaultOption: Int) -> Callback {
        Callback(type: "ConfirmationCallback",
                 output: [Field("prompt", .string(prompt)), Field("messageType", 0),
                          Field("options", .array(options.map { .string($0) })), Field("optionType", -1),
                          Field("defaultOption", .number(defaultOption))],
                 input: [Field("IDToken", .number(defaultOption))])
    }
}

/// What a client sent back for one callback: its type and the values of its inputs.
public struct SubmittedCallback: Equatable, Sendable {
    public var type: String
    public var inputs: [JSONValue]

    public init(type: String, inputs: [JSONValue]) { self.type = type; self.inputs = inputs }

    /// The first input as text (what NameCallback and PasswordCallback carry).
    public var text: String? {
        guard let v = inputs.first else { return nil }
        switch v {
        case .string(let s): return s
        case .number: return v.canonical
        default: return nil
        }
    }

    /// Parses `{"authId": ..., "callbacks": [...]}`'s callbacks.
    public static func parse(_ callbacks: JSONValue?) -> [SubmittedCallback]? {
        guard let list = callbacks?.arrayValue else { return nil }
        var out: [SubmittedCallback] = []
        for c in list {
            guard let type = c["type"]?.stringValue else { return nil }
            let inputs = (c["input"]?.arrayValue ?? []).map { $0["value"] ?? .null }
            out.append(SubmittedCallback(type: type, inputs: inputs))
        }
        return out
    }
}
