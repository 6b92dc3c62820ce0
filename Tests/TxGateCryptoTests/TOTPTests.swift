import Testing
import TxGateCore
import TxGateCrypto

private let seed20 = Array("12345678901234567890".utf8)
private let seed32 = Array("12345678901234567890123456789012".utf8)
private let seed64 = Array("1234567890123456789012345678901234567890123456789012345678901234".utf8)

/// RFC 6238 Appendix B: (time, SHA1, SHA256, SHA512), 8 digits.
private let rfc6238: [(time: Int, sha1: String, sha256: String, sha512: String)] = [
    (59, "94287082", "46119246", "90693936"),
    (1111111109, "07081804", "68084774", "25091201"),
    (1111111111, "14050471", "67062674", "99943326"),
    (1234567890, "89005924", "91819424", "93441116"),
    (2000000000, "69279037", "90698825", "38618901"),
    (20000000000, "65353130", "77737706", "47863826"),
]

@Suite struct TOTPTests {
    @Test(arguments: rfc6238.indices)
    func rfc6238AppendixB(_ i: Int) {
        let v = rfc6238[i]
        #expect(TOTP(secret: seed20, digits: 8).code(at: v.time) == v.sha1)
        #expect(TOTP(secret: seed32, digits: 8, algorithm: .sha256).code(at: v.time) == v.sha256)
        #expect(TOTP(secret: seed64, digits: 8, algorithm: .sha512).code(at: v.time) == v.sha512)
        // And each code is accepted at that time, matching that time's step.
        #expect(TOTP(secret: seed20, digits: 8).matchingCounter(v.sha1, at: v.time) == UInt64(v.time / 30))
    }

    /// RFC 4226 Appendix D: HOTP values for counters 0...9.
    @Test func rfc4226AppendixD() {
        let expected = ["755224", "287082", "359152", "969429", "338314",
                        "254676", "287922", "162583", "399871", "520489"]
        let totp = TOTP(secret: seed20)
        #expect((0..<10).map { totp.code(counter: UInt64($0)) } == expected)
    }

    @Test func defaultsAreSixDigitsThirtySecondsSHA1() {
        let totp = TOTP(secret: seed20)
        #expect(totp.code(at: 59) == "287082") // counter 1, RFC 4226
        #expect(totp.code(at: 60) == "359152") // counter 2
        #expect(totp.counter(at: 89) == 2)
    }

    @Test func windowAcceptsOneStepEitherSideOnly() {
        let totp = TOTP(secret: seed20)
        let t = 1_700_000_000
        let c = UInt64(t / 30)
        #expect(totp.matchingCounter(totp.code(counter: c), at: t) == c)
        #expect(totp.matchingCounter(totp.code(counter: c - 1), at: t) == c - 1)
        #expect(totp.matchingCounter(totp.code(counter: c + 1), at: t) == c + 1)
        #expect(totp.matchingCounter(totp.code(counter: c - 2), at: t) == nil)
        #expect(totp.matchingCounter(totp.code(counter: c + 2), at: t) == nil)
        #expect(totp.matchingCounter(totp.code(counter: c - 1), at: t, window: 0) == nil)
        #expect(totp.matchingCounter(totp.code(counter: c - 2), at: t, window: 2) == c - 2)
    }

    @Test func rejectsMalformedCodes() {
        let totp = TOTP(secret: seed20)
        let code = totp.code(at: 1_700_000_000)
        #expect(totp.matchingCounter(code, at: 1_700_000_000) != nil)
        for bad in ["", String(code.dropLast()), code + "0", " " + code.dropFirst(), "12345a",
                    "１２３４５６", "+12345", "-12345", "12 456"] {
            #expect(totp.matchingCounter(bad, at: 1_700_000_000) == nil, "\(bad)")
        }
    }

    /// A code is compared as the number it spells, at exactly `digits` digits: one with
    /// leading zeros matches only with them, for every algorithm.
    @Test func codesWithLeadingZerosMatchOnlyWhole() throws {
        for algorithm in [TOTP.Algorithm.sha1, .sha256, .sha512] {
            let totp = TOTP(secret: seed20, algorithm: algorithm)
            let c = try #require((UInt64(0)..<2_000).first { totp.code(counter: $0).hasPrefix("0") })
            let code = totp.code(counter: c)
            let t = Int(c) * 30
            #expect(totp.matchingCounter(code, at: t, window: 0) == c, "\(algorithm)")
            #expect(totp.matchingCounter(String(code.drop { $0 == "0" }), at: t, window: 0) == nil, "\(algorithm)")
            #expect(totp.matchingCounter("0" + code, at: t, window: 0) == nil, "\(algorithm)")
        }
    }

    @Test func wrongSecretDoesNotMatch() {
        let code = TOTP(secret: seed20).code(at: 1_700_000_000)
        let other = TOTP(secret: Array("12345678901234567891".utf8))
        #expect(other.matchingCounter(code, at: 1_700_000_000, window: 0) == nil)
    }

    @Test func nearEpoch() {
        let totp = TOTP(secret: seed20)
        #expect(totp.matchingCounter("755224", at: 0) == 0)
        #expect(totp.matchingCounter("287082", at: 0) == 1)
        #expect(totp.code(at: -5) == "755224")
    }

    @Test func descriptionHidesSecret() {
        let totp = TOTP(secret: seed20)
        #expect(!"\(totp)".contains("49"))
        #expect("\(totp)" == "TOTP(digits: 6, period: 30, algorithm: SHA1)")
    }
}
