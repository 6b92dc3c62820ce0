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
        /// Secure Payment Confirmation's `payment` member (type `payment.get`), if any.
        let payment: JSONValue?

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
            payment = value["payment"]
        }

        private static func string(_ object: JSONValue, _ name: String) throws(Refusal) -> String {
            guard let member = object[name] else { throw .malformedClientData("no \(name)") }
            guard let s = member.stringValue else { throw .malformedClientData("\(name) is not a string") }
            return s
        }

        /// Steps shared by both ceremonies (§7.1 steps 7-10, §7.2 steps 10-13): type, challenge,
        /// origin, crossOrigin.
        func check(type expected: String, challenge issued: [UInt8], relyingParty: RelyingParty,
                   payment: PaymentExpectation? = nil) throws(Refusal) {
            if let payment, type == "payment.get" {
                try payment.check(self.payment, relyingParty: relyingParty)
            } else {
                guard type == expected else { throw .wrongType(expected: expected, found: type) }
            }
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

extension WebAuthn {
    /// What a Secure Payment Confirmation assertion (clientDataJSON type `payment.get`) must
    /// show: the browser's own dialog displayed the amount, the payee and the instrument, and
    /// wrote them into clientDataJSON's `payment`, which the signature covers. Each must be what
    /// the transaction binds, so the signature is evidence that the person saw exactly that.
    public struct PaymentExpectation: Sendable, Equatable {
        /// As a JSON object (kept with the pending ceremony; given to the page).
        public var json: JSONValue {
            var o: [String: JSONValue] = ["total": .object(["currency": .string(currency), "value": .string(value)]),
                                          "instrument": .object(["displayName": .string(instrumentName)])]
            if let payeeName { o["payeeName"] = .string(payeeName) }
            return .object(o)
        }

        public init?(json v: JSONValue) {
            guard let currency = v["total"]?["currency"]?.stringValue, let value = v["total"]?["value"]?.stringValue,
                  let name = v["instrument"]?["displayName"]?.stringValue else { return nil }
            self.init(currency: currency, value: value, payeeName: v["payeeName"]?.stringValue, instrumentName: name)
        }

        public var currency: String
        /// The amount as a decimal string, as the page passed it to the browser.
        public var value: String
        public var payeeName: String?
        public var instrumentName: String

        public init(currency: String, value: String, payeeName: String?, instrumentName: String) {
            self.currency = currency
            self.value = value
            self.payeeName = payeeName
            self.instrumentName = instrumentName
        }

        /// The `payment` member of clientDataJSON against this (SPC §4.3: rpId, topOrigin,
        /// payeeName, total, instrument).
        func check(_ payment: JSONValue?, relyingParty: RelyingParty) throws(Refusal) {
            guard let p = payment, case .object = p else { throw .malformedClientData("payment.get without a payment object") }
            func string(_ v: JSONValue?) -> String? { v?.stringValue }
            guard string(p["rpId"]) == relyingParty.id else { throw .paymentMismatch("rpId") }
            guard let top = string(p["topOrigin"]), relyingParty.origins.contains(top) else { throw .paymentMismatch("topOrigin") }
            guard string(p["total"]?["currency"]) == currency, string(p["total"]?["value"]) == value else {
                throw .paymentMismatch("total")
            }
            guard string(p["payeeName"]) == payeeName else { throw .paymentMismatch("payeeName") }
            guard string(p["instrument"]?["displayName"]) == instrumentName else { throw .paymentMismatch("instrument") }
        }
    }
}
