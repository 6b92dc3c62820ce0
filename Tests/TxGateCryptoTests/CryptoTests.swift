import Foundation
import Dispatch
import Synchronization
import Testing
import TxGateCrypto

private func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

@Suite struct CryptoTests {
    @Test func hexWritesEveryByteAsTwoLowercaseDigits() {
        let all = (0...255).map { UInt8($0) }
        #expect(Crypto.hex(all) == all.map { String(format: "%02x", $0) }.joined())
        #expect(Crypto.hex([]) == "")
        #expect(Crypto.fromHex(Crypto.hex(all)) == all)
    }

    @Test func sha256KnownAnswers() {
        #expect(Crypto.hex(Crypto.sha256([])) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(Crypto.hex(Crypto.sha256(bytes("abc")))
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    /// The digest as text with a prefix, in one string: the same digest as `sha256`, across
    /// block boundaries (55, 56, 64 bytes and more).
    @Test func sha256HexIsThePrefixAndTheDigestInHex() {
        for n in [0, 1, 55, 56, 63, 64, 65, 1_000] {
            let data = (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            let hex = Crypto.hex(Crypto.sha256(data))
            #expect(data.withUnsafeBytes { Crypto.sha256Hex($0) } == hex, "\(n)")
            #expect(data.withUnsafeBytes { Crypto.sha256Hex($0, prefix: "session:") } == "session:" + hex, "\(n)")
        }
        #expect(bytes("abc").withUnsafeBytes { Crypto.sha256Hex($0) }
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    /// RFC 4231 test case 2 (and RFC 2202 test case 2 for SHA-1).
    @Test func hmacRFC4231TestCase2() {
        let key = bytes("Jefe"), data = bytes("what do ya want for nothing?")
        #expect(Crypto.hex(Crypto.hmacSHA256(key: key, data: data))
                == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        #expect(Crypto.hex(Crypto.hmacSHA512(key: key, data: data))
                == "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea250554"
                + "9758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737")
        #expect(Crypto.hex(Crypto.hmacSHA1(key: key, data: data)) == "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79")
    }

    /// Keys longer than a block are hashed first (RFC 4231 test case 6, RFC 2202 test case 6),
    /// and keys at and around each block size (64 bytes; 128 for SHA-512) give what Python's
    /// `hmac` gives: the precomputed ipad/opad states are the same HMAC.
    @Test func hmacKeysAtAndAroundTheBlockSize() {
        let text = bytes("Test Using Larger Than Block-Size Key - Hash Key First")
        #expect(Crypto.hex(Crypto.hmacSHA256(key: [UInt8](repeating: 0xaa, count: 131), data: text))
                == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
        #expect(Crypto.hex(Crypto.hmacSHA512(key: [UInt8](repeating: 0xaa, count: 131), data: text))
                == "80b24263c7c1a3ebb71493c1dd7be8b49b46d1f41b4aeec1121b013783f8f352"
                + "6b56d037e05f2598bd0fd2215d6a1e5295e64f73f63f0aec8b915a985d786598")
        #expect(Crypto.hex(Crypto.hmacSHA1(key: [UInt8](repeating: 0xaa, count: 80), data: text)) == "aa4ae5e15272d00e95705637ce8a3b55ed402112")
        let message = (0..<400).map { UInt8($0 % 251) }
        let expected: [Int: (String, String, String)] = [
            64: ("ee51cc61a27ca1a41deeaedf3f50ae96959be190", "b6dd5210c142589afc70733bec6f14a7a73baea3477296c67e397ddc52ad5c75",
                 "480ac118c9d470c5d96b7f87c7e2b18fe51eaad867edc68942420e16d7d298fc42c35aab05b6fd831a169df1b72772a00cd23c7d5ed4dcb56adc046ab19b8c74"),
            65: ("38f0e0d61063f73f6600b79ece7668535298ef31", "5688c35fd674f0485d9446c15bf384617af96f316f59a0a05dd49cacfa1327b6",
                 "5eb33025b065e57eb3980c8441dc228c448d7afe9f44089272b816972bc09ee39d38d7b587aeaaa6fc04e4b4718548c30f31237f7a47672de698f59e1b4d0d5b"),
            128: ("51a1375867d3c128b34db9c3ff9841cd04999221", "347c35f64d9599a0ee38bd17ed5d0262cb004a2ec1224ee800e0884d347dd454",
                  "5d24e1913243b4e2d9abcf9ed2c3ad08e96a2f934c881f73c447c7e6b536bee774970c79a567befef4291cd613f335140bdc4cb0abeab0e9173dae7a9011599e"),
            129: ("9a4a05b8a9483439f3f8ce70d6023cc3956adc05", "1384a8268381050be49604cd733eda0334ce7407b5575e4d80adde2e0c950db9",
                  "71e7ba829a04f049daebd3bda052281f2a11c97c8d3e5eb5ca08995653719a5e07ca48acee7f760e30547cf7b391cce24f63630ba187a129bacc85e6b9726924"),
        ]
        for (length, (sha1, sha256, sha512)) in expected {
            let key = (0..<length).map { UInt8(($0 * 7 + 3) % 256) }
            #expect(Crypto.hex(Crypto.hmacSHA1(key: key, data: message)) == sha1, "\(length)")
            #expect(Crypto.hex(Crypto.hmacSHA256(key: key, data: message)) == sha256, "\(length)")
            #expect(Crypto.hex(Crypto.hmacSHA512(key: key, data: message)) == sha512, "\(length)")
        }
    }

    /// RFC 4231 test case 1 (binary key) and an empty key / empty message (known answers from OpenSSL's CLI).
    @Test func hmacEdgeCases() {
        let key = [UInt8](repeating: 0x0b, count: 20)
        #expect(Crypto.hex(Crypto.hmacSHA256(key: key, data: bytes("Hi There")))
                == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
        #expect(Crypto.hex(Crypto.hmacSHA256(key: [], data: []))
                == "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad")
    }

