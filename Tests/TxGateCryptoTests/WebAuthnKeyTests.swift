import Testing
import TxGateCrypto

/// The verification WebAuthn's credential keys need beyond JOSE's: Ed25519 (COSE -8) and ES256
/// signatures in DER (COSE -7; JOSE uses `r || s`).
@Suite struct WebAuthnKeyTests {
    /// RFC 8032 §7.1, TEST 1 (empty message) and TEST 2 (one byte, 0x72).
    static let rfc8032: [(publicKey: String, message: String, signature: String)] = [
        ("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
         "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"),
        ("3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
         "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"),
    ]

    @Test func ed25519VerifiesTheRFC8032ExamplesAndNothingElse() throws {
        for v in Self.rfc8032 {
            let key = try #require(Ed25519PublicKey(raw: Crypto.fromHex(v.publicKey)!))
            let message = Crypto.fromHex(v.message)!, signature = Crypto.fromHex(v.signature)!
            #expect(key.verify(signature: signature, data: message))
            #expect(!key.verify(signature: signature, data: message + [0]))
            var flipped = signature
            flipped[40] ^= 1
            #expect(!key.verify(signature: flipped, data: message))
            #expect(!key.verify(signature: Array(signature.prefix(63)), data: message))
            #expect(!key.verify(signature: signature + [0], data: message))
        }
        #expect(Ed25519PublicKey(raw: [UInt8](repeating: 1, count: 31)) == nil)
        #expect(Ed25519PublicKey(raw: [UInt8](repeating: 1, count: 33)) == nil)
    }

    /// DER `Ecdsa-Sig-Value` of a 64-byte `r || s`, written out here independently of OpenSSL.
    static func der(_ raw: [UInt8]) -> [UInt8] {
        func integer(_ b: ArraySlice<UInt8>) -> [UInt8] {
            var v = Array(b.drop { $0 == 0 })
            if v.isEmpty || v[0] & 0x80 != 0 { v.insert(0, at: 0) }
            return [0x02, UInt8(v.count)] + v
        }
        let body = integer(raw[0..<32]) + integer(raw[32..<64])
        return [0x30, UInt8(body.count)] + body
    }

    @Test func es256VerifiesStrictDEROnly() throws {
        let key = try #require(ECSigningKey.generate())
        let data = Array("authenticatorData || clientDataHash".utf8)
        let raw = key.sign(data)
        let der = Self.der(raw)
        #expect(key.publicKey.verify(derSignature: der, data: data))
        #expect(!key.publicKey.verify(derSignature: der, data: data + [0]))
        // The raw form is not DER; DER with a long-form length (BER) or a trailing byte is refused.
        #expect(!key.publicKey.verify(derSignature: raw, data: data))
        #expect(!key.publicKey.verify(derSignature: [0x30, 0x81] + der.dropFirst(1), data: data))
        #expect(!key.publicKey.verify(derSignature: der + [0], data: data))
        var flipped = der
        flipped[der.count - 3] ^= 1
        #expect(!key.publicKey.verify(derSignature: flipped, data: data))
        #expect(!key.publicKey.verify(derSignature: [], data: data))
    }
}
