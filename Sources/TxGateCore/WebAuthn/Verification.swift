import TxGateCrypto

extension WebAuthn {
    // MARK: Registration (§7.1)

    /// What `navigator.credentials.create()` returned, as bytes (the JSON form's base64url decoded).
    public struct RegistrationResponse: Sendable {
        public var rawId: [UInt8]
        public var clientDataJSON: [UInt8]
        public var attestationObject: [UInt8]

        public init(rawId: [UInt8], clientDataJSON: [UInt8], attestationObject: [UInt8]) {
            self.rawId = rawId
            self.clientDataJSON = clientDataJSON
            self.attestationObject = attestationObject
        }
    }

    /// What the server asked for when it started the registration.
    public struct RegistrationExpectation: Sendable {
        /// The challenge it issued (bound to the transaction, later).
        public var challenge: [UInt8]
        /// `userVerification: "required"`: UV must be set.
        public var requireUserVerification: Bool
        /// The algorithms of `pubKeyCredParams`.
        public var algorithms: Set<COSEAlgorithm>
        /// A format not verified here (any but `none` and packed self attestation) is accepted
        /// as `none` (true: nothing is claimed about the authenticator) or refused (false).
        public var acceptUnverifiedAsNone: Bool
        /// Only an attestation verified here is accepted: `none` is refused, and so is every
        /// format not verified here.
        public var requireAttestation: Bool

        public init(challenge: [UInt8], requireUserVerification: Bool, algorithms: Set<COSEAlgorithm> = Set(COSEAlgorithm.allCases),
                    acceptUnverifiedAsNone: Bool = false, requireAttestation: Bool = false) {
            self.challenge = challenge
            self.requireUserVerification = requireUserVerification
            self.algorithms = algorithms
            self.acceptUnverifiedAsNone = acceptUnverifiedAsNone && !requireAttestation
            self.requireAttestation = requireAttestation
        }
    }

    /// The attestation types verified here.
    public enum AttestationType: String, Sendable {
        /// fmt `none`: nothing is claimed about the authenticator.
        case none
        /// fmt `packed` without x5c: the credential key signed its own creation.
        case selfAttestation = "self"
    }

    /// A registration that verified: what a credential record keeps.
    public struct VerifiedCredential: Sendable {
        public let id: [UInt8]
        /// The COSE_Key as the authenticator encoded it.
        public let publicKey: [UInt8]
        public let algorithm: COSEAlgorithm
        public let signCount: UInt32
        public let flags: Flags
        public let aaguid: [UInt8]
        public let attestation: AttestationType

        /// The record to store for `userHandle` (the user entity's id).
        public func record(userHandle: [UInt8]?) -> CredentialRecord {
            CredentialRecord(id: id, publicKey: publicKey, signCount: signCount,
                             backupEligible: flags.contains(.backupEligible), userHandle: userHandle)
        }
    }

    /// Verifies a registration (§7.1, steps 5-24; step 25, "not registered yet", and storing the
    /// record are the caller's): client data (type `webauthn.create`, challenge, origin, not
    /// cross-origin), the attestation object (strict CBOR: fmt, authData, attStmt), rpIdHash, UP,
    /// UV when required, BS only with BE, attested credential data present and its key supported,
    /// its algorithm allowed, rawId equal to its credential ID, and the attestation statement
    /// (`none`, or `packed` self attestation). Attestation trust (step 23) is not judged: no
    /// format with a certificate chain is accepted.
    public static func verifyRegistration(_ response: RegistrationResponse, expecting: RegistrationExpectation,
                                          relyingParty: RelyingParty) -> Result<VerifiedCredential, Refusal> {
        Result { () throws(Refusal) in try registration(response, expecting, relyingParty) }
    }

