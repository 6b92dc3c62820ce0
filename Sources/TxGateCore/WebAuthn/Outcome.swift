import Foundation
import TxGateCrypto

extension WebAuthn {
    /// What a client wrote into the `webAuthnOutcome` hidden value, as the ForgeRock SDKs write
    /// it (forgerock-javascript-sdk `fr-webauthn/index.ts`, the Android SDK's
    /// `WebAuthnAuthentication.kt`/`WebAuthnRegistration.kt`, the iOS SDK's
    /// `WebAuthnAuthenticationCallback.swift`; docs/WIRE-EXTENSIONS.md §11):
    ///
    /// - `clientDataJSON::authenticatorData::signature::credentialId[::userHandle]` (assertion)
    /// - `clientDataJSON::attestationObject::credentialId[::deviceName]` (registration)
    ///
    /// where clientDataJSON is text, the byte strings are comma-separated signed 8-bit integers
    /// (`new Int8Array(buf).toString()`), and credentialId is base64url; or that string as
    /// `legacyData` of `{"authenticatorAttachment": "...", "legacyData": "..."}`; or `unsupported`;
    /// or `ERROR::name:message`.
    public enum Outcome: Sendable {
        case assertion(AssertionOutcome)
        case registration(RegistrationResponse, deviceName: String?)
        /// The client has no WebAuthn.
        case unsupported
        /// The client's WebAuthn call failed (`NotAllowedError`: the person cancelled or timed out).
        case clientError(name: String, message: String)
    }

    /// An assertion as the outcome carries it. The user handle is the text the SDK wrote: the
    /// JavaScript and iOS SDKs write the handle's bytes as text; the Android SDK base64-decodes
    /// them and writes the result as padded base64url (`userHandleBytes(expecting:)` takes both).
    public struct AssertionOutcome: Sendable {
        public var rawId: [UInt8]
        public var clientDataJSON: [UInt8]
        public var authenticatorData: [UInt8]
        public var signature: [UInt8]
        public var userHandle: String?

        /// The user handle's bytes: the text as written when it is `expected`'s text, or `expected`
        /// when both are base64 of the same bytes (the Android SDK's form of a handle that is
        /// base64 text, as TxGate's and AM's are); else the text's bytes, which the verifier then
        /// refuses as another user's.
        public func userHandleBytes(expecting expected: [UInt8]?) -> [UInt8]? {
            guard let userHandle else { return nil }
            let text = Array(userHandle.utf8)
            if let expected, text != expected, let received = Base64URL.decode(userHandle) ?? Base64.decode(userHandle),
               let decoded = Base64.decode(String(decoding: expected, as: UTF8.self)), received == decoded {
                return expected
            }
            return text
        }

        public func response(expectingUserHandle expected: [UInt8]?) -> AssertionResponse {
            AssertionResponse(rawId: rawId, clientDataJSON: clientDataJSON, authenticatorData: authenticatorData,
                              signature: signature, userHandle: userHandleBytes(expecting: expected))
        }
    }

    /// Why an outcome could not be read.
    public struct OutcomeError: Error, Equatable, Sendable, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// The longest outcome read: an attestation object with a 1023-byte credential ID and an
    /// RSA-4096 key is under 2 KB, five characters a byte.
    public static let maxOutcomeLength = 32_768

    public enum Ceremony: Sendable { case registration, assertion }

