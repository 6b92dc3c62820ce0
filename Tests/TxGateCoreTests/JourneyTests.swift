import Foundation
import Testing
import TxGateCrypto
@testable import TxGateCore

/// In-memory services: the engine and the nodes run exactly as in the gateway, minus I/O.
final class FakeServices: JourneyServices {
    var users: [String: UserRecord] = [:]
    var locked: Set<String> = []
    var failures: [String: Int] = [:]
    var claimed: Set<String> = []
    var now = 1_700_000_000
    var storeDown = false

    func user(named: String) -> UserRecord? { users[named] }
    func verifyPassword(_ password: String, of user: UserRecord?, _ done: @escaping (Bool) -> Void) {
        done(PasswordHash.verify(password, encoded: user?.passwordHash ?? PasswordHash.dummy) && user != nil)
    }
    func isLockedOut(_ username: String, _ done: @escaping (StoreResult<Bool>) -> Void) {
        done(storeDown ? .failure(.unavailable("down")) : .success(locked.contains(username)))
    }
    func recordFailure(_ username: String, _ done: @escaping (StoreResult<Void>) -> Void) {
        failures[username, default: 0] += 1
        if failures[username]! >= 3 { locked.insert(username) }
        done(.success(()))
    }
    func claimOnce(_ key: String, ttlS: Int, _ done: @escaping (StoreResult<Bool>) -> Void) {
        done(.success(claimed.insert(key).inserted))
    }
}

@Suite struct JourneyTests {
    static let secret = "JBSWY3DPEHPK3PXP"
    let services = FakeServices()
    let key = Crypto.randomBytes(32)

    init() {
        services.users["demo"] = UserRecord(username: "demo", passwordHash: PasswordHash.hash("Ch4ngeMe!", cost: ScryptCost(ln: 4, r: 8, p: 1)),
                                            totpSecret: Self.secret)
    }

    func engine(_ journeys: [String: [NodeConfig]], ttl: Int = 300) -> JourneyEngine {
        let built = JourneyEngine.build(journeys)
        #expect(built.errors.isEmpty)
        return JourneyEngine(journeys: built.journeys, signingKey: key, authIdTtlS: ttl)
    }

    func run(_ e: JourneyEngine, _ state: JourneyState, _ answers: [[SubmittedCallback]]) -> JourneyResult {
        let ctx = JourneyContext(services: services)
        var result = e.start(state, context: ctx)
        for a in answers {
            guard case .step(let authId, _) = result else { return result }
            switch e.decode(authId: authId, now: services.now) {
            case .failure(let r): return r
            case .success(let s):
                var out: JourneyResult?
                e.proceed(s, submitted: a, context: ctx) { out = $0 }
                result = out!
            }
        }
        return result
    }

    func login(_ user: String, _ pw: String) -> [SubmittedCallback] {
        [SubmittedCallback(type: "NameCallback", inputs: [.string(user)]), SubmittedCallback(type: "PasswordCallback", inputs: [.string(pw)])]
    }

    var totpCode: String {
        TOTP(secret: Base32.decode(Self.secret)!).code(at: services.now)
    }

    @Test func usernamePasswordThenTOTP() {
        let e = engine(["Login": [NodeConfig(type: "UsernamePassword"), NodeConfig(type: "TOTP")]])
        let r = run(e, JourneyState(realm: "/", journey: "Login"),
                    [login("demo", "Ch4ngeMe!"), [SubmittedCallback(type: "PasswordCallback", inputs: [.string(totpCode)])]])
        guard case .success(let s) = r else { Issue.record("expected success, got \(r)"); return }
        #expect(s.username == "demo")
    }

    @Test func firstStepShowsAMsCallbacks() {
        let e = engine(["Login": [NodeConfig(type: "UsernamePassword")]])
        guard case .step(let authId, let cbs) = e.start(JourneyState(realm: "/", journey: "Login"), context: JourneyContext(services: services)) else {
            Issue.record("expected a step"); return
        }
        #expect(JourneyEngine.stepJSON(authId: authId, callbacks: cbs) ==
            #"{"authId":"\#(authId)","callbacks":[{"type":"NameCallback","output":[{"name":"prompt","value":"User Name"}],"input":[{"name":"IDToken1","value":""}],"_id":0},{"type":"PasswordCallback","output":[{"name":"prompt","value":"Password"}],"input":[{"name":"IDToken2","value":""}],"_id":1}]}"#)
    }

