// Advice codecs: Advices.parse(xmlOrBase64:) and Advices.xml, Challenge.adviceBase64 and the
// SSOADVICE header, Base64 / Base64URL / Base32. The first byte picks a mode:
//   0: the rest is advice XML or base64url of it, as a client sends it;
//   1: the rest is text for the three decoders;
//   2: the rest builds advices (NUL-separated strings: name, values..., 0x01 between entries).
// Invariants: parsed advices written as XML (plain and base64url) parse back equal; the
// challenge's base64 decodes to JSON that holds the same advices; every string a decoder
// accepts is the canonical encoding of what it decodes to; encode then decode is the identity.
import Foundation
import TxGateCore
import TxGateCrypto
import FuzzSupport

func require(_ ok: Bool, _ what: @autoclosure () -> String) { if !ok { fatalError("invariant: " + what()) } }

func checkAdvices(_ a: Advices) {
    let xml = a.xml
    require(Advices.parse(xmlOrBase64: xml) == a, "XML round trip: \(xml.debugDescription)")
    let b64 = Base64URL.encode(Array(xml.utf8))
    require(Advices.parse(xmlOrBase64: b64) == a, "base64url XML round trip: \(xml.debugDescription)")

    let challenge = Challenge.adviceBase64(a)
    guard let json = Base64.decode(challenge), let value = JSONValue.parse(json), let object = value.objectValue else {
        fatalError("invariant: the challenge's base64 is not a JSON object: \(challenge)")
    }
    require(value == JSONValue.parse(Array(a.json.utf8)), "realigned JSON differs from the advices' JSON")
    // Last entry wins for a repeated name, as a JSON object reader takes it.
    var expected: [String: [String]] = [:]
    for e in a.entries { expected[e.name] = e.values }
    require(object.count == expected.count, "advice count")
    for (name, values) in expected {
        require(object[name]?.arrayValue?.compactMap(\.stringValue) == values, "advice \(name.debugDescription)")
    }
    let header = Challenge.ssoAdviceHeader(realm: "/", advices: a, amURI: "https://am.example/am")
    require(header.contains(#"advices="\#(challenge)","#), "SSOADVICE header")
    require(!challenge.contains(",") && !challenge.contains("\""), "challenge value needs quoting")
}

func checkDecoders(_ s: String) {
    let unpadded = String(s.reversed().drop(while: { $0 == "=" }).reversed())
    if let b = Base64URL.decode(s) {
        require(Base64URL.encode(b) == unpadded, "Base64URL accepted a non-canonical \(s.debugDescription)")
    }
    if let b = Base64.decode(s) {
        let e = Base64.encode(b, padding: s.hasSuffix("="))
        require(e == s || Base64.encode(b, padding: false) == unpadded, "Base64 accepted a non-canonical \(s.debugDescription)")
    }
    // Base32 is lenient on purpose (case, spaces, trailing bits: secrets are typed by hand),
    // so only its own output must be stable.
    if let b = Base32.decode(s) {
        require(Base32.decode(Base32.encode(b)) == b, "Base32 re-encoding of \(s.debugDescription)")
    }
}

func checkEncoders(_ b: [UInt8]) {
    require(Base64URL.decode(Base64URL.encode(b)) == b, "Base64URL round trip")
    require(Base64.decode(Base64.encode(b)) == b, "Base64 round trip")
    require(Base64.decode(Base64.encode(b, padding: false)) == b, "unpadded Base64 round trip")
    require(Base32.decode(Base32.encode(b)) == b, "Base32 round trip")
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAdvice(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let rest = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    switch data[0] % 3 {
    case 0:
        // AM's XML may repeat a name; the challenge JSON then repeats the key (not checked here).
        if let a = Advices.parse(xmlOrBase64: String(decoding: rest, as: UTF8.self)),
           Set(a.entries.map(\.name)).count == a.entries.count { checkAdvices(a) }
    case 1:
        checkDecoders(String(decoding: rest, as: UTF8.self))
        checkEncoders(rest)
    default:
        // Names are unique, as AM sends them: repeated names would give JSON with duplicate keys.
        var entries: [(String, [String])] = []
        for group in rest.split(separator: 0x01, omittingEmptySubsequences: false).prefix(8) {
            let parts = group.split(separator: 0x00, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
            if !entries.contains(where: { $0.0 == parts[0] }) { entries.append((parts[0], Array(parts.dropFirst()))) }
        }
        checkAdvices(Advices(entries))
    }
    return 0
}

@_cdecl("fuzz_advice_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt { runFuzzer(argc, argv, fuzzAdvice) }
