import Foundation
import Testing
import TxGateCore
import TxGateCrypto

private let key = Array("secret-key-0123456789abcdefghijk".utf8)
private let now = 1_700_000_000

private func b64(_ s: String) -> String { Base64URL.encode(Array(s.utf8)) }

/// A token with arbitrary header and claims JSON, correctly HMAC-SHA256-signed with `key`.
private func forge(header: String, claims: String, key: [UInt8] = key) -> String {
    let input = b64(header) + "." + b64(claims)
    return input + "." + Base64URL.encode(Crypto.hmacSHA256(key: key, data: Array(input.utf8)))
}

private func error(_ body: () throws(JWTError) -> [UInt8]) -> JWTError? {
    do {
        _ = try body()
        return nil
    } catch {
        return error
    }
}

private struct Claims: Codable, Equatable {
    var sub: String
    var exp: Int
    var scope: [String]
}

@Suite struct JWTTests {
    /// Computed independently with Python's hmac/base64 modules.
    @Test func knownAnswer() throws {
        let expected = "eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSIsImV4cCI6MjAwMDAwMDAwMH0"
            + ".9x4N-Utcn5JlK-vHP6_49uIgSG_mUCu_3uQ8OoMYzCc"
        let claims = Array(#"{"sub":"alice","exp":2000000000}"#.utf8)
        #expect(JWT.sign(claimsJSON: claims, key: key) == expected)
        #expect(try JWT.verify(expected, key: key, now: now) == claims)
    }

    @Test func roundTrip() throws {
        let claims = Array(#"{"sub":"bob","exp":1700000060,"n":[1,2]}"#.utf8)
        let token = JWT.sign(claimsJSON: claims, key: key)
        #expect(token.hasPrefix("eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9."))
        #expect(token.split(separator: ".").count == 3)
        #expect(!token.contains("="))
        #expect(try JWT.verify(token, key: key, now: now) == claims)
        #expect(try JWT.verify(token, key: key, now: now + 59) == claims)
    }

    @Test func codableConveniences() throws {
        let claims = Claims(sub: "carol", exp: now + 300, scope: ["transfer", "read"])
        let token = try JWT.sign(claims, key: key)
        #expect(try JWT.verify(token, key: key, now: now, as: Claims.self) == claims)
        struct Other: Decodable { var missing: String }
        #expect(throws: JWTError.malformed) { try JWT.verify(token, key: key, now: now, as: Other.self) }
        #expect(throws: JWTError.expired) { try JWT.verify(token, key: key, now: now + 300, as: Claims.self) }
    }

    @Test func wrongKeyIsBadSignature() {
        let token = JWT.sign(claimsJSON: Array(#"{"exp":2000000000}"#.utf8), key: key)
        #expect(error { () throws(JWTError) in try JWT.verify(token, key: Array("other".utf8), now: now) }
                == .badSignature)
        #expect(error { () throws(JWTError) in try JWT.verify(token, key: [], now: now) } == .badSignature)
    }

    @Test func tamperedPayloadOrSignatureIsBadSignature() {
        let token = JWT.sign(claimsJSON: Array(#"{"sub":"alice","exp":2000000000}"#.utf8), key: key)
        let parts = token.split(separator: ".").map(String.init)
        // Another user, same signature.
        let payload = b64(#"{"sub":"admin","exp":2000000000}"#)
        #expect(error { () throws(JWTError) in try JWT.verify("\(parts[0]).\(payload).\(parts[2])", key: key, now: now) }
                == .badSignature)
        // Payload that is not even valid base64url/JSON, same signature: still the signature that fails first.
        #expect(error { () throws(JWTError) in try JWT.verify("\(parts[0]).e30.\(parts[2])", key: key, now: now) }
                == .badSignature)
        // One signature character changed (the first, so the encoding stays canonical).
        let first = parts[2].first!
        let sig = String(first == "A" ? "B" : "A") + parts[2].dropFirst()
        #expect(error { () throws(JWTError) in try JWT.verify("\(parts[0]).\(parts[1]).\(sig)", key: key, now: now) }
                == .badSignature)
        // Truncated signature (40 characters = 30 bytes, valid base64url).
        let short = String(parts[2].prefix(40))
        #expect(error { () throws(JWTError) in try JWT.verify("\(parts[0]).\(parts[1]).\(short)", key: key, now: now) }
                == .badSignature)
        // An expired token with a bad signature reports the signature.
        let old = JWT.sign(claimsJSON: Array(#"{"exp":1}"#.utf8), key: Array("other".utf8))
        #expect(error { () throws(JWTError) in try JWT.verify(old, key: key, now: now) } == .badSignature)
    }

    @Test func algorithmOtherThanHS256IsRejected() throws {
        let claims = #"{"sub":"alice","exp":2000000000}"#
        // Positive control: another well-formed HS256 header is accepted, so the rejections below are
        // due to the header alone.
        #expect(try JWT.verify(forge(header: #"{ "alg" : "HS256" }"#, claims: claims), key: key, now: now)
                == Array(claims.utf8))
        let none = b64(#"{"alg":"none","typ":"JWT"}"#) + "." + b64(claims)
        for token in [
            none + ".",                                                            // classic unsecured JWT
            none,                                                                  // two parts
            forge(header: #"{"alg":"none","typ":"JWT"}"#, claims: claims),         // "none", even when signed
            forge(header: #"{"alg":"None"}"#, claims: claims),
            forge(header: #"{"alg":"HS512","typ":"JWT"}"#, claims: claims),
            forge(header: #"{"alg":"RS256","typ":"JWT"}"#, claims: claims),
            forge(header: #"{"alg":"hs256","typ":"JWT"}"#, claims: claims),
            forge(header: #"{"alg":"HS256 ","typ":"JWT"}"#, claims: claims),
            forge(header: #"{"typ":"JWT"}"#, claims: claims),                      // no alg
            forge(header: #"{"alg":256}"#, claims: claims),
            forge(header: #"{"alg":"HS256","crit":["exp"]}"#, claims: claims),     // unknown critical extension
            forge(header: #"["HS256"]"#, claims: claims),
            forge(header: "", claims: claims),
        ] {
            #expect(error { () throws(JWTError) in try JWT.verify(token, key: key, now: now) } == .malformed,
                    "\(token)")
        }
    }

    @Test func expiry() throws {
        let token = JWT.sign(claimsJSON: Array(#"{"exp":1700000000}"#.utf8), key: key)
        #expect(error { () throws(JWTError) in try JWT.verify(token, key: key, now: now) } == .expired)
        #expect(error { () throws(JWTError) in try JWT.verify(token, key: key, now: now + 1000) } == .expired)
        #expect(try JWT.verify(token, key: key, now: now - 1) == Array(#"{"exp":1700000000}"#.utf8))
        let fractional = JWT.sign(claimsJSON: Array(#"{"exp":1700000000.5}"#.utf8), key: key)
        #expect(try JWT.verify(fractional, key: key, now: now) == Array(#"{"exp":1700000000.5}"#.utf8))
        #expect(error { () throws(JWTError) in try JWT.verify(fractional, key: key, now: now + 1) } == .expired)
    }

    @Test func garbageIsMalformed() {
        let good = JWT.sign(claimsJSON: Array(#"{"exp":2000000000}"#.utf8), key: key)
        let parts = good.split(separator: ".").map(String.init)
        let header = #"{"typ":"JWT","alg":"HS256"}"#
        var tokens = ["", ".", "..", "...", "abc", "a.b", "a.b.c", "a.b.c.d", good + ".", "." + good,
                      good + "=", "\(parts[0])..\(parts[2])", "\(parts[0]).\(parts[1]).",
                      "\(parts[0]).\(parts[1]).\(parts[2])!", "\(parts[0])=.\(parts[1]).\(parts[2])",
                      "e30.e30.e30", "not base64!.\(parts[1]).\(parts[2])", "bm90IGpzb24.\(parts[1]).\(parts[2])",
                      "\(parts[0]) .\(parts[1]).\(parts[2])"]
        // Correctly signed, but the claims are not an object with a numeric exp.
        for claims in ["not json", "[]", "2000000000", "{}", #"{"exp":"2000000000"}"#, #"{"exp":true}"#,
                       #"{"exp":null}"#, #"{"sub":"x"}"#, #"{"exp":2000000000"#, #"{"exp":1e999}"#] {
            tokens.append(forge(header: header, claims: claims))
        }
        for token in tokens {
            #expect(error { () throws(JWTError) in try JWT.verify(token, key: key, now: now) } == .malformed,
                    "\(token)")
        }
        #expect(error { () throws(JWTError) in try JWT.verify(good, key: key, now: now) } == nil)
    }

    /// The security review's claim (issue 11 item 13): a signature in the standard base64
    /// alphabet (`+`, `/`) must not verify; only base64url without padding does.
    @Test func standardAlphabetSignatureIsMalformed() throws {
        var checked = 0
        for exp in 2_000_000_000..<2_000_000_200 {
            let good = JWT.sign(claimsJSON: Array("{\"exp\":\(exp)}".utf8), key: key)
            guard good.contains("-") || good.contains("_") else { continue }
            let standard = String(good.map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 })
            #expect(error { () throws(JWTError) in try JWT.verify(standard, key: key, now: now) } == .malformed, "\(standard)")
            checked += 1
        }
        #expect(checked > 50)
    }
}
