import Foundation
import TxGateCrypto
@testable import TxGateCore

/// Tests/Fixtures/webauthn/vectors.json: registrations and assertions from a software
/// authenticator, each checked by python-fido2 when it was made (make_vectors.py beside it).
/// Byte fields are base64url, as in the WebAuthn JSON forms.
struct WebAuthnVectors: Decodable {
    struct Registration: Decodable {
        let name: String
        let credential: String
        let expect: String
        let fido2: String
        let requireUserVerification: Bool
        let challenge: String
        let rawId: String
        let clientDataJSON: String
        let attestationObject: String
        let credentialPublicKey: String
        let aaguid: String
        let flags: UInt8
        let alg: Int

        var response: WebAuthn.RegistrationResponse {
            WebAuthn.RegistrationResponse(rawId: b64(rawId), clientDataJSON: b64(clientDataJSON),
                                          attestationObject: b64(attestationObject))
        }

        var expectation: WebAuthn.RegistrationExpectation {
            WebAuthn.RegistrationExpectation(challenge: b64(challenge), requireUserVerification: requireUserVerification)
        }
    }

    struct Assertion: Decodable {
        let name: String
        let credential: String
        let expect: String
        let fido2: String
        let requireUserVerification: Bool
        let challenge: String
        let rawId: String
        let clientDataJSON: String
        let authenticatorData: String
        let signature: String
        let userHandle: String
        let storedSignCount: UInt32
        let signCount: UInt32
        let flags: UInt8
        let storedBackupEligible: Bool

        var response: WebAuthn.AssertionResponse {
            WebAuthn.AssertionResponse(rawId: b64(rawId), clientDataJSON: b64(clientDataJSON),
                                       authenticatorData: b64(authenticatorData), signature: b64(signature),
                                       userHandle: b64(userHandle))
        }

        var expectation: WebAuthn.AssertionExpectation {
            WebAuthn.AssertionExpectation(challenge: b64(challenge), requireUserVerification: requireUserVerification)
        }
    }

    let rpId: String
    let origins: [String]
    let userHandle: String
    let registrations: [Registration]
    let assertions: [Assertion]

    static let shared: WebAuthnVectors = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../Fixtures/webauthn/vectors.json").standardized
        do { return try JSONDecoder().decode(WebAuthnVectors.self, from: Data(contentsOf: url)) } catch {
            fatalError("cannot read \(url.path): \(error)")
        }
    }()

    var relyingParty: WebAuthn.RelyingParty { WebAuthn.RelyingParty(id: rpId, origins: origins) }

    func registration(_ name: String) -> Registration { registrations.first { $0.name == name }! }
    func assertion(_ name: String) -> Assertion { assertions.first { $0.name == name }! }

    /// The registration whose verified credential the assertions of `credential` use.
    static let registrationOf = ["es256": "es256-none", "eddsa": "eddsa-packed-self", "rs256": "rs256-packed-self"]

    /// The credential record an assertion is checked against: made by verifying its
    /// credential's registration, with the stored counter and BE the case names.
    func record(for a: Assertion) throws -> WebAuthn.CredentialRecord {
        let r = registration(Self.registrationOf[a.credential]!)
        let credential = try WebAuthn.verifyRegistration(r.response, expecting: r.expectation, relyingParty: relyingParty).get()
        var record = credential.record(userHandle: b64(userHandle))
        record.signCount = a.storedSignCount
        record.backupEligible = a.storedBackupEligible
        return record
    }
}

func b64(_ s: String) -> [UInt8] { Base64URL.decode(s)! }
