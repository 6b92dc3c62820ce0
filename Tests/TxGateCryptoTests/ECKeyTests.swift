import Testing
import TxGateCrypto

/// ES256 through OpenSSL's EVP: the RFC 7515 example verifies, our signatures verify (and
/// nothing else does), and keys survive PEM.
@Suite struct ECKeyTests {
    /// RFC 7515 Appendix A.3: the ES256 example JWS and its public key.
    static let x = "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU"
    static let y = "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"
    static let jws = "eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
        + ".DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q"

    @Test func theRFC7515ExampleVerifiesAndATamperedOneDoesNot() throws {
        let key = try #require(ECPublicKey(x: Base64URL.decode(Self.x)!, y: Base64URL.decode(Self.y)!))
        let parts = Self.jws.split(separator: ".")
        let input = Array((parts[0] + "." + parts[1]).utf8)
        let signature = try #require(Base64URL.decode(String(parts[2])))
        #expect(key.verify(signature: signature, data: input))
        var flipped = signature
        flipped[10] ^= 1
        #expect(!key.verify(signature: flipped, data: input))
        #expect(!key.verify(signature: signature, data: input + [0x20]))
        #expect(!key.verify(signature: Array(signature.prefix(63)), data: input))
    }

    @Test func aPointOffTheCurveIsRefused() {
        var y = Base64URL.decode(Self.y)!
        y[31] ^= 1
        #expect(ECPublicKey(x: Base64URL.decode(Self.x)!, y: y) == nil)
        #expect(ECPublicKey(x: [1, 2, 3], y: y) == nil)
    }

    @Test func generatedKeysSignVerifyAndSurvivePEM() throws {
        let key = try #require(ECSigningKey.generate())
        let data = Array("payload".utf8)
        let sig = key.sign(data)
        #expect(sig.count == 64)
        #expect(key.publicKey.verify(signature: sig, data: data))
        let other = try #require(ECSigningKey.generate())
        #expect(!other.publicKey.verify(signature: sig, data: data))
        let pem = String(decoding: key.pem, as: UTF8.self)
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let back = try #require(ECSigningKey(pem: key.pem))
        #expect(back.publicKey.x == key.publicKey.x && back.publicKey.y == key.publicKey.y)
        #expect(key.publicKey.verify(signature: back.sign(data), data: data))
        #expect(ECSigningKey(pem: Array("not a key".utf8)) == nil)
    }
}
