import Testing
import TxGateCrypto
@testable import TxGateCore

/// The authIds a worker signed, read back without their signature (`IssuedAuthIds`): what they
/// give must be exactly what the signature gives, checked as strictly, and only once.
@Suite struct IssuedAuthIdsTests {
    let services = FakeServices()
    let key = Crypto.randomBytes(32)
    static let journeys = ["Login": [NodeConfig(type: "UsernameOnly"), NodeConfig(type: "Message", settings: ["message": "m"])]]

    func engine(_ journeys: [String: [NodeConfig]] = Self.journeys, key: [UInt8]? = nil) -> JourneyEngine {
        JourneyEngine(journeys: JourneyEngine.build(journeys).journeys, signingKey: key ?? self.key, authIdTtlS: 300)
    }

    /// The authId of the first step of `state`'s journey, signed with `issued` in the context.
    func firstStep(_ e: JourneyEngine, _ state: JourneyState, _ issued: IssuedAuthIds) throws -> String {
        var result: JourneyResult?
        e.start(state, context: JourneyContext(services: services, issued: issued)) { result = $0 }
        guard case .step(let authId, _)? = result else { return try #require(nil as String?, "expected a step, got \(String(describing: result))") }
        return authId
    }

    @Test func anAuthIdSignedHereReadsAsItsSignatureDoesOnce() throws {
        let e = engine()
        let issued = IssuedAuthIds()
        let state = JourneyState(realm: "/x", journey: "Login", username: "dé\"mo", shared: ["goto": "/a?b=1", "b\n": "\u{1}", "": "é"], txid: "t-1")
        let authId = try firstStep(e, state, issued)
        #expect(issued.count == 1)
        let signed = e.decode(authId: authId, now: services.now)
        guard case .success(let fromSignature) = signed else { Issue.record("signed: \(signed)"); return }
        #expect(issued.count == 1, "a decode without the memo leaves it alone")
        let remembered = e.decode(authId: authId, now: services.now, issued: issued)
        guard case .success(let fromMemo) = remembered else { Issue.record("remembered: \(remembered)"); return }
        #expect(fromMemo == fromSignature)
        #expect(issued.count == 0, "a hit is taken")
        // Answered again (a client's retry): verified, and the same.
        guard case .success(let again) = e.decode(authId: authId, now: services.now, issued: issued) else { Issue.record("retry refused"); return }
        #expect(again == fromSignature)
    }

    @Test func aRememberedAuthIdExpiresAndLosesItsJourneyAsASignedOneDoes() throws {
        let e = engine()
        let issued = IssuedAuthIds()
        let authId = try firstStep(e, JourneyState(realm: "/", journey: "Login"), issued)
        guard case .failure(.timedOut) = e.decode(authId: authId, now: services.now + 300, issued: issued) else {
            Issue.record("expected a time-out at exp"); return
        }
        #expect(issued.count == 0)

        // A reload that drops the journey (same key): refused from the memo as from the signature.
        let other = try firstStep(e, JourneyState(realm: "/", journey: "Login"), issued)
        let reloaded = engine(["Other": [NodeConfig(type: "UsernameOnly")]])
        guard case .failure(.rejected) = reloaded.decode(authId: other, now: services.now) else { Issue.record("signed: accepted"); return }
        guard case .failure(.rejected) = reloaded.decode(authId: other, now: services.now, issued: issued) else {
            Issue.record("remembered: accepted"); return
        }
    }

    @Test func whatTheMemoDoesNotHoldIsVerified() throws {
        let e = engine()
        let issued = IssuedAuthIds()
        let authId = try firstStep(e, JourneyState(realm: "/", journey: "Login"), issued)
        var parts = authId.split(separator: ".").map(String.init)
        parts[1] = Base64URL.encode(Array(#"{"exp":9999999999,"iat":0,"iss":"txgate","st":{"journey":"Login","node":0,"realm":"/","shared":{},"username":"admin"}}"#.utf8))
        // The same signature, so the same hash in the memo (`AuthIdKey` hashes the text's end):
        // still not the same key, which is the whole text.
        let tampered = parts.joined(separator: ".")
        #expect(AuthIdKey(tampered).hashValue == AuthIdKey(authId).hashValue && AuthIdKey(tampered) != AuthIdKey(authId))
        guard case .failure(.rejected) = e.decode(authId: tampered, now: services.now, issued: issued) else {
            Issue.record("a tampered authId was accepted"); return
        }
        // Signed by another gateway's key, or by this one on another worker: not in this memo.
        let elsewhere = try firstStep(engine(key: Crypto.randomBytes(32)), JourneyState(realm: "/", journey: "Login"), IssuedAuthIds())
        guard case .failure(.rejected) = e.decode(authId: elsewhere, now: services.now, issued: issued) else {
            Issue.record("another key's authId was accepted"); return
        }
        #expect(issued.count == 1, "refusals take nothing")
    }

    @Test func pastItsBoundTheOldestIsForgottenAndVerified() throws {
        let e = engine()
        let issued = IssuedAuthIds(capacity: 2)
        // Three states (the same state signed in the same second is the same authId).
        let ids = try (0..<3).map { try firstStep(e, JourneyState(realm: "/", journey: "Login", shared: ["n": "\($0)"]), issued) }
        #expect(issued.count == 2)
        for id in ids {
            guard case .success = e.decode(authId: id, now: services.now, issued: issued) else { Issue.record("refused"); return }
        }
        #expect(issued.count == 0)
    }
}