    @Test func wrongPasswordUnknownUserAndLockout() {
        let e = engine(["Login": [NodeConfig(type: "UsernamePassword")]])
        let start = JourneyState(realm: "/", journey: "Login")
        guard case .failure = run(e, start, [login("demo", "wrong")]) else { Issue.record("wrong password must fail"); return }
        guard case .failure = run(e, start, [login("nobody", "x")]) else { Issue.record("unknown user must fail"); return }
        _ = run(e, start, [login("demo", "wrong")])
        _ = run(e, start, [login("demo", "wrong")])
        #expect(services.locked.contains("demo"))
        guard case .failure(let reason) = run(e, start, [login("demo", "Ch4ngeMe!")]) else {
            Issue.record("a locked-out user must fail even with the right password"); return
        }
        #expect(reason == "user is locked out")
    }

    @Test func totpCodeWorksOnceOnly() {
        let e = engine(["Confirm": [NodeConfig(type: "TOTP")]])
        let s = JourneyState(realm: "/", journey: "Confirm", username: "demo")
        let code = [SubmittedCallback(type: "PasswordCallback", inputs: [.string(totpCode)])]
        guard case .success = run(e, s, [code]) else { Issue.record("first use must pass"); return }
        guard case .failure(let why) = run(e, s, [code]) else { Issue.record("reuse must fail"); return }
        #expect(why == "one-time password already used")
        guard case .failure = run(e, s, [[SubmittedCallback(type: "PasswordCallback", inputs: ["000000"])]]) else {
            Issue.record("a wrong code must fail"); return
        }
    }

    @Test func tamperedExpiredAndMismatchedSteps() {
        let e = engine(["Login": [NodeConfig(type: "UsernamePassword")]], ttl: 300)
        guard case .step(let authId, _) = e.start(JourneyState(realm: "/", journey: "Login"), context: JourneyContext(services: services)) else {
            Issue.record("expected a step"); return
        }
        var parts = authId.split(separator: ".").map(String.init)
        parts[1] = Base64URL.encode(Array(#"{"iss":"txgate","iat":0,"exp":9999999999,"st":{"realm":"/","journey":"Login","node":0,"shared":{}}}"#.utf8))
        if case .success = e.decode(authId: parts.joined(separator: "."), now: services.now) { Issue.record("tampered authId accepted") }
        guard case .failure(.timedOut) = e.decode(authId: authId, now: services.now + 301) else { Issue.record("expected time-out"); return }
        guard case .success(let s) = e.decode(authId: authId, now: services.now) else { Issue.record("valid authId refused"); return }
        var out: JourneyResult?
        e.proceed(s, submitted: [SubmittedCallback(type: "PasswordCallback", inputs: ["x"])], context: JourneyContext(services: services)) { out = $0 }
        guard case .rejected = out! else { Issue.record("mismatched callbacks must be rejected"); return }
    }

    @Test func messageAndConfirmNodes() {
        let e = engine(["Approve": [NodeConfig(type: "Message", settings: ["message": "Read this"]), NodeConfig(type: "Confirm")]])
        let s = JourneyState(realm: "/", journey: "Approve", username: "demo")
        let text = [SubmittedCallback(type: "TextOutputCallback", inputs: [])]
        guard case .success = run(e, s, [text, [SubmittedCallback(type: "ConfirmationCallback", inputs: [0])]]) else {
            Issue.record("Yes must pass"); return
        }
        guard case .failure(let why) = run(e, s, [text, [SubmittedCallback(type: "ConfirmationCallback", inputs: [1])]]) else {
            Issue.record("No must fail"); return
        }
        #expect(why == "declined")
    }

    @Test func badNodeConfigurationIsNamed() {
        let built = JourneyEngine.build(["L": [NodeConfig(type: "Nope", path: "journeys.L[0]"),
                                               NodeConfig(type: "Message", settings: ["message": "m", "colour": "red"], path: "journeys.L[1]")]])
        #expect(built.errors.map(\.description) == [
            "journeys.L[0].type: 'Nope' is not a node type (Confirm, Message, TOTP, UsernamePassword)",
            "journeys.L[1].colour: unknown key",
        ])
    }
}
