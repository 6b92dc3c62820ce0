import Foundation
import Testing
import TxGateCrypto
@testable import TxGateCore

/// The `webAuthnOutcome` strings as the ForgeRock SDKs write them (WIRE-EXTENSIONS §11).
@Suite struct WebAuthnOutcomeTests {
    static let clientData = #"{"type":"webauthn.get","challenge":"abc","origin":"https://bank.example","crossOrigin":false}"#
    static let id = Base64URL.encode(Array(1...16))

    @Test("the JavaScript SDK's assertion: signed byte lists, base64url ID, the user handle as text")
    func javascriptAssertion() throws {
        let raw = "\(Self.clientData)::73,-106,0,127,-128::48,69,2::\(Self.id)::QUJDREVGR0hJSktMTU5PUFFSU1RVVg"
        guard case .success(.assertion(let a)) = WebAuthn.parseOutcome(raw, for: .assertion) else { Issue.record("not read"); return }
        #expect(a.clientDataJSON == Array(Self.clientData.utf8))
        #expect(a.authenticatorData == [73, 150, 0, 127, 128])
        #expect(a.signature == [48, 69, 2])
        #expect(a.rawId == Array(1...16))
        #expect(a.userHandle == "QUJDREVGR0hJSktMTU5PUFFSU1RVVg")
        // The handle as its text (JavaScript, iOS), or as the Android SDK writes it: it base64-decodes the
        // handle's characters and writes the bytes as padded base64url.
        let handle = Array("AP8+/wABAgMEBQYHCAkKCw==".utf8)  // 00 ff 3e ff 00 01 ...: '+' and '/' in standard base64
        var js = a
        js.userHandle = "AP8+/wABAgMEBQYHCAkKCw=="
        #expect(js.userHandleBytes(expecting: handle) == handle)
        var android = a
        android.userHandle = "AP8-_wABAgMEBQYHCAkKCw=="
        #expect(android.userHandleBytes(expecting: handle) == handle)
        // Another user's handle stays what it is, for the verifier to refuse.
        #expect(js.userHandleBytes(expecting: Array("AAAAAAAAAAAAAAAAAAAAAA==".utf8)) == handle)
        #expect(a.userHandleBytes(expecting: handle) == Array("QUJDREVGR0hJSktMTU5PUFFSU1RVVg".utf8))
    }

    @Test("the JSON form (supportsJsonResponse), without a user handle")
    func jsonForm() throws {
        let legacy = "\(Self.clientData)::1,2::3,4::\(Self.id)"
        let json = JSONValue.object(["authenticatorAttachment": "platform", "legacyData": .string(legacy)]).canonical
        guard case .success(.assertion(let a)) = WebAuthn.parseOutcome(json, for: .assertion) else { Issue.record("not read"); return }
        #expect(a.userHandle == nil && a.authenticatorData == [1, 2])
    }

    @Test("a registration with the SDK's device name, which may itself hold '::'")
    func registration() throws {
        let raw = #"{"type":"webauthn.create","challenge":"x","origin":"https://bank.example"}::-93,99::\#(Self.id)::Pixel::9"#
        guard case .success(.registration(let r, let name)) = WebAuthn.parseOutcome(raw, for: .registration) else {
            Issue.record("not read"); return
        }
        #expect(r.attestationObject == [163, 99] && r.rawId == Array(1...16) && name == "Pixel::9")
        let unnamed = #"{"type":"webauthn.create","challenge":"x","origin":"o"}::1::\#(Self.id)"#
        guard case .success(.registration(_, nil)) = WebAuthn.parseOutcome(unnamed, for: .registration) else { Issue.record("no name"); return }
    }

    @Test("clientDataJSON whose origin holds '::' (an IPv6 literal)")
    func ipv6Origin() throws {
        let cd = #"{"type":"webauthn.get","challenge":"abc","origin":"http://[::1]:8080"}"#
        guard case .success(.assertion(let a)) = WebAuthn.parseOutcome("\(cd)::1::2::\(Self.id)", for: .assertion) else {
            Issue.record("not read"); return
        }
        #expect(a.clientDataJSON == Array(cd.utf8))
    }

    @Test("unsupported, and a client's error")
    func clientCouldNot() {
        guard case .success(.unsupported) = WebAuthn.parseOutcome("unsupported", for: .assertion) else { Issue.record("unsupported"); return }
        guard case .success(.clientError(let name, let message)) = WebAuthn.parseOutcome("ERROR::NotAllowedError:The operation either timed out: or was not allowed", for: .assertion) else {
            Issue.record("error"); return
        }
        #expect(name == "NotAllowedError" && message == "The operation either timed out: or was not allowed")
    }

