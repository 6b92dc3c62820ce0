import TxGateCrypto

extension WebAuthn {
    /// The relying party: its ID (a registrable domain, `bank.example`) and the exact origins
    /// (`https://bank.example`) its pages run the ceremonies from.
    public struct RelyingParty: Sendable {
        public var id: String
        public var origins: [String]

        public init(id: String, origins: [String]) {
            self.id = id
            self.origins = origins
        }

        /// SHA-256 of the ID, as authenticator data carries it.
        public var idHash: [UInt8] { Crypto.sha256(Array(id.utf8)) }
    }

    /// The members of clientDataJSON (§5.8.1) that verification reads. The JSON is parsed strictly
    /// (RFC 8259, no duplicate member; TxGateWire's parser), not matched as a template: browsers
    /// add members (`other_keys_can_be_added_here`), which are ignored.
    struct ClientData {
        let type: String
        let challenge: String
        let origin: String
        let crossOrigin: Bool

        init(_ json: [UInt8]) throws(Refusal) {
            let value: JSONValue
            switch JSONValue.parseReportingErrors(json) {
            case .success(let v): value = v
            case .failure(let e): throw .malformedClientData("not JSON: \(e)")
            }
            guard case .object = value else { throw .malformedClientData("not a JSON object") }
            type = try Self.string(value, "type")
            challenge = try Self.string(value, "challenge")
            origin = try Self.string(value, "origin")
            switch value["crossOrigin"] {
            case nil, .null?: crossOrigin = false
            case .bool(let b)?: crossOrigin = b
            default: throw .malformedClientData("crossOrigin is not a boolean")
            }
        }

        private static func string(_ object: JSONValue, _ name: String) throws(Refusal) -> String {
            guard let member = object[name] else { throw .malformedClientData("no \(name)") }
            guard let s = member.stringValue else { throw .malformedClientData("\(name) is not a string") }
            return s
        }

        /// Steps shared by both ceremonies (§7.1 steps 7-10, §7.2 steps 10-13): type, challenge,
        /// origin, crossOrigin.
        func check(type expected: String, challenge issued: [UInt8], relyingParty: RelyingParty) throws(Refusal) {
            guard type == expected else { throw .wrongType(expected: expected, found: type) }
            // The spec compares the base64url encodings: the unpadded one is the only one accepted.
            guard Crypto.constantTimeEquals(Array(challenge.utf8), Array(Base64URL.encode(issued).utf8)) else {
                throw .challengeMismatch
            }
            guard relyingParty.origins.contains(where: { $0.utf8.elementsEqual(origin.utf8) }) else {
                throw .wrongOrigin(origin)
            }
            guard !crossOrigin else { throw .crossOrigin }
        }
    }
}