    private static func registration(_ response: RegistrationResponse, _ expecting: RegistrationExpectation,
                                     _ rp: RelyingParty) throws(Refusal) -> VerifiedCredential {
        let clientData = try ClientData(response.clientDataJSON)
        try clientData.check(type: "webauthn.create", challenge: expecting.challenge, relyingParty: rp)
        let clientDataHash = Crypto.sha256(response.clientDataJSON)

        let object: CBOR
        do { object = try CBORDecoder.decode(response.attestationObject) } catch { throw .malformedCBOR("attestationObject", error) }
        guard let map = object.mapValue else { throw .malformedAttestationObject("\(object.kindName), not a map") }
        guard let fmt = map[text: "fmt"]?.textValue else { throw .malformedAttestationObject("no fmt text string") }
        guard let authDataBytes = map[text: "authData"]?.bytesValue else {
            throw .malformedAttestationObject("no authData byte string")
        }
        guard let statement = map[text: "attStmt"]?.mapValue else { throw .malformedAttestationObject("no attStmt map") }

        let authData = try AuthenticatorData(authDataBytes)
        try checkCommon(authData, rp, requireUserVerification: expecting.requireUserVerification)
        guard let credential = authData.attestedCredential else { throw .noAttestedCredentialData }
        guard expecting.algorithms.contains(credential.publicKey.algorithm) else {
            throw .algorithmNotAllowed(credential.publicKey.algorithm)
        }
        guard Crypto.constantTimeEquals(response.rawId, credential.credentialId) else { throw .credentialIdMismatch }

        let attestation: AttestationType
        do {
            attestation = try verifyStatement(fmt: fmt, statement, key: credential.publicKey, signed: authDataBytes + clientDataHash)
        } catch .unsupportedAttestation where expecting.acceptUnverifiedAsNone {
            attestation = .none
        }
        if expecting.requireAttestation, attestation == .none {
            throw .unsupportedAttestation("fmt \(fmt.debugDescription) proves nothing, and this relying party requires attestation")
        }
        return VerifiedCredential(id: credential.credentialId, publicKey: credential.publicKey.encoded,
                                  algorithm: credential.publicKey.algorithm, signCount: authData.signCount,
                                  flags: authData.flags, aaguid: credential.aaguid, attestation: attestation)
    }

    /// §8.7 (`none`) and §8.2 (`packed`, self attestation only).
    private static func verifyStatement(fmt: String, _ statement: CBORMap, key: COSEKey,
                                        signed: [UInt8]) throws(Refusal) -> AttestationType {
        switch fmt {
        case "none":
            guard statement.count == 0 else {
                throw .malformedAttestationStatement("fmt none with \(statement.count) statement entr\(statement.count == 1 ? "y" : "ies")")
            }
            return .none
        case "packed":
            for entry in statement.entries {
                guard let name = entry.key.textValue, ["alg", "sig", "x5c"].contains(name) else {
                    throw .malformedAttestationStatement("packed: unknown member \(entry.key.textValue ?? entry.key.kindName)")
                }
            }
            if statement[text: "x5c"] != nil { throw .unsupportedAttestation("packed with x5c (basic or AttCA attestation)") }
            guard let alg = statement[text: "alg"]?.intValue else { throw .malformedAttestationStatement("packed: no integer alg") }
            guard let sig = statement[text: "sig"]?.bytesValue else { throw .malformedAttestationStatement("packed: no sig byte string") }
            guard alg == key.algorithm.rawValue else { throw .attestationAlgorithmMismatch(statement: alg, key: key.algorithm) }
            guard key.verify(signature: sig, data: signed) else { throw .badAttestationSignature }
            return .selfAttestation
        default:
            throw .unsupportedAttestation("fmt \(fmt.debugDescription)")
        }
    }

    // MARK: Authentication (§7.2)

    /// What the server keeps of a registered credential (§4 "credential record"), as far as
    /// verification needs it.
    public struct CredentialRecord: Sendable, Equatable {
        public var id: [UInt8]
        /// COSE_Key bytes.
        public var publicKey: [UInt8]
        public var signCount: UInt32
        public var backupEligible: Bool
        /// The user entity's id the credential was created for, if known.
        public var userHandle: [UInt8]?

        public init(id: [UInt8], publicKey: [UInt8], signCount: UInt32, backupEligible: Bool, userHandle: [UInt8]?) {
            self.id = id
            self.publicKey = publicKey
            self.signCount = signCount
            self.backupEligible = backupEligible
            self.userHandle = userHandle
        }
    }

    /// What `navigator.credentials.get()` returned, as bytes.
    public struct AssertionResponse: Sendable {
        public var rawId: [UInt8]
        public var clientDataJSON: [UInt8]
        public var authenticatorData: [UInt8]
        public var signature: [UInt8]
        public var userHandle: [UInt8]?