    @Test("what is not an outcome is refused, with what is wrong", arguments: [
        ("webAuthnOutcome", "no clientDataJSON"),                      // the callback's initial value, untouched
        ("\(clientData)::1,2::3", "4 or 5 parts"),                      // an assertion cut short
        ("\(clientData)::1,300::3::\(id)", "authenticatorData"),        // not a byte
        ("\(clientData)::1,2::::\(id)", "signature"),                   // empty
        ("\(clientData)::1::2::***", "credential ID"),
        (#"{"authenticatorAttachment":"platform"}"#, "legacyData"),
        (String(repeating: "1,", count: 20_000), "longer than"),
    ])
    func refused(_ raw: String, _ why: String) {
        guard case .failure(let e) = WebAuthn.parseOutcome(raw, for: .assertion) else { Issue.record("read: \(raw.prefix(60))"); return }
        #expect(e.description.contains(why), "\(e)")
    }

    @Test("int8String writes what new Int8Array(buf).toString() writes")
    func int8String() {
        #expect(WebAuthn.int8String([0, 1, 127, 128, 255]) == "0,1,127,-128,-1")
    }
}

/// The transaction challenge of WIRE-EXTENSIONS §11b, its worked example recomputed.
@Suite struct WebAuthnTransactionChallengeTests {
    @Test("the documented example: approved bytes and challenge")
    func workedExample() throws {
        let tx = TransactionRecord(txid: "3f2c9a4e-7b1d-4c55-9e2a-1d6b8f0c4a77", realm: "/", resource: "https://bank.example/transfer",
                                   method: "POST", subject: "demo", journey: "PasskeyTx", bodyDigest: nil,
                                   bound: ["/amount": .number(250), "/currency": "EUR", "/payee": "Bob"],
                                   display: "Send 250 EUR to Bob?", expires: 0)
        let approved = WebAuthn.TransactionChallenge.approved(tx)
        #expect(String(decoding: approved, as: UTF8.self)
            == #"{"bound":{"/amount":250,"/currency":"EUR","/payee":"Bob"},"display":"Send 250 EUR to Bob?","method":"POST","resource":"https://bank.example/transfer","txid":"3f2c9a4e-7b1d-4c55-9e2a-1d6b8f0c4a77"}"#)
        let challenge = WebAuthn.TransactionChallenge.challenge(nonce: Array(0..<32), approved: approved)
        #expect(Crypto.hex(challenge) == "4b5280cea3e5e973d054f848a1bcc2d91d8ab471848833d98382ee0b2607c424")
        #expect(Base64URL.encode(challenge) == "S1KAzqPl6XPQVPhIobzC2R2KtHGEiDPZg4LuCyYHxCQ")
    }

    @Test("anything approved changes the challenge: amount, payee, method, resource, TxId, display")
    func everyPartCounts() {
        let base = TransactionRecord(txid: "t", realm: "/", resource: "r", method: "POST", subject: "demo", journey: "j",
                                     bodyDigest: nil, bound: ["/amount": .number(1)], display: "d", expires: 0)
        var variants = [base]
        for change in [{ (t: inout TransactionRecord) in t.bound["/amount"] = .number(2) }, { $0.bound["/payee"] = "x" },
                       { $0.method = "PUT" }, { $0.resource = "r2" }, { $0.txid = "t2" }, { $0.display = nil }] {
            var t = base
            change(&t)
            variants.append(t)
        }
        let challenges = Set(variants.map { WebAuthn.TransactionChallenge.challenge(nonce: [1], approved: WebAuthn.TransactionChallenge.approved($0)) })
        #expect(challenges.count == variants.count)
    }

    @Test("the evidence survives the record's encoding")
    func evidenceRoundTrip() throws {
        let e = WebAuthn.Evidence(credentialId: [1], publicKey: [2], rpId: "bank.example", nonce: [3], approved: [4],
                                  clientDataJSON: [5], authenticatorData: [6], signature: [7], userHandle: nil)
        #expect(WebAuthn.Evidence(json: e.json) == e)
        let tx = TransactionRecord(txid: "t", realm: "/", resource: "r", method: "POST", subject: "demo", journey: "j",
                                   bodyDigest: nil, bound: [:], display: nil, expires: 9).approved(by: "demo", passkey: e.json)
        let approved = try #require(tx)
        let back = try #require(TransactionRecord.decode(approved.encoded))
        #expect(back.passkey.flatMap(WebAuthn.Evidence.init(json:)) == e)
    }
}
