import Testing
import TxGateCrypto
@testable import TxGateCore

/// COSE keys (RFC 9052 §7, RFC 9053): the three WebAuthn algorithms are read, everything else
/// is refused with the parameter at fault.
@Suite struct COSEKeyTests {
    /// RFC 7515 Appendix A.3's P-256 key, and RFC 8032 §7.1 TEST 1's Ed25519 key.
    static let p256x = Base64URL.decode("f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU")!
    static let p256y = Base64URL.decode("x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0")!
    static let ed25519 = Crypto.fromHex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")!

    static func key(_ entries: [(Int, CBOR)]) throws(COSEKeyError) -> COSEKey {
        let item = CBOR.map(CBORMap(entries.map { (CBOR.int($0.0), $0.1) }))
        return try COSEKey(item, encoded: item.encoded)
    }

    static let ec2: [(Int, CBOR)] = [(1, .int(2)), (3, .int(-7)), (-1, .int(1)), (-2, .bytes(p256x)), (-3, .bytes(p256y))]
    static let okp: [(Int, CBOR)] = [(1, .int(1)), (3, .int(-8)), (-1, .int(6)), (-2, .bytes(ed25519))]

    static func replacing(_ entries: [(Int, CBOR)], _ label: Int, _ value: CBOR?) -> [(Int, CBOR)] {
        var e = entries.filter { $0.0 != label }
        if let value { e.append((label, value)) }
        return e
    }

    @Test func theThreeAlgorithmsAreRead() throws {
        #expect(try Self.key(Self.ec2).algorithm == .es256)
        #expect(try Self.key(Self.okp).algorithm == .eddsa)
        let rsa = try Self.key(Self.rsa)
        #expect(rsa.algorithm == .rs256)
        // Parameters it does not use (kid, key_ops) are ignored; the bytes are kept as given.
        let withKid = Self.ec2 + [(2, .bytes([1, 2])), (4, .array([.int(2)]))]
        let item = CBOR.map(CBORMap(withKid.map { (CBOR.int($0.0), $0.1) }))
        #expect(try COSEKey(item, encoded: item.encoded).encoded == item.encoded)
    }

    /// A 2048-bit modulus (RFC 7517 Appendix A.1's RSA key, `n`), e = 65537.
    static let rsa: [(Int, CBOR)] = [(1, .int(3)), (3, .int(-257)), (-1, .bytes(Base64URL.decode(
        "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMs"
        + "tn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n9"
        + "1CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw")!)),
        (-2, .bytes([1, 0, 1]))]

    @Test(arguments: [
        (replacing(ec2, 3, nil), COSEKeyError.missing(label: 3, name: "alg")),
        (replacing(ec2, 1, nil), .missing(label: 1, name: "kty")),
        (replacing(ec2, -3, nil), .missing(label: -3, name: "y")),
        (replacing(ec2, 1, .text("EC2")), .invalidParameter(label: 1, name: "kty", reason: "is a text string, not a small integer")),
        (replacing(ec2, 3, .int(-35)), .unsupportedAlgorithm(-35)),
        (replacing(ec2, 3, .int(-8)), .algorithmDoesNotMatchKey(algorithm: .eddsa, keyType: 2)),
        (replacing(ec2, -1, .int(2)), .unsupportedCurve(2)),
        (replacing(ec2, -3, .bool(false)), .invalidParameter(label: -3, name: "y", reason: "is a boolean, not a byte string")),
        (replacing(ec2, -2, .bytes(Array(p256x.dropFirst()))), .invalidParameter(label: -2, name: "x", reason: "has 31 bytes, not 32")),
        (replacing(ec2, -4, .bytes(Array(repeating: 1, count: 32))), .privateKeyIncluded(label: -4)),
        (replacing(ec2, -2, .bytes(Array(repeating: 0, count: 32))), .rejectedByOpenSSL("not a point on P-256")),
        (replacing(okp, 3, .int(-7)), .algorithmDoesNotMatchKey(algorithm: .es256, keyType: 1)),
        (replacing(okp, -1, .int(7)), .unsupportedCurve(7)),                      // Ed448
        (replacing(okp, -4, .bytes(Array(repeating: 1, count: 32))), .privateKeyIncluded(label: -4)),
        (replacing(rsa, 3, .int(-37)), .unsupportedAlgorithm(-37)),               // PS256
        (replacing(rsa, -3, .bytes([1])), .privateKeyIncluded(label: -3)),
        (replacing(rsa, -1, .bytes(Array(repeating: 0xff, count: 128))),
         .rejectedByOpenSSL("not an RSA public key of 2048 to 8192 bits with an exponent of at most 8 bytes")),
        (replacing(rsa, -2, .bytes([])), .invalidParameter(label: -2, name: "e", reason: "is empty")),
        (replacing(ec2, 1, .int(4)), .unsupportedKeyType(4)),                     // Symmetric
    ] as [([(Int, CBOR)], COSEKeyError)])
    func refusesWithTheParameterAtFault(_ entries: [(Int, CBOR)], _ expected: COSEKeyError) {
        #expect(throws: expected) { try Self.key(entries) }
    }

    @Test func notAMapAndUndecodableBytes() {
        #expect(throws: COSEKeyError.notAMap(found: "an array")) { try COSEKey(.array([]), encoded: [0x80]) }
        #expect(throws: WebAuthn.Refusal.malformedCBOR("credential public key", CBORError(.trailingBytes(count: 1), at: 1))) {
            try COSEKey(encoded: [0xa0, 0x00])
        }
        #expect(throws: WebAuthn.Refusal.unsupportedCredentialKey(.missing(label: 1, name: "kty"))) { try COSEKey(encoded: [0xa0]) }
    }
}