    /// A key used again is answered from a context keyed once (`HMACKeys`, a table per thread):
    /// the same MAC, from several threads at once, and again after more keys than the table
    /// holds have passed.
    @Test func hmacKeyedOnceGivesTheSameAnswers() {
        let key = bytes("Jefe"), data = bytes("what do ya want for nothing?")
        let expected = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        let wrong = Mutex(0)
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<200 where Crypto.hex(Crypto.hmacSHA256(key: key, data: data)) != expected {
                wrong.withLock { $0 += 1 }
            }
        }
        #expect(wrong.withLock { $0 } == 0)
        let others = (0..<40).map { i in (key: [UInt8](repeating: UInt8(i), count: 32), mac: Crypto.hmacSHA256(key: [UInt8](repeating: UInt8(i), count: 32), data: data)) }
        #expect(others.allSatisfy { Crypto.hmacSHA256(key: $0.key, data: data) == $0.mac })
        #expect(Set(others.map(\.mac)).count == 40)
        #expect(Crypto.hex(Crypto.hmacSHA256(key: key, data: data)) == expected)
        #expect(Crypto.hex(Crypto.hmacSHA1(key: key, data: data)) == "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79")
    }

    /// RFC 7914 §12, third vector.
    @Test func scryptRFC7914Vector() throws {
        let dk = try #require(Crypto.scrypt(password: bytes("password"), salt: bytes("NaCl"),
                                            n: 1024, r: 8, p: 16, length: 64))
        #expect(Crypto.hex(dk) == "fdbabe1c9d3472007856e7190d01e9fe7c6ad7cbc8237830e77376634b373162"
                + "2eaf30d92e22a3886ff109279d9830dac727afb94a83ee6d8360cbdfa2cc0640")
    }

    /// RFC 7914 §12, first vector: empty password and salt.
    @Test func scryptEmptyInputs() throws {
        let dk = try #require(Crypto.scrypt(password: [], salt: [], n: 16, r: 1, p: 1, length: 64))
        #expect(Crypto.hex(dk) == "77d6576238657b203b19ca42c18a0497f16b4844e3074ae8dfdffa3fede21442"
                + "fcd0069ded0948f8326a753a0fc81f17e8d3e0fb2e0d3628cf35e20c38d18906")
    }

    @Test func scryptRejectsInvalidParameters() {
        #expect(Crypto.scrypt(password: [1], salt: [2], n: 1000, r: 8, p: 1, length: 32) == nil) // not 2^k
        #expect(Crypto.scrypt(password: [1], salt: [2], n: 1, r: 8, p: 1, length: 32) == nil)
        #expect(Crypto.scrypt(password: [1], salt: [2], n: 16, r: 0, p: 1, length: 32) == nil)
        #expect(Crypto.scrypt(password: [1], salt: [2], n: 16, r: 1, p: 0, length: 32) == nil)
        #expect(Crypto.scrypt(password: [1], salt: [2], n: 16, r: 1, p: 1, length: 0) == nil)
        #expect(Crypto.scrypt(password: [1], salt: [2], n: 1 << 62, r: 1 << 40, p: 1, length: 32) == nil)
    }

    @Test func constantTimeEquals() {
        #expect(Crypto.constantTimeEquals([], []))
        #expect(Crypto.constantTimeEquals([1, 2, 3], [1, 2, 3]))
        #expect(!Crypto.constantTimeEquals([1, 2, 3], [1, 2, 4]))
        #expect(!Crypto.constantTimeEquals([1, 2, 3], [1, 2]))
        #expect(!Crypto.constantTimeEquals([], [0]))
    }

    @Test func randomBytes() {
        #expect(Crypto.randomBytes(0).isEmpty)
        let a = Crypto.randomBytes(32), b = Crypto.randomBytes(32)
        #expect(a.count == 32 && b.count == 32)
        #expect(a != b)
        #expect(a != [UInt8](repeating: 0, count: 32))
    }

    @Test func hex() {
        #expect(Crypto.hex([0x00, 0x0f, 0xa5, 0xff]) == "000fa5ff")
        #expect(Crypto.fromHex("000FA5ff") == [0x00, 0x0f, 0xa5, 0xff])
        #expect(Crypto.fromHex("abc") == nil)
        #expect(Crypto.fromHex("zz") == nil)
    }
}

@Suite struct UUIDTests {
    @Test func version4UUIDsAreWellFormedAndDistinct() {
        var seen = Set<String>()
        for _ in 0..<2000 {
            let u = Crypto.uuidV4()
            #expect(u.utf8.count == 36)
            let parsed = UUID(uuidString: u)
            #expect(parsed != nil, "\(u)")
            #expect(parsed?.uuidString.lowercased() == u, "lower case, canonical")
            let b = Array(u.utf8)
            #expect(b[14] == UInt8(ascii: "4"), "version 4: \(u)")
            #expect([UInt8(ascii: "8"), UInt8(ascii: "9"), UInt8(ascii: "a"), UInt8(ascii: "b")].contains(b[19]), "RFC 4122 variant: \(u)")
            seen.insert(u)
        }
        #expect(seen.count == 2000)
    }
}