    /// Reads an outcome for `ceremony`.
    public static func parseOutcome(_ raw: String, for ceremony: Ceremony) -> Result<Outcome, OutcomeError> {
        guard raw.utf8.count <= maxOutcomeLength else { return .failure(OutcomeError("longer than \(maxOutcomeLength) bytes")) }
        var legacy = raw
        // The JSON form: a whole JSON object with a legacyData string. The legacy form starts
        // with clientDataJSON's `{` too, but is not one JSON document.
        if raw.hasPrefix("{"), case .object(let o)? = JSONValue.parse(Array(raw.utf8)) {
            guard let data = o["legacyData"]?.stringValue else {
                return .failure(OutcomeError("a JSON outcome without a legacyData string"))
            }
            legacy = data
        }
        if legacy == "unsupported" { return .success(.unsupported) }
        if legacy.hasPrefix("ERROR::") {
            let rest = legacy.dropFirst("ERROR::".count)
            let colon = rest.firstIndex(of: ":")
            return .success(.clientError(name: String(rest[..<(colon ?? rest.endIndex)]),
                                         message: colon.map { String(rest[rest.index(after: $0)...]) } ?? ""))
        }
        guard let (clientData, rest) = splitClientData(legacy) else {
            return .failure(OutcomeError("no clientDataJSON object before '::'"))
        }
        let parts = rest.components(separatedBy: "::")
        switch ceremony {
        case .assertion:
            guard parts.count == 3 || parts.count == 4 else {
                return .failure(OutcomeError("an assertion has 4 or 5 parts separated by '::', not \(parts.count + 1)"))
            }
            guard let authData = int8List(parts[0]) else { return .failure(OutcomeError("authenticatorData is not a list of signed bytes")) }
            guard let signature = int8List(parts[1]) else { return .failure(OutcomeError("signature is not a list of signed bytes")) }
            guard let rawId = Base64URL.decode(parts[2]), !rawId.isEmpty else {
                return .failure(OutcomeError("the credential ID is not base64url"))
            }
            return .success(.assertion(AssertionOutcome(rawId: rawId, clientDataJSON: clientData, authenticatorData: authData,
                                                        signature: signature, userHandle: parts.count == 4 ? parts[3] : nil)))
        case .registration:
            guard parts.count >= 2 else {
                return .failure(OutcomeError("a registration has 3 or 4 parts separated by '::', not \(parts.count + 1)"))
            }
            guard let attestation = int8List(parts[0]) else {
                return .failure(OutcomeError("attestationObject is not a list of signed bytes"))
            }
            guard let rawId = Base64URL.decode(parts[1]), !rawId.isEmpty else {
                return .failure(OutcomeError("the credential ID is not base64url"))
            }
            // A device name may itself hold "::".
            let name = parts.count > 2 ? parts[2...].joined(separator: "::") : nil
            return .success(.registration(RegistrationResponse(rawId: rawId, clientDataJSON: clientData, attestationObject: attestation),
                                          deviceName: name))
        }
    }

    /// clientDataJSON and what follows its `::`. clientDataJSON may itself hold "::" (an origin
    /// such as `http://[::1]:8080`), so it ends at the first `}::` before which the text is
    /// one JSON object.
    static func splitClientData(_ s: String) -> ([UInt8], String)? {
        let bytes = Array(s.utf8)
        var i = 0
        while i + 2 < bytes.count {
            if bytes[i] == UInt8(ascii: "}"), bytes[i + 1] == UInt8(ascii: ":"), bytes[i + 2] == UInt8(ascii: ":") {
                let prefix = Array(bytes[...i])
                if case .object? = JSONValue.parse(prefix) {
                    return (prefix, String(decoding: bytes[(i + 3)...], as: UTF8.self))
                }
            }
            i += 1
        }
        return nil
    }

    /// `-128,0,127`: signed bytes (or 0...255, which some clients write), no spaces needed.
    static func int8List(_ s: String) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count / 3)
        for item in s.split(separator: ",", omittingEmptySubsequences: false) {
            let t = item.trimmingCharacters(in: .whitespaces)
            guard let n = Int(t), (-128...255).contains(n) else { return nil }
            out.append(UInt8(truncatingIfNeeded: n))
        }
        return out.isEmpty ? nil : out
    }

    /// Bytes as the SDKs' byte lists: `new Int8Array(bytes).toString()`.
    public static func int8String(_ bytes: [UInt8]) -> String {
        bytes.map { String(Int8(bitPattern: $0)) }.joined(separator: ",")
    }
}
