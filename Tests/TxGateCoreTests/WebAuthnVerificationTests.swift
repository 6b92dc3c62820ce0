import Testing
import TxGateCrypto
@testable import TxGateCore

/// Registration (WebAuthn §7.1) and assertion (§7.2) verification on real authenticator output
/// (Tests/Fixtures/webauthn/vectors.json, checked by python-fido2 when made): each good vector
/// verifies to the credential or counter it carries; each refused vector, correctly signed but
/// wrong in one respect, is refused for exactly that; and bytes mutated here (signature, signed
/// data, CBOR, lengths) are refused with the precise reason and offset.
@Suite struct WebAuthnVerificationTests {
    static let v = WebAuthnVectors.shared
    static let rp = v.relyingParty

    // MARK: The vectors as made

    @Test func theFixtureCoversEveryAlgorithmFormatAndRefusal() {
        let regs = Self.v.registrations, gets = Self.v.assertions
        #expect(Set(regs.filter { $0.expect == "ok" }.map(\.alg)) == [-7, -8, -257])
        #expect(regs.contains { $0.expect == "ok" && $0.name.contains("packed") })
        #expect(regs.contains { $0.expect == "ok" && $0.name.contains("none") })
        #expect(Set(gets.filter { $0.expect == "ok" }.map(\.credential)) == ["es256", "eddsa", "rs256"])
        let refusals = Set((regs.map(\.expect) + gets.map(\.expect)).filter { $0 != "ok" })
        #expect(refusals.isSuperset(of: ["wrongOrigin", "wrongType", "challengeMismatch", "wrongRPIDHash", "userNotPresent",
                                         "userNotVerified", "counterRegression", "badSignature", "badAttestationSignature",
                                         "attestationAlgorithmMismatch", "crossOrigin", "backupStateWithoutEligibility"]))
        // Every vector fido2 refused is one TxGate refuses too.
        for r in regs where r.fido2 != "ok" { #expect(r.expect != "ok", "\(r.name)") }
        for a in gets where a.fido2 != "ok" { #expect(a.expect != "ok", "\(a.name)") }
    }

    @Test(arguments: v.registrations.map(\.name))
    func registration(_ name: String) throws {
        let r = Self.v.registration(name)
        let result = WebAuthn.verifyRegistration(r.response, expecting: r.expectation, relyingParty: Self.rp)
        if let c = Self.verdict(name, expected: r.expect, result) {
            #expect(c.id == b64(r.rawId))
            #expect(c.publicKey == b64(r.credentialPublicKey))
            #expect(c.algorithm.rawValue == r.alg)
            #expect(c.signCount == 0)
            #expect(c.flags == WebAuthn.Flags(rawValue: r.flags))
            #expect(Crypto.hex(c.aaguid) == r.aaguid)
            #expect(c.attestation == (name.contains("packed") ? .selfAttestation : WebAuthn.AttestationType.none))
            // The stored key parses back to the same algorithm.
            #expect(try COSEKey(encoded: c.publicKey).algorithm == c.algorithm)
        }
    }

    @Test(arguments: v.assertions.map(\.name))
    func assertion(_ name: String) throws {
        let a = Self.v.assertion(name)
        let record = try Self.v.record(for: a)
        let result = WebAuthn.verifyAssertion(a.response, credential: record, expecting: a.expectation, relyingParty: Self.rp)
        if let verified = Self.verdict(name, expected: a.expect, result) {
            #expect(verified.signCount == a.signCount)
            #expect(verified.credentialId == record.id)
            #expect(verified.flags == WebAuthn.Flags(rawValue: a.flags))
            #expect(verified.updating(record).signCount == a.signCount)
            // The same assertion again, against the updated record, is a replay.
            if a.signCount != 0 {
                let again = WebAuthn.verifyAssertion(a.response, credential: verified.updating(record),
                                                     expecting: a.expectation, relyingParty: Self.rp)
                #expect(again.refusal == .counterRegression(stored: a.signCount, received: a.signCount))
            }
        }
    }

    /// The verified value where the vector expects "ok"; otherwise nil, with an issue recorded
    /// unless the refusal's code is the expected one.
    static func verdict<T>(_ name: String, expected: String, _ result: Result<T, WebAuthn.Refusal>) -> T? {
        switch (expected, result) {
        case ("ok", .success(let value)): return value
        case ("ok", .failure(let refusal)): Issue.record("\(name) refused: \(refusal)")
        case (_, .failure(let refusal)): #expect(refusal.code == expected, "\(name): \(refusal)")
        case (_, .success): Issue.record("\(name) verified; expected \(expected)")
        }
        return nil
    }

    @Test func refusalsCarryTheirDetails() throws {
        func refusal(_ name: String) throws -> WebAuthn.Refusal? {
            let a = Self.v.assertion(name)
            return WebAuthn.verifyAssertion(a.response, credential: try Self.v.record(for: a), expecting: a.expectation,
                                            relyingParty: Self.rp).refusal
        }
        #expect(try refusal("get-wrong-origin") == .wrongOrigin("https://bank.example.evil"))
        #expect(try refusal("get-wrong-type") == .wrongType(expected: "webauthn.get", found: "webauthn.create"))
        #expect(try refusal("get-counter-regression") == .counterRegression(stored: 7, received: 3))
        #expect(try refusal("get-counter-zero-after-nonzero") == .counterRegression(stored: 4, received: 0))
        #expect(try refusal("get-backup-eligibility-changed") == .backupEligibilityChanged(stored: false, received: true))
        let r = Self.v.registration("reg-packed-alg-mismatch")
        #expect(WebAuthn.verifyRegistration(r.response, expecting: r.expectation, relyingParty: Self.rp).refusal
                == .attestationAlgorithmMismatch(statement: -257, key: .es256))
        let u = Self.v.registration("reg-unknown-format")
        #expect(WebAuthn.verifyRegistration(u.response, expecting: u.expectation, relyingParty: Self.rp).refusal
                == .unsupportedAttestation("fmt \"tpm\""))
        #expect(WebAuthn.Refusal.counterRegression(stored: 7, received: 3).description
                == "signature counter 3 is not above the stored 7 (cloned authenticator or replay)")
    }

    // MARK: Assertions mutated here

    /// The good assertion `name` with `change` applied, verified against its record (also changeable).
    static func verify(_ name: String, requireUV: Bool? = nil, challenge: [UInt8]? = nil, rp: WebAuthn.RelyingParty = rp,
                       _ mutate: (inout WebAuthn.AssertionResponse) -> Void = { _ in },
                       record change: (inout WebAuthn.CredentialRecord) -> Void = { _ in }) throws -> WebAuthn.Refusal? {
        let a = v.assertion(name)
        var response = a.response
        mutate(&response)
        var record = try v.record(for: a)
        change(&record)
        var expectation = a.expectation
        if let requireUV { expectation.requireUserVerification = requireUV }
        if let challenge { expectation.challenge = challenge }
        return WebAuthn.verifyAssertion(response, credential: record, expecting: expectation, relyingParty: rp).refusal
    }

    @Test(arguments: ["es256-up", "eddsa-zero-counter", "rs256-up"])
    func anyChangeToWhatIsSignedOrToTheSignatureIsABadSignature(_ name: String) throws {
        #expect(try Self.verify(name) == nil)
        #expect(try Self.verify(name) { $0.signature[$0.signature.count / 2] ^= 0x01 } == .badSignature)
        #expect(try Self.verify(name) { $0.signature.removeLast() } == .badSignature)
        #expect(try Self.verify(name) { $0.signature = [] } == .badSignature)
        // The counter's last byte: 1 → 3 still passes the counter check, but it is signed.
        #expect(try Self.verify(name) { $0.authenticatorData[36] ^= 0x02 } == .badSignature)
        // A flag no check reads (bit 1, reserved) toggled: only the signature sees it.
        #expect(try Self.verify(name) { $0.authenticatorData[32] ^= 0x02 } == .badSignature)
        // clientDataJSON re-spaced: the same JSON, another hash.
        #expect(try Self.verify(name) { $0.clientDataJSON = Array("\(String(decoding: $0.clientDataJSON, as: UTF8.self)) ".utf8) }
                == .badSignature)
    }

    @Test func eachCheckRefusesItsOwnMutation() throws {
        let name = "es256-up"
        let origin = Array("https://bank.example".utf8), evil = Array("https://bank.exampl".utf8)
        #expect(try Self.verify(name) { $0.clientDataJSON = replace(origin, with: evil, in: $0.clientDataJSON) }
                == .wrongOrigin("https://bank.exampl"))
        #expect(try Self.verify(name) { $0.clientDataJSON = replace(Array("webauthn.get".utf8), with: Array("webauthn.gex".utf8),
                                                                   in: $0.clientDataJSON) }
                == .wrongType(expected: "webauthn.get", found: "webauthn.gex"))
        #expect(try Self.verify(name, challenge: Array(repeating: 7, count: 32)) == .challengeMismatch)
        #expect(try Self.verify(name, rp: .init(id: "login.bank.example", origins: Self.rp.origins)) == .wrongRPIDHash)
        #expect(try Self.verify(name) { $0.authenticatorData[0] ^= 0x80 } == .wrongRPIDHash)
        #expect(try Self.verify(name) { $0.authenticatorData[32] &= ~0x01 } == .userNotPresent)
        #expect(try Self.verify(name, requireUV: true) == .userNotVerified)
        #expect(try Self.verify(name) { $0.authenticatorData[32] |= 0x10 } == .backupStateWithoutEligibility)
        #expect(try Self.verify(name) { $0.authenticatorData[32] |= 0x08 } == .backupEligibilityChanged(stored: false, received: true))
        #expect(try Self.verify(name, record: { $0.signCount = 1 }) == .counterRegression(stored: 1, received: 1))
        #expect(try Self.verify(name, record: { $0.signCount = 0 }) == nil)
        #expect(try Self.verify(name) { $0.rawId[0] ^= 1 } == .credentialIdMismatch)
        #expect(try Self.verify(name) { $0.userHandle = [1, 2, 3] } == .userHandleMismatch)
        #expect(try Self.verify(name) { $0.userHandle = nil } == nil)
        // The challenge must be the unpadded base64url of the issued one, as the spec compares it.
        #expect(try Self.verify(name) {
            let c = Array("\"origin\"".utf8)
            $0.clientDataJSON = replace(Array("\",".utf8) + c, with: Array("=\",".utf8) + c, in: $0.clientDataJSON)
        } == .challengeMismatch)
        // Another credential's key: the record's key decides.
        let other = try Self.v.record(for: Self.v.assertion("rs256-up"))
        #expect(try Self.verify(name, record: { $0.publicKey = other.publicKey }) == .badSignature)
    }

    @Test func malformedAssertionPartsAreRefusedWithTheirPlace() throws {
        let name = "es256-up"
        #expect(try Self.verify(name) { $0.authenticatorData.removeLast() }
                == .malformedAuthenticatorData("36 bytes, 37 at least", offset: 36))
        #expect(try Self.verify(name) { $0.authenticatorData.append(0) }
                == .malformedAuthenticatorData("1 byte after the last part the flags announce", offset: 37))
        // ED set with nothing after the counter: the extensions' CBOR is cut at byte 37.
        #expect(try Self.verify(name) { $0.authenticatorData[32] |= 0x80 }
                == .malformedCBOR("authenticator extensions", CBORError(.truncated(needed: 1), at: 37)))
        #expect(try Self.verify(name) { $0.authenticatorData[32] |= 0x80; $0.authenticatorData += [0x01] }
                == .malformedAuthenticatorData("extensions are an integer, not a map", offset: 37))
        #expect(try Self.verify(name) { $0.authenticatorData[32] |= 0x80; $0.authenticatorData += [0xbf, 0xff] }
                == .malformedCBOR("authenticator extensions", CBORError(.indefiniteLength, at: 37)))
        // AT set on an assertion with nothing after the counter.
        #expect(try Self.verify(name) { $0.authenticatorData[32] |= 0x40 }
                == .malformedAuthenticatorData("attested credential data cut short (AAGUID and length need 18 bytes, 0 left)",
                                               offset: 37))
        #expect(try Self.verify(name) { $0.clientDataJSON = Array("{\"type\":\"webauthn.get\"".utf8) }?.code == "malformedClientData")
        #expect(try Self.verify(name) { $0.clientDataJSON = Array("[]".utf8) } == .malformedClientData("not a JSON object"))
        #expect(try Self.verify(name) { $0.clientDataJSON = [0xff] + $0.clientDataJSON }?.code == "malformedClientData")
        #expect(try Self.verify(name) { $0.clientDataJSON = Array("{\"type\":\"webauthn.get\",\"type\":\"webauthn.get\"}".utf8) }?
                    .code == "malformedClientData")
        #expect(try Self.verify(name) { $0.clientDataJSON = Array("{\"type\":\"webauthn.get\",\"origin\":\"x\"}".utf8) }
                == .malformedClientData("no challenge"))
        #expect(try Self.verify(name) { $0.clientDataJSON = Array("{\"type\":1,\"challenge\":\"\",\"origin\":\"\"}".utf8) }
                == .malformedClientData("type is not a string"))
        #expect(try Self.verify(name) {
            $0.clientDataJSON = replace(Array("\"crossOrigin\":false".utf8), with: Array("\"crossOrigin\":0".utf8), in: $0.clientDataJSON)
        } == .malformedClientData("crossOrigin is not a boolean"))
        // A stored key that is not CBOR (a damaged record) is named as such.
        #expect(try Self.verify(name, record: { $0.publicKey = [0xa5] })
                == .malformedCBOR("credential public key", CBORError(.truncated(needed: 10), at: 0)))
    }

    // MARK: Registrations mutated here

    static func register(_ name: String, algorithms: Set<COSEAlgorithm>? = nil,
                         _ mutate: (inout WebAuthn.RegistrationResponse) throws -> Void = { _ in }) throws -> WebAuthn.Refusal? {
        let r = v.registration(name)
        var response = r.response
        try mutate(&response)
        var expectation = r.expectation
        if let algorithms { expectation.algorithms = algorithms }
        return WebAuthn.verifyRegistration(response, expecting: expectation, relyingParty: rp).refusal
    }

    /// The attestation object's map, to rebuild with a part changed.
    static func parts(_ object: [UInt8]) throws -> (fmt: CBOR, authData: [UInt8], attStmt: CBOR) {
        let map = try #require(try CBORDecoder.decode(object).mapValue)
        return (try #require(map[text: "fmt"]), try #require(map[text: "authData"]?.bytesValue), try #require(map[text: "attStmt"]))
    }

    static func object(fmt: CBOR, authData: [UInt8], attStmt: CBOR) -> [UInt8] {
        CBOR.map(CBORMap([(.text("fmt"), fmt), (.text("attStmt"), attStmt), (.text("authData"), .bytes(authData))])).encoded
    }

    /// An es256-none registration whose authenticator data is changed (no signature covers it).
    static func registerChangingAuthData(_ change: (inout [UInt8]) throws -> Void) throws -> WebAuthn.Refusal? {
        try register("es256-none") {
            let p = try parts($0.attestationObject)
            var authData = p.authData
            try change(&authData)
            $0.attestationObject = object(fmt: p.fmt, authData: authData, attStmt: p.attStmt)
        }
    }

    @Test func theAttestationObjectIsStrictCBORAndRefusalsSayWhere() throws {
        let good = b64(Self.v.registration("es256-none").attestationObject)
        // The rebuilt object (same entries, same order) is the same bytes: CBOR.encoded is exact.
        let p = try Self.parts(good)
        #expect(Self.object(fmt: p.fmt, authData: p.authData, attStmt: p.attStmt) == good)
        #expect(try Self.register("es256-none") == nil)

        // The authData byte string is the last entry: cut one byte, and its head is where it fails.
        let authDataHead = try #require(find(Array("authData".utf8), in: good)) + 8
        #expect(try Self.register("es256-none") { $0.attestationObject.removeLast() }
                == .malformedCBOR("attestationObject", CBORError(.truncated(needed: 1), at: authDataHead)))
        #expect(try Self.register("es256-none") { $0.attestationObject.append(0) }
                == .malformedCBOR("attestationObject", CBORError(.trailingBytes(count: 1), at: good.count)))
        // Wrapped in tag 24 (encoded CBOR): no tag is accepted.
        #expect(try Self.register("es256-none") { $0.attestationObject = [0xd8, 0x18, 0x59, UInt8(good.count >> 8), UInt8(good.count & 0xff)] + good }
                == .malformedCBOR("attestationObject", CBORError(.tagNotAllowed(24), at: 0)))
        // The same map with an indefinite length.
        #expect(try Self.register("es256-none") { $0.attestationObject = [0xbf] + good.dropFirst() + [0xff] }
                == .malformedCBOR("attestationObject", CBORError(.indefiniteLength, at: 0)))
        // fmt twice.
        let twice = CBOR.map(CBORMap([(.text("fmt"), p.fmt), (.text("fmt"), .text("packed")), (.text("attStmt"), p.attStmt),
                                      (.text("authData"), .bytes(p.authData))])).encoded
        #expect(try Self.register("es256-none") { $0.attestationObject = twice }
                == .malformedCBOR("attestationObject", CBORError(.duplicateMapKey, at: 10)))
        #expect(try Self.register("es256-none") { $0.attestationObject = CBOR.array([]).encoded }
                == .malformedAttestationObject("an array, not a map"))
        #expect(try Self.register("es256-none") {
            $0.attestationObject = CBOR.map(CBORMap([(.text("fmt"), p.fmt), (.text("attStmt"), p.attStmt)])).encoded
        } == .malformedAttestationObject("no authData byte string"))
        #expect(try Self.register("es256-none") { $0.rawId[3] ^= 1 } == .credentialIdMismatch)
        #expect(try Self.register("rs256-none", algorithms: [.es256, .eddsa]) == .algorithmNotAllowed(.rs256))
        #expect(try Self.register("rs256-none", algorithms: [.rs256]) == nil)
    }

    @Test func theCredentialPublicKeyEndsWhereItsCBORDoesAndIsChecked() throws {
        // Offsets inside authData: rpIdHash 32, flags 1, counter 4, AAGUID 16, length 2, the ID.
        let idLength = b64(Self.v.registration("es256-none").rawId).count
        let keyAt = 55 + idLength
        let authDataLength = keyAt + 77  // the P-256 key: a map of 5 with two 32-byte coordinates
        // Extensions after the key are read as such (es256-none-extensions verifies); an extra
        // byte after the key without ED is not.
        #expect(try Self.registerChangingAuthData { $0.append(0xa0) }
                == .malformedAuthenticatorData("1 byte after the last part the flags announce", offset: keyAt + 77))
        #expect(try Self.registerChangingAuthData { $0[32] |= 0x80; $0.append(0xa0) } == nil)
        #expect(try Self.registerChangingAuthData { $0[keyAt] = 0xbf }
                == .malformedCBOR("credential public key", CBORError(.indefiniteLength, at: keyAt)))
        #expect(try Self.registerChangingAuthData { $0.removeLast() }
                == .malformedCBOR("credential public key", CBORError(.truncated(needed: 1), at: keyAt + 43)))
        #expect(try Self.registerChangingAuthData { $0[53] = 0x04; $0[54] = 0x00 }
                == .malformedAuthenticatorData("credential ID of 1024 bytes, 1023 at most", offset: 53))
        #expect(try Self.registerChangingAuthData { $0[53] = 0x03; $0[54] = 0xff }
                == .malformedAuthenticatorData("credential ID of 1023 bytes, \(authDataLength - 55) left", offset: 53))
        #expect(try Self.registerChangingAuthData { $0[32] &= ~0x40 }
                == .malformedAuthenticatorData("\(authDataLength - 37) bytes after the last part the flags announce", offset: 37))

        // The key's content: an unsupported algorithm, a private part, an off-curve point.
        func changingKey(_ change: (inout [(CBOR, CBOR)]) -> Void) throws -> WebAuthn.Refusal? {
            try Self.registerChangingAuthData { authData in
                let (key, end) = try CBORDecoder.decodePrefix(authData, at: keyAt)
                var entries = try #require(key.mapValue).entries.map { ($0.key, $0.value) }
                change(&entries)
                authData = Array(authData[..<keyAt]) + CBOR.map(CBORMap(entries)).encoded + authData[end...]
            }
        }
        #expect(try changingKey { _ in } == nil)
        #expect(try changingKey { e in e = e.map { $0.0 == .int(3) ? ($0.0, .int(-35)) : $0 } }
                == .unsupportedCredentialKey(.unsupportedAlgorithm(-35)))
        #expect(try changingKey { $0.append((.int(-4), .bytes(Array(repeating: 1, count: 32)))) }
                == .unsupportedCredentialKey(.privateKeyIncluded(label: -4)))
        #expect(try changingKey { e in e = e.map { $0.0 == .int(-3) ? ($0.0, .bytes(Array(repeating: 1, count: 32))) : $0 } }
                == .unsupportedCredentialKey(.rejectedByOpenSSL("not a point on P-256")))
        #expect(try changingKey { e in e = e.map { $0.0 == .int(-3) ? ($0.0, .bool(true)) : $0 } }
                == .unsupportedCredentialKey(.invalidParameter(label: -3, name: "y", reason: "is a boolean, not a byte string")))
        #expect(try changingKey { e in e.removeAll { $0.0 == .int(3) } } == .unsupportedCredentialKey(.missing(label: 3, name: "alg")))
    }

    @Test func attestationStatementsAreCheckedForTheirFormat() throws {
        let r = Self.v.registration("es256-packed-self")
        let p = try Self.parts(b64(r.attestationObject))
        let statement = try #require(p.attStmt.mapValue)
        func with(fmt: String = "packed", _ entries: [(CBOR, CBOR)]) throws -> WebAuthn.Refusal? {
            try Self.register("es256-packed-self") {
                $0.attestationObject = Self.object(fmt: .text(fmt), authData: p.authData, attStmt: .map(CBORMap(entries)))
            }
        }
        let alg = (CBOR.text("alg"), statement[text: "alg"]!), sig = (CBOR.text("sig"), statement[text: "sig"]!)
        #expect(try with([alg, sig]) == nil)
        #expect(try with([sig, alg]) == nil)
        #expect(try with([alg]) == .malformedAttestationStatement("packed: no sig byte string"))
        #expect(try with([sig]) == .malformedAttestationStatement("packed: no integer alg"))
        #expect(try with([alg, (.text("sig"), .text("x"))]) == .malformedAttestationStatement("packed: no sig byte string"))
        #expect(try with([alg, sig, (.text("ecdaaKeyId"), .bytes([1]))])
                == .malformedAttestationStatement("packed: unknown member ecdaaKeyId"))
        #expect(try with([alg, (.text("sig"), .bytes(Array(repeating: 0, count: 70)))]) == .badAttestationSignature)
        #expect(try with([(.text("alg"), .int(-8)), sig]) == .attestationAlgorithmMismatch(statement: -8, key: .es256))
        // The packed statement under fmt none, and fmt none with an empty statement.
        #expect(try with(fmt: "none", [alg, sig]) == .malformedAttestationStatement("fmt none with 2 statement entries"))
        #expect(try with(fmt: "none", []) == nil)
        #expect(try with(fmt: "fido-u2f", [alg, sig]) == .unsupportedAttestation("fmt \"fido-u2f\""))
    }
}

extension Result {
    var refusal: Failure? { if case .failure(let e) = self { return e } else { return nil } }
}

/// The first index of `needle` in `haystack`.
func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
    guard needle.count <= haystack.count else { return nil }
    return (0...(haystack.count - needle.count)).first { Array(haystack[$0..<$0 + needle.count]) == needle }
}

/// `haystack` with the first `needle` replaced.
func replace(_ needle: [UInt8], with replacement: [UInt8], in haystack: [UInt8]) -> [UInt8] {
    guard let i = find(needle, in: haystack) else { return haystack }
    return Array(haystack[..<i]) + replacement + haystack[(i + needle.count)...]
}
