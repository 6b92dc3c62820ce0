import Testing
import TxGateCrypto

private func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

/// RFC 4648 §10 test vectors.
private let rfc4648: [(String, base64: String, base32: String)] = [
    ("", "", ""),
    ("f", "Zg==", "MY======"),
    ("fo", "Zm8=", "MZXQ===="),
    ("foo", "Zm9v", "MZXW6==="),
    ("foob", "Zm9vYg==", "MZXW6YQ="),
    ("fooba", "Zm9vYmE=", "MZXW6YTB"),
    ("foobar", "Zm9vYmFy", "MZXW6YTBOI======"),
]

@Suite struct Base64Tests {
    @Test func rfc4648Vectors() {
        for v in rfc4648 {
            let unpadded = String(v.base64.prefix { $0 != "=" })
            #expect(Base64.encode(bytes(v.0)) == v.base64)
            #expect(Base64.encode(bytes(v.0), padding: false) == unpadded)
            #expect(Base64URL.encode(bytes(v.0)) == unpadded)
            #expect(Base64.decode(v.base64) == bytes(v.0))
            #expect(Base64.decode(unpadded) == bytes(v.0))
            #expect(Base64URL.decode(v.base64) == bytes(v.0))
            #expect(Base64URL.decode(unpadded) == bytes(v.0))
        }
    }

    @Test func urlAlphabet() {
        let b: [UInt8] = [0xfb, 0xff, 0xbf]
        #expect(Base64URL.encode(b) == "-_-_")
        #expect(Base64.encode(b) == "+/+/")
        #expect(Base64URL.decode("-_-_") == b)
        #expect(Base64URL.decode("+/+/") == nil)
        #expect(Base64.decode("-_-_") == nil)
    }

    @Test func roundTripAllLengths() {
        for n in 0..<70 {
            let b = Crypto.randomBytes(n)
            #expect(Base64URL.decode(Base64URL.encode(b)) == b)
            #expect(Base64.decode(Base64.encode(b)) == b)
        }
    }

    @Test func rejectsInvalidInput() {
        for bad in ["Z", "Zg=", "Zg===", "Z===", "=", "Zm9v=", "Zg==Zg==", "Zm 9v", "Zm9v\n", "Zé==", "Zh", "Zm9"] {
            #expect(Base64URL.decode(bad) == nil, "\(bad)")
            #expect(Base64.decode(bad) == nil, "\(bad)")
        }
    }
}

/// The decoder reads four symbols at a time; this one reads a symbol at a time, as RFC 4648 says.
private func referenceDecode(_ s: String, url: Bool) -> [UInt8]? {
    let alphabet = Array((url ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
                              : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/").utf8)
    var chars = Array(s.utf8)
    var pad = 0
    while chars.last == UInt8(ascii: "=") { chars.removeLast(); pad += 1 }
    if pad > 0, pad > 2 || (chars.count + pad) % 4 != 0 || chars.count % 4 == 0 { return nil }
    if chars.count % 4 == 1 { return nil }
    var acc: UInt32 = 0, bits = 0, out: [UInt8] = []
    for c in chars {
        guard let v = alphabet.firstIndex(of: c) else { return nil }
        acc = acc << 6 | UInt32(v)
        bits += 6
        if bits >= 8 {
            bits -= 8
            out.append(UInt8(truncatingIfNeeded: acc >> UInt32(bits)))
            acc &= (1 << UInt32(bits)) - 1
        }
    }
    return acc == 0 ? out : nil
}

@Suite struct Base64DecoderAgreementTests {
    @Test func agreesWithASymbolAtATimeDecoderOnRandomStrings() {
        var rng = SystemRandomNumberGenerator()
        let symbols = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_=.é".utf8)
        for _ in 0..<20_000 {
            let n = Int.random(in: 0...13, using: &rng)
            let s = String(decoding: (0..<n).map { _ in symbols.randomElement(using: &rng)! }, as: UTF8.self)
            #expect(Base64URL.decode(s) == referenceDecode(s, url: true), "\(s)")
            #expect(Base64.decode(s) == referenceDecode(s, url: false), "\(s)")
        }
    }
}

@Suite struct Base32Tests {
    @Test func decodesTheUsualTOTPExample() {
        #expect(Base32.decode("JBSWY3DPEHPK3PXP") == bytes("Hello!") + [0xDE, 0xAD, 0xBE, 0xEF])
        #expect(Base32.decode("jbsw y3dp ehpk 3pxp") == bytes("Hello!") + [0xDE, 0xAD, 0xBE, 0xEF])
    }

    @Test func rfc4648Vectors() {
        for v in rfc4648 {
            let unpadded = String(v.base32.prefix { $0 != "=" })
            #expect(Base32.encode(bytes(v.0), padding: true) == v.base32)
            #expect(Base32.encode(bytes(v.0)) == unpadded)
            #expect(Base32.decode(v.base32) == bytes(v.0))
            #expect(Base32.decode(unpadded.lowercased()) == bytes(v.0))
        }
    }

    @Test func roundTrip() {
        for n in 0..<40 {
            let b = Crypto.randomBytes(n)
            #expect(Base32.decode(Base32.encode(b)) == b)
        }
    }

    @Test func rejectsInvalidInput() {
        for bad in ["JBSWY3DP1", "JBSWY3DP8", "JBSWY3DP!", "JBSW-Y3DP", "M", "MZX", "MZXW6Y"] {
            #expect(Base32.decode(bad) == nil, "\(bad)")
        }
    }
}
