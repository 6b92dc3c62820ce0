// CBOR decoder (CBORDecoder, WebAuthn's attestation objects, COSE keys and extensions), and on
// the same bytes authenticator data (WebAuthn.AuthenticatorData) and COSE keys. Invariants: an
// accepted item encodes back to exactly the input (shortest form and definite lengths make the
// encoding unique); decode and decodePrefix agree (an item followed by bytes is refused as
// trailing bytes at the offset where decodePrefix says it ended); error offsets lie inside the
// input; a tighter depth limit accepts nothing the default refuses; parsed authenticator data
// holds its parts where the input has them.
import TxGateCore
import FuzzSupport

func require(_ ok: Bool, _ what: @autoclosure () -> String) { if !ok { fatalError("invariant: " + what()) } }

func depth(_ item: CBOR) -> Int {
    switch item {
    case .array(let a): return 1 + (a.map(depth).max() ?? 0)
    case .map(let m): return 1 + (m.entries.map { max(depth($0.key), depth($0.value)) }.max() ?? 0)
    default: return 1
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCBOR(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))

    let whole: Result<CBOR, CBORError> = Result { () throws(CBORError) in try CBORDecoder.decode(bytes) }
    let prefix: Result<(item: CBOR, end: Int), CBORError> = Result { () throws(CBORError) in try CBORDecoder.decodePrefix(bytes) }
    switch (whole, prefix) {
    case (.success(let item), .success(let p)):
        require(p.end == bytes.count && p.item == item, "decodePrefix disagrees with decode on an accepted input")
        require(item.encoded == bytes, "an accepted item does not encode back to its input")
        require(depth(item) <= 16, "an accepted item is nested deeper than 16")
        _ = try? COSEKey(item, encoded: bytes)
        if let tight = try? CBORDecoder.decode(bytes, limits: .init(maxDepth: 4)) {
            require(tight == item && depth(item) <= 4, "the depth-4 decoder accepted more or read otherwise")
        } else {
            require(depth(item) > 4, "the depth-4 decoder refused an item of depth \(depth(item))")
        }
    case (.failure(let e), .success(let p)):
        require(e == CBORError(.trailingBytes(count: bytes.count - p.end), at: p.end),
                "decode refused \(e), decodePrefix ended at \(p.end) of \(bytes.count)")
        require(p.item.encoded == Array(bytes[..<p.end]), "a decoded prefix does not encode back to its bytes")
    case (.failure(let e), .failure(let f)):
        require(e == f, "decode and decodePrefix refused differently: \(e) / \(f)")
        require(e.offset >= 0 && e.offset <= bytes.count, "error offset \(e.offset) outside \(bytes.count) bytes")
    case (.success, .failure(let f)):
        require(false, "decode accepted what decodePrefix refused (\(f))")
    }

    // The same bytes as authenticator data: its CBOR parts are where the input has them.
    if let authData = try? WebAuthn.AuthenticatorData(bytes) {
        require(authData.rpIdHash == Array(bytes[0..<32]) && authData.flags.rawValue == bytes[32], "rpIdHash or flags misread")
        require(authData.flags.contains(.attestedCredentialData) == (authData.attestedCredential != nil), "AT and the credential disagree")
        require(authData.flags.contains(.extensionData) == (authData.extensions != nil), "ED and the extensions disagree")
        if let c = authData.attestedCredential {
            let keyAt = 55 + c.credentialId.count
            require(Array(bytes[37..<53]) == c.aaguid, "AAGUID misread")
            require(Array(bytes[keyAt..<keyAt + c.publicKey.encoded.count]) == c.publicKey.encoded, "key bytes are not the input's")
            require(c.credentialId.count <= 1023, "credential ID over 1023 bytes")
        }
    }
    return 0
}

@_cdecl("fuzz_cbor_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt { runFuzzer(argc, argv, fuzzCBOR) }
