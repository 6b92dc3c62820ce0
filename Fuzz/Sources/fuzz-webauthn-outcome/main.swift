// The webAuthnOutcome strings the ForgeRock SDKs write (WebAuthn.parseOutcome, WIRE-EXTENSIONS
// §11), read as an assertion and as a registration. Invariants: an accepted outcome, written
// back out in the JavaScript SDK's form (signed byte lists, base64url ID), reads back to the
// same parts; the JSON form around it reads the same; clientDataJSON is one JSON object.
import TxGateCore
import TxGateCrypto
import FuzzSupport

func require(_ ok: Bool, _ what: @autoclosure () -> String) { if !ok { fatalError("invariant: " + what()) } }

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOutcome(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    if case .success(.assertion(let a)) = WebAuthn.parseOutcome(text, for: .assertion) {
        require(JSONValue.parse(a.clientDataJSON)?.objectValue != nil, "clientDataJSON is not one JSON object")
        var again = String(decoding: a.clientDataJSON, as: UTF8.self) + "::" + WebAuthn.int8String(a.authenticatorData) + "::"
            + WebAuthn.int8String(a.signature) + "::" + Base64URL.encode(a.rawId)
        if let handle = a.userHandle { again += "::" + handle }
        guard case .success(.assertion(let b)) = WebAuthn.parseOutcome(again, for: .assertion) else {
            fatalError("invariant: an accepted assertion written back out is refused: \(again.prefix(200))")
        }
        require(a.clientDataJSON == b.clientDataJSON && a.authenticatorData == b.authenticatorData && a.signature == b.signature
                && a.rawId == b.rawId && a.userHandle == b.userHandle, "an assertion written back out reads differently")
        let json = JSONValue.object(["authenticatorAttachment": "platform", "legacyData": .string(again)]).canonical
        guard case .success(.assertion(let c)) = WebAuthn.parseOutcome(json, for: .assertion) else {
            fatalError("invariant: the JSON form of an accepted assertion is refused")
        }
        require(c.signature == a.signature && c.rawId == a.rawId, "the JSON form reads differently")
    }
    if case .success(.registration(let r, let name)) = WebAuthn.parseOutcome(text, for: .registration) {
        var again = String(decoding: r.clientDataJSON, as: UTF8.self) + "::" + WebAuthn.int8String(r.attestationObject) + "::"
            + Base64URL.encode(r.rawId)
        if let name { again += "::" + name }
        guard case .success(.registration(let s, let name2)) = WebAuthn.parseOutcome(again, for: .registration) else {
            fatalError("invariant: an accepted registration written back out is refused")
        }
        require(s.attestationObject == r.attestationObject && s.rawId == r.rawId && name2 == name, "a registration reads differently")
    }
    return 0
}

@_cdecl("fuzz_webauthn_outcome_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt { runFuzzer(argc, argv, fuzzOutcome) }
