import TxGateCrypto

extension WebAuthn {
    /// Dynamic linking (PSD2 RTS art. 5) for passkeys: the challenge of a transaction's
    /// assertion commits to what is approved, so that the signature itself is evidence of it
    /// (docs/WIRE-EXTENSIONS.md §11b).
    ///
    ///     approved  = canonical JSON of {"bound", "display", "method", "resource", "txid"}
    ///                 (and "authorization_details" for an approval asked for ahead, RFC 9396)
    ///     challenge = SHA-256(nonce || approved)
    ///
    /// with `nonce` 32 random bytes the gateway keeps with the pending assertion, and canonical
    /// JSON as the gateway writes it everywhere (no whitespace, object keys sorted, strings
    /// escaping only `"`, `\` and control characters, numbers in their exact shortest decimal).
    public enum TransactionChallenge {
        /// The bytes an approval commits to: what the person was shown and the request it opens.
        public static func approved(_ tx: TransactionRecord) -> [UInt8] {
            var o: [String: JSONValue] = [
                "bound": .object(tx.bound), "method": .string(tx.method), "resource": .string(tx.resource), "txid": .string(tx.txid),
            ]
            if let display = tx.display { o["display"] = .string(display) }
            if let details = tx.authorizationDetails { o["authorization_details"] = details }
            return JSONValue.object(o).canonicalBytes
        }

        public static func challenge(nonce: [UInt8], approved: [UInt8]) -> [UInt8] {
            Crypto.sha256(nonce + approved)
        }
    }

    /// What a Txn-Token carries (`tctx.passkey`) for a transaction approved with a passkey: all a
    /// third party needs to check, without the gateway, that this credential signed this
    /// transaction (docs/WIRE-EXTENSIONS.md §11b). Byte strings are base64url.
    public struct Evidence: Equatable, Sendable {
        public var credentialId: [UInt8]
        /// COSE_Key of the credential, as registered.
        public var publicKey: [UInt8]
        public var rpId: String
        public var nonce: [UInt8]
        public var approved: [UInt8]
        public var clientDataJSON: [UInt8]
        public var authenticatorData: [UInt8]
        public var signature: [UInt8]
        public var userHandle: [UInt8]?

        public init(credentialId: [UInt8], publicKey: [UInt8], rpId: String, nonce: [UInt8], approved: [UInt8],
                    clientDataJSON: [UInt8], authenticatorData: [UInt8], signature: [UInt8], userHandle: [UInt8]?) {
            self.credentialId = credentialId
            self.publicKey = publicKey
            self.rpId = rpId
            self.nonce = nonce
            self.approved = approved
            self.clientDataJSON = clientDataJSON
            self.authenticatorData = authenticatorData
            self.signature = signature
            self.userHandle = userHandle
        }

        public var json: JSONValue {
            var o: [String: JSONValue] = [
                "alg": "webauthn-tx-v1", "credentialId": .string(Base64URL.encode(credentialId)),
                "publicKey": .string(Base64URL.encode(publicKey)), "rpId": .string(rpId), "nonce": .string(Base64URL.encode(nonce)),
                "approved": .string(Base64URL.encode(approved)), "clientDataJSON": .string(Base64URL.encode(clientDataJSON)),
                "authenticatorData": .string(Base64URL.encode(authenticatorData)), "signature": .string(Base64URL.encode(signature)),
            ]
            if let userHandle { o["userHandle"] = .string(Base64URL.encode(userHandle)) }
            return .object(o)
        }

        public init?(json v: JSONValue) {
            func bytes(_ name: String) -> [UInt8]? { v[name]?.stringValue.flatMap(Base64URL.decode) }
            guard v["alg"]?.stringValue == "webauthn-tx-v1", let id = bytes("credentialId"), let key = bytes("publicKey"),
                  let rpId = v["rpId"]?.stringValue, let nonce = bytes("nonce"), let approved = bytes("approved"),
                  let cd = bytes("clientDataJSON"), let ad = bytes("authenticatorData"), let sig = bytes("signature") else { return nil }
            self.init(credentialId: id, publicKey: key, rpId: rpId, nonce: nonce, approved: approved, clientDataJSON: cd,
                      authenticatorData: ad, signature: sig, userHandle: bytes("userHandle"))
        }
    }
}
