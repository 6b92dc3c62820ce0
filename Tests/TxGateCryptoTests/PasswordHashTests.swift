import Foundation
import Testing
import TxGateCore
import TxGateCrypto

private let cheap = ScryptCost(ln: 4, r: 8, p: 1)

@Suite struct PasswordHashTests {
    @Test func roundTripAndWrongPassword() {
        let h = PasswordHash.hash("correct horse battery staple", cost: cheap)
        #expect(PasswordHash.verify("correct horse battery staple", encoded: h))
        #expect(!PasswordHash.verify("correct horse battery stapl", encoded: h))
        #expect(!PasswordHash.verify("Correct horse battery staple", encoded: h))
        #expect(!PasswordHash.verify("", encoded: h))
    }

    @Test func unicodeAndEmptyPasswords() {
        let h = PasswordHash.hash("pässwörd 🔑", cost: cheap)
        #expect(PasswordHash.verify("pässwörd 🔑", encoded: h))
        #expect(!PasswordHash.verify("password", encoded: h))
        let e = PasswordHash.hash("", cost: cheap)
        #expect(PasswordHash.verify("", encoded: e))
        #expect(!PasswordHash.verify(" ", encoded: e))
    }

    @Test func format() throws {
        let h = PasswordHash.hash("pw", cost: cheap)
        let parts = h.split(separator: "$", omittingEmptySubsequences: false)
        #expect(parts.count == 5)
        #expect(parts[0] == "" && parts[1] == "scrypt" && parts[2] == "ln=4,r=8,p=1")
        #expect(!parts[3].contains("=") && !parts[4].contains("="))
        #expect(try #require(Base64.decode(String(parts[3]))).count == 16)
        #expect(try #require(Base64.decode(String(parts[4]))).count == 32)
        #expect(PasswordHash.isValidEncoding(h))
        #expect(PasswordHash.cost(of: h) == cheap)
        #expect(PasswordHash.needsRehash(h))
        #expect(!PasswordHash.needsRehash(h, cost: cheap))
        // Fresh salt every time.
        #expect(PasswordHash.hash("pw", cost: cheap) != h)
    }

    /// Independently computed: scrypt(P="password", S=16 bytes 00..0f, N=16, r=8, p=1, dkLen=32).
    @Test func verifiesAKnownEncoding() {
        let salt = Array(UInt8(0)..<16)
        let key = Crypto.scrypt(password: Array("password".utf8), salt: salt, n: 16, r: 8, p: 1, length: 32)!
        let encoded = "$scrypt$ln=4,r=8,p=1$\(Base64.encode(salt, padding: false))$\(Base64.encode(key, padding: false))"
        #expect(encoded.hasPrefix("$scrypt$ln=4,r=8,p=1$AAECAwQFBgcICQoLDA0ODw$"))
        #expect(PasswordHash.verify("password", encoded: encoded))
        #expect(!PasswordHash.verify("passwore", encoded: encoded))
        // Same salt and key but a different recorded cost no longer verifies.
        #expect(!PasswordHash.verify("password", encoded: encoded.replacingOccurrences(of: "ln=4", with: "ln=5")))
        #expect(!PasswordHash.verify("password", encoded: encoded.replacingOccurrences(of: "r=8", with: "r=7")))
    }

    @Test func malformedEncodingsAreRejectedWithoutCrashing() {
        let h = PasswordHash.hash("pw", cost: cheap)
        let parts = h.split(separator: "$", omittingEmptySubsequences: false).map(String.init)
        let salt = parts[3], key = parts[4]
        let bad = [
            "", "$", "$$$$", "scrypt", "pw", h + "$", "$" + h, h + "!", h + " ", " " + h,
            "$scrypt$ln=4,r=8,p=1$\(salt)",                 // no hash
            "$scrypt$ln=4,r=8,p=1$\(salt)$\(key)$extra",
            "$argon2id$ln=4,r=8,p=1$\(salt)$\(key)",        // other algorithm
            "$SCRYPT$ln=4,r=8,p=1$\(salt)$\(key)",
            "$scrypt$ln=4,r=8$\(salt)$\(key)",              // missing p
            "$scrypt$r=8,ln=4,p=1$\(salt)$\(key)",          // wrong order
            "$scrypt$ln=04,r=8,p=1$\(salt)$\(key)",         // leading zero
            "$scrypt$ln=+4,r=8,p=1$\(salt)$\(key)",
            "$scrypt$ln=-4,r=8,p=1$\(salt)$\(key)",
            "$scrypt$ln=0,r=8,p=1$\(salt)$\(key)",          // N = 1
            "$scrypt$ln=4,r=0,p=1$\(salt)$\(key)",
            "$scrypt$ln=4,r=8,p=0$\(salt)$\(key)",
            "$scrypt$ln=99,r=8,p=1$\(salt)$\(key)",         // absurd cost: refused, not attempted
            "$scrypt$ln=20,r=32,p=16$\(salt)$\(key)",
            "$scrypt$ln=9999999999999999999999,r=8,p=1$\(salt)$\(key)",
            "$scrypt$ln=x,r=8,p=1$\(salt)$\(key)",
            "$scrypt$ln=4,r=8,p=1$\(salt)==$\(key)",        // padding
            "$scrypt$ln=4,r=8,p=1$\(salt)$\(key)=",
            "$scrypt$ln=4,r=8,p=1$!!!!$\(key)",             // bad base64
            "$scrypt$ln=4,r=8,p=1$\(salt)$\(key.dropLast())B", // non-zero trailing bits
            "$scrypt$ln=4,r=8,p=1$$\(key)",                 // empty salt
            "$scrypt$ln=4,r=8,p=1$AAAA$\(key)",             // 3-byte salt
            "$scrypt$ln=4,r=8,p=1$\(salt)$AAAA",            // 3-byte key
        ]
        for e in bad {
            #expect(!PasswordHash.isValidEncoding(e), "\(e)")
            #expect(!PasswordHash.verify("pw", encoded: e), "\(e)")
        }
        #expect(PasswordHash.verify("pw", encoded: h))
    }

    @Test func dummyIsAValidDefaultCostHashOfAnUnknownPassword() {
        #expect(PasswordHash.isValidEncoding(PasswordHash.dummy))
        #expect(PasswordHash.cost(of: PasswordHash.dummy) == .default)
        #expect(PasswordHash.dummy.hasPrefix("$scrypt$ln=15,r=8,p=1$"))
        #expect(!PasswordHash.verify("", encoded: PasswordHash.dummy))
        #expect(!PasswordHash.verify("password", encoded: PasswordHash.dummy))
        #expect(PasswordHash.dummy == PasswordHash.dummy)
    }

    @Test func costBounds() {
        #expect(ScryptCost.default.isAcceptable)
        #expect(cheap.isAcceptable)
        #expect(ScryptCost(ln: 18, r: 8, p: 1).isAcceptable)   // 256 MiB
        #expect(!ScryptCost(ln: 19, r: 8, p: 1).isAcceptable)
        #expect(ScryptCost(ln: 15, r: 8, p: 16).isAcceptable)  // 16× default work
        #expect(!ScryptCost(ln: 16, r: 8, p: 16).isAcceptable) // 32× default work
        #expect(!ScryptCost(ln: 0, r: 8, p: 1).isAcceptable)
    }
}