        public init(rawId: [UInt8], clientDataJSON: [UInt8], authenticatorData: [UInt8], signature: [UInt8],
                    userHandle: [UInt8]?) {
            self.rawId = rawId
            self.clientDataJSON = clientDataJSON
            self.authenticatorData = authenticatorData
            self.signature = signature
            self.userHandle = userHandle
        }
    }

    public struct AssertionExpectation: Sendable {
        public var challenge: [UInt8]
        public var requireUserVerification: Bool
        /// A Secure Payment Confirmation assertion (type `payment.get`) is accepted too, when its
        /// payment data is this.
        public var payment: PaymentExpectation?

        public init(challenge: [UInt8], requireUserVerification: Bool, payment: PaymentExpectation? = nil) {
            self.challenge = challenge
            self.requireUserVerification = requireUserVerification
            self.payment = payment
        }
    }

    /// An assertion that verified.
    public struct VerifiedAssertion: Sendable {
        public let credentialId: [UInt8]
        public let signCount: UInt32
        public let flags: Flags

        /// The record with this assertion's counter, to store back (§7.2 step 24).
        public func updating(_ record: CredentialRecord) -> CredentialRecord {
            var r = record
            r.signCount = signCount
            return r
        }
    }

    /// Verifies an assertion for the credential record `rawId` named (§7.2 steps 5-22; finding
    /// the record and storing the new counter are the caller's): rawId and userHandle match the
    /// record, client data (type `webauthn.get`, challenge, origin, not cross-origin), rpIdHash,
    /// UP, UV when required, BS only with BE and BE as registered, the signature over
    /// authenticatorData || SHA-256(clientDataJSON), and then the counter: a new counter not above
    /// the stored one is refused unless both are zero (authenticators without a counter).
    public static func verifyAssertion(_ response: AssertionResponse, credential: CredentialRecord,
                                       expecting: AssertionExpectation,
                                       relyingParty: RelyingParty) -> Result<VerifiedAssertion, Refusal> {
        Result { () throws(Refusal) in try assertion(response, credential, expecting, relyingParty) }
    }

    private static func assertion(_ response: AssertionResponse, _ credential: CredentialRecord,
                                  _ expecting: AssertionExpectation, _ rp: RelyingParty) throws(Refusal) -> VerifiedAssertion {
        guard Crypto.constantTimeEquals(response.rawId, credential.id) else { throw .credentialIdMismatch }
        if let handle = response.userHandle, let owner = credential.userHandle, !Crypto.constantTimeEquals(handle, owner) {
            throw .userHandleMismatch
        }
        let key = try COSEKey(encoded: credential.publicKey)

        let clientData = try ClientData(response.clientDataJSON)
        try clientData.check(type: "webauthn.get", challenge: expecting.challenge, relyingParty: rp, payment: expecting.payment)

        let authData = try AuthenticatorData(response.authenticatorData)
        try checkCommon(authData, rp, requireUserVerification: expecting.requireUserVerification)
        let eligible = authData.flags.contains(.backupEligible)
        guard eligible == credential.backupEligible else {
            throw .backupEligibilityChanged(stored: credential.backupEligible, received: eligible)
        }

        let signed = response.authenticatorData + Crypto.sha256(response.clientDataJSON)
        guard key.verify(signature: response.signature, data: signed) else { throw .badSignature }

        let (stored, received) = (credential.signCount, authData.signCount)
        if stored != 0 || received != 0, received <= stored {
            throw .counterRegression(stored: stored, received: received)
        }
        return VerifiedAssertion(credentialId: credential.id, signCount: received, flags: authData.flags)
    }

    /// rpIdHash, UP, UV when required, BS only with BE: the same in both ceremonies.
    private static func checkCommon(_ authData: AuthenticatorData, _ rp: RelyingParty,
                                    requireUserVerification: Bool) throws(Refusal) {
        guard Crypto.constantTimeEquals(authData.rpIdHash, rp.idHash) else { throw .wrongRPIDHash }
        guard authData.flags.contains(.userPresent) else { throw .userNotPresent }
        if requireUserVerification, !authData.flags.contains(.userVerified) { throw .userNotVerified }
        if authData.flags.contains(.backupState), !authData.flags.contains(.backupEligible) {
            throw .backupStateWithoutEligibility
        }
    }
}
