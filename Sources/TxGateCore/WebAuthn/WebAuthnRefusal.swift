/// WebAuthn (Level 3) relying-party verification, pure: registration (§7.1) and authentication
/// (§7.2) ceremonies checked from the bytes a browser returns and what the server expected.
/// Nothing here stores, sends or reads anything; docs/WEBAUTHN.md lists the steps.
public enum WebAuthn {}

extension WebAuthn {
    /// Why a registration or an assertion is refused: one precise reason each.
    public enum Refusal: Error, Equatable, Sendable, CustomStringConvertible {
        // clientDataJSON
        /// Not UTF-8 JSON, not an object, or a member of the wrong type.
        case malformedClientData(String)
        /// `type` is not `webauthn.create` (registration) or `webauthn.get` (assertion).
        case wrongType(expected: String, found: String)
        /// `challenge` is not the base64url of the challenge this ceremony issued.
        case challengeMismatch
        /// `origin` is not one of the relying party's origins.
        case wrongOrigin(String)
        /// `crossOrigin` is true: the ceremony ran in a cross-origin iframe, which is not allowed.
        case crossOrigin

        // authenticatorData and the attestation object
        /// Too short, a credential ID over 1023 bytes, bytes after the last part, ...; the offset
        /// counts from the start of authenticatorData.
        case malformedAuthenticatorData(String, offset: Int)
        /// A CBOR item (which one: "attestationObject", "credential public key", "authenticator
        /// extensions") is not CBOR this decoder accepts; the error holds the byte offset.
        case malformedCBOR(String, CBORError)
        case unsupportedCredentialKey(COSEKeyError)
        /// rpIdHash is not SHA-256 of the relying party's ID.
        case wrongRPIDHash
        /// The UP flag is not set.
        case userNotPresent
        /// The UV flag is not set where user verification is required.
        case userNotVerified
        /// BS (backup state) set without BE (backup eligible).
        case backupStateWithoutEligibility
        /// BE differs from the credential record's: a credential's eligibility never changes.
        case backupEligibilityChanged(stored: Bool, received: Bool)
        /// A registration without attested credential data (the AT flag).
        case noAttestedCredentialData
        /// The response's rawId is not the credential ID (of the authenticator data, or of the
        /// credential record).
        case credentialIdMismatch
        /// The credential's algorithm is not among those the relying party asked for.
        case algorithmNotAllowed(COSEAlgorithm)

        // attestation (registration)
        case malformedAttestationObject(String)
        /// An attestation format, or a variant of one, that is not verified here (fmt, what).
        case unsupportedAttestation(String)
        case malformedAttestationStatement(String)
        /// packed self attestation whose `alg` is not the credential key's.
        case attestationAlgorithmMismatch(statement: Int, key: COSEAlgorithm)
        case badAttestationSignature

        // assertion
        case badSignature
        /// The signature counter did not increase (and is not zero on both sides): a cloned
        /// authenticator, or a replay of an older assertion.
        case counterRegression(stored: UInt32, received: UInt32)
        /// userHandle is present and names another user than the credential record's.
        case userHandleMismatch
        /// A Secure Payment Confirmation assertion whose `payment` (which member) is not what
        /// the transaction binds.
        case paymentMismatch(String)

        /// A stable name for logs, audit events and tests ("wrongOrigin").
        public var code: String {
            switch self {
            case .malformedClientData: return "malformedClientData"
            case .wrongType: return "wrongType"
            case .challengeMismatch: return "challengeMismatch"
            case .wrongOrigin: return "wrongOrigin"
            case .crossOrigin: return "crossOrigin"
            case .malformedAuthenticatorData: return "malformedAuthenticatorData"
            case .malformedCBOR: return "malformedCBOR"
            case .unsupportedCredentialKey: return "unsupportedCredentialKey"
            case .wrongRPIDHash: return "wrongRPIDHash"
            case .userNotPresent: return "userNotPresent"
            case .userNotVerified: return "userNotVerified"
            case .backupStateWithoutEligibility: return "backupStateWithoutEligibility"
            case .backupEligibilityChanged: return "backupEligibilityChanged"
            case .noAttestedCredentialData: return "noAttestedCredentialData"
            case .credentialIdMismatch: return "credentialIdMismatch"
            case .algorithmNotAllowed: return "algorithmNotAllowed"
            case .malformedAttestationObject: return "malformedAttestationObject"
            case .unsupportedAttestation: return "unsupportedAttestation"
            case .malformedAttestationStatement: return "malformedAttestationStatement"
            case .attestationAlgorithmMismatch: return "attestationAlgorithmMismatch"
            case .badAttestationSignature: return "badAttestationSignature"
            case .badSignature: return "badSignature"
            case .counterRegression: return "counterRegression"
            case .userHandleMismatch: return "userHandleMismatch"
            case .paymentMismatch: return "paymentMismatch"
            }
        }

        public var description: String {
            switch self {
            case .malformedClientData(let why): return "clientDataJSON: \(why)"
            case .wrongType(let expected, let found): return "clientDataJSON: type \(found.debugDescription), expected \(expected.debugDescription)"
            case .challengeMismatch: return "clientDataJSON: challenge is not the one issued"
            case .wrongOrigin(let origin): return "clientDataJSON: origin \(origin.debugDescription) is not one of the relying party's"
            case .crossOrigin: return "clientDataJSON: crossOrigin is true (cross-origin iframes are not allowed)"
            case .malformedAuthenticatorData(let why, let offset): return "authenticatorData: \(why) at byte \(offset)"
            case .malformedCBOR(let what, let error): return "\(what): \(error)"
            case .unsupportedCredentialKey(let error): return "credential public key: \(error)"
            case .wrongRPIDHash: return "authenticatorData: rpIdHash is not SHA-256 of the relying party ID"
            case .userNotPresent: return "authenticatorData: user present (UP) flag not set"
            case .userNotVerified: return "authenticatorData: user verified (UV) flag not set, and user verification is required"
            case .backupStateWithoutEligibility: return "authenticatorData: backup state (BS) set without backup eligibility (BE)"
            case .backupEligibilityChanged(let stored, let received):
                return "authenticatorData: backup eligibility (BE) is \(received), the credential was registered with \(stored)"
            case .noAttestedCredentialData: return "authenticatorData: no attested credential data (AT flag not set)"
            case .credentialIdMismatch: return "rawId is not the credential's ID"
            case .algorithmNotAllowed(let alg): return "credential algorithm \(alg) not among those allowed"
            case .malformedAttestationObject(let why): return "attestationObject: \(why)"
            case .unsupportedAttestation(let what): return "attestation: \(what) not supported"
            case .malformedAttestationStatement(let why): return "attStmt: \(why)"
            case .attestationAlgorithmMismatch(let statement, let key):
                return "attStmt: alg \(statement) is not the credential key's algorithm \(key)"
            case .badAttestationSignature: return "attStmt: signature does not verify with the credential key"
            case .badSignature: return "signature does not verify with the credential's public key"
            case .counterRegression(let stored, let received):
                return "signature counter \(received) is not above the stored \(stored) (cloned authenticator or replay)"
            case .userHandleMismatch: return "userHandle is not the credential's user"
            case .paymentMismatch(let member): return "clientDataJSON: payment.\(member) is not what the transaction binds"
            }
        }
    }
}
