import Foundation
import HTTPCore
import Testing
import TxGateCrypto
@testable import TxGateCore

/// `/json/authenticate` read without sockets or a store: each command, each refusal with the
/// exact message the endpoint answers, and the pure steps after the lookups.
@Suite struct AuthenticateCommandTests {
    static let now = 1_800_000_000
    static let txid = "3f2b8c1e-0000-4000-8000-000000000001"
    let key = Crypto.randomBytes(32)
    let settings: AuthenticateCommand.Settings

    init() {
        let built = JourneyEngine.build([
            "Login": [NodeConfig(type: "UsernamePassword")], "Strong": [NodeConfig(type: "TOTP")], "Confirm": [NodeConfig(type: "TOTP")],
        ])
        settings = AuthenticateCommand.Settings(
            gotoPolicy: GotoPolicy(origin: HTTPURL(parsing: "https://gw.example")!),
            cors: CORSConfig(allowedOrigins: ["https://app.example"]), loginJourney: "Login",
            engine: JourneyEngine(journeys: built.journeys, signingKey: key, authIdTtlS: 300))
    }

    func parse(_ target: String = "/am/json/authenticate", body: String = "", headers: [(String, String)]? = nil,
               realm: String = "/") -> Result<AuthenticateCommand, AuthenticateCommand.Refusal> {
        let h = headers ?? (body.isEmpty ? [] : [("Content-Type", "application/json")])
        return AuthenticateCommand.parse(RequestHead(method: "POST", target: target, headers: HTTPHeaders(h)), body: Array(body.utf8),
                                         realm: realm, settings, now: Self.now)
    }

    /// An authId as the engine signs it (`JourneyEngine.sign`).
    func authId(_ state: JourneyState, expires: Int = AuthenticateCommandTests.now + 300, key: [UInt8]? = nil) -> String {
        let claims: JSONValue = .object(["iss": "txgate", "iat": .number(Self.now - 10), "exp": .number(expires), "st": state.json])
        return JWT.sign(claimsJSON: claims.canonicalBytes, key: key ?? self.key)
    }

    func advice(_ name: String, _ value: String) -> String { Advices([(name, [value])]).xml }

    func compositeAdvice(_ xml: String) -> String {
        "/am/json/authenticate?authIndexType=composite_advice&authIndexValue=" + Query.encode(xml)
    }

    // MARK: commands

    @Test func startsTheLoginJourneyOrOneByName() {
        let login = JourneyState(realm: "/", journey: "Login")
        // The Android SDK starts every journey with an empty body and no Content-Type.
        #expect(parse() == .success(.start(login)))
        #expect(parse(body: " \r\n{}\t") == .success(.start(login)))
        #expect(parse(body: "{}") == .success(.start(login)))
        #expect(parse("/am/json/authenticate?authIndexType=service&authIndexValue=Strong", body: "{}")
            == .success(.start(JourneyState(realm: "/", journey: "Strong"))))
        #expect(parse("/am/json/authenticate?authIndexValue=Strong", realm: "/branch")
            == .success(.start(JourneyState(realm: "/branch", journey: "Strong"))))
        // goto: on the gateway's origin, as a path or absolute.
        #expect(parse("/am/json/authenticate?goto=%2Faccounts%3Fx%3D1")
            == .success(.start(JourneyState(realm: "/", journey: "Login", shared: ["goto": "/accounts?x=1"]))))
        #expect(parse("/am/json/authenticate?goto=" + Query.encode("https://gw.example/accounts"))
            == .success(.start(JourneyState(realm: "/", journey: "Login", shared: ["goto": "https://gw.example/accounts"]))))
    }

    @Test func aJourneyAdviceIsAStepUp() {
        let xml = advice(Advices.authenticateToService, "/:Strong")
        let strong = JourneyState(realm: "/", journey: "Strong", shared: ["goto": "/admin"])
        #expect(parse(compositeAdvice(xml) + "&goto=%2Fadmin") == .success(.stepUp(strong)))
        // base64url of the XML, as some clients send it.
        let b64 = Base64URL.encode(Array(xml.utf8))
        #expect(parse("/am/json/authenticate?authIndexType=composite_advice&authIndexValue=\(b64)&goto=/admin")
            == .success(.stepUp(strong)))
        // A tree with no realm prefix names the journey itself.
        #expect(parse(compositeAdvice(advice(Advices.authenticateToService, "Strong")))
            == .success(.stepUp(JourneyState(realm: "/", journey: "Strong"))))
    }

    @Test func aTransactionAdviceIsAnApproval() {
        let xml = Advices([(Advices.transaction, [Self.txid]), (Advices.authenticateToService, ["/:Strong"])]).xml
        // The transaction wins over a journey in the same advice; the journey is the transaction's, read later.
        #expect(parse(compositeAdvice(xml) + "&goto=%2Ftransfer")
            == .success(.approve(txid: Self.txid, JourneyState(realm: "/", journey: "Login", shared: ["goto": "/transfer"]))))
    }

    @Test func anAuthIdContinuesItsJourney() {
        let state = JourneyState(realm: "/", journey: "Login", username: "alice")
        let body = #"{"authId":"\#(authId(state))","callbacks":[{"type":"NameCallback","input":[{"name":"IDToken1","value":"alice"}]},"#
            + #"{"type":"PasswordCallback","input":[{"name":"IDToken2","value":"pw"}]}]}"#
        let submitted = [SubmittedCallback(type: "NameCallback", inputs: [.string("alice")]),
                         SubmittedCallback(type: "PasswordCallback", inputs: [.string("pw")])]
        #expect(parse(body: body) == .success(.proceed(state, callbacks: submitted)))
        // The authId wins over a suspendedId and over the start parameters (a bad goto is not read).
        #expect(parse("/am/json/authenticate?suspendedId=abc&goto=https://evil.example/", body: body)
            == .success(.proceed(state, callbacks: submitted)))
        #expect(parse(body: #"{"authId":"\#(authId(state))","callbacks":[]}"#) == .success(.proceed(state, callbacks: [])))
    }

    @Test func aSuspendedIdResumes() {
        #expect(parse("/am/json/authenticate?suspendedId=abc%2Bdef") == .success(.resume(suspendedId: "abc+def")))
        // A suspendedId ignores the start parameters.
        #expect(parse("/am/json/authenticate?suspendedId=abc&authIndexType=nope&goto=https://evil.example/")
            == .success(.resume(suspendedId: "abc")))
        // An authId that is not a string is not an authId.
        #expect(parse("/am/json/authenticate?suspendedId=abc", body: #"{"authId":1}"#) == .success(.resume(suspendedId: "abc")))
    }

    // MARK: refusals

    @Test func crossSiteRequestsAreRefused() {
        #expect(parse(headers: [("Origin", "https://evil.example")])
            == .failure(.forbidden("requests from the origin 'https://evil.example' may not authenticate here")))
        // The gateway's own origin, and one CORS allows, may.
        #expect(parse(headers: [("Origin", "https://gw.example")]) == .success(.start(JourneyState(realm: "/", journey: "Login"))))
        #expect(parse(headers: [("Origin", "https://app.example")]) == .success(.start(JourneyState(realm: "/", journey: "Login"))))
        // The origin is checked before anything else.
        #expect(parse(body: "x", headers: [("Origin", "https://evil.example"), ("Content-Type", "text/plain")])
            == .failure(.forbidden("requests from the origin 'https://evil.example' may not authenticate here")))
    }

    @Test func aBodyMustBeJSON() {
        let notJSON = AuthenticateCommand.Refusal.unsupportedMediaType("the body must be JSON (Content-Type: application/json)")
        #expect(parse(body: "{}", headers: [("Content-Type", "text/plain")]) == .failure(notJSON))
        #expect(parse(body: "authId=x", headers: [("Content-Type", "application/x-www-form-urlencoded")]) == .failure(notJSON))
        #expect(parse(body: "{}", headers: []) == .failure(notJSON))
        #expect(parse(body: "{}", headers: [("Content-Type", "application/json; charset=utf-8")]) == .success(
            .start(JourneyState(realm: "/", journey: "Login"))))
        let notAnObject = AuthenticateCommand.Refusal.badRequest("the request body is not a JSON object")
        #expect(parse(body: "[]") == .failure(notAnObject))
        #expect(parse(body: "{") == .failure(notAnObject))
        #expect(parse(body: "\"authId\"") == .failure(notAnObject))
    }

    @Test func anAuthIdIsCheckedBeforeItsCallbacks() {
        let state = JourneyState(realm: "/", journey: "Login")
        #expect(parse(body: #"{"authId":"\#(authId(state, expires: Self.now))","callbacks":[]}"#) == .failure(.timedOut))
        #expect(parse(body: #"{"authId":"\#(authId(state, key: Crypto.randomBytes(32)))","callbacks":[]}"#)
            == .failure(.rejected("invalid authId")))
        #expect(parse(body: #"{"authId":"x.y.z"}"#) == .failure(.rejected("invalid authId")))
        // A journey no longer configured.
        #expect(parse(body: #"{"authId":"\#(authId(JourneyState(realm: "/", journey: "Gone")))","callbacks":[]}"#)
            == .failure(.rejected("invalid authId")))
        #expect(parse(body: #"{"authId":"\#(authId(state))","callbacks":[]}"#, realm: "/branch")
            == .failure(.rejected("the authId belongs to another realm")))
        let badCallbacks = AuthenticateCommand.Refusal.badRequest("'callbacks' must be the array of callbacks of the current step")
        #expect(parse(body: #"{"authId":"\#(authId(state))"}"#) == .failure(badCallbacks))
        #expect(parse(body: #"{"authId":"\#(authId(state))","callbacks":{}}"#) == .failure(badCallbacks))
        #expect(parse(body: #"{"authId":"\#(authId(state))","callbacks":[{"input":[]}]}"#) == .failure(badCallbacks))
        // An expired authId with no callbacks is still a timeout, as before.
        #expect(parse(body: #"{"authId":"\#(authId(state, expires: Self.now - 1))"}"#) == .failure(.timedOut))
    }

    @Test func startParametersAreChecked() {
        #expect(parse("/am/json/authenticate?goto=" + Query.encode("https://evil.example/x"))
            == .failure(.badRequest("goto 'https://evil.example/x' is not on this gateway's origin (https://gw.example)")))
        #expect(parse("/am/json/authenticate?goto=%2F%2Fevil.example&authIndexValue=Nope")
            == .failure(.badRequest("goto '//evil.example' is not on this gateway's origin (https://gw.example)")))
        #expect(parse("/am/json/authenticate?authIndexValue=Nope") == .failure(.badRequest("no journey named 'Nope'")))
        #expect(parse("/am/json/authenticate?authIndexType=module&authIndexValue=Login")
            == .failure(.badRequest("authIndexType 'module' is not supported (use service or composite_advice)")))
    }

    @Test func anAdviceMustNameATransactionOrAKnownJourney() {
        let notAdvice = AuthenticateCommand.Refusal.badRequest("authIndexValue must be advice XML (URL-encoded or base64url)")
        #expect(parse("/am/json/authenticate?authIndexType=composite_advice") == .failure(notAdvice))
        #expect(parse("/am/json/authenticate?authIndexType=composite_advice&authIndexValue=%3CAdvices%3E") == .failure(notAdvice))
        #expect(parse("/am/json/authenticate?authIndexType=composite_advice&authIndexValue=!!!") == .failure(notAdvice))
        #expect(parse(compositeAdvice(advice(Advices.authLevel, "2")))
            == .failure(.badRequest("the advice names neither a transaction nor a journey")))
        #expect(parse(compositeAdvice(advice(Advices.authenticateToService, "/:Nope")))
            == .failure(.badRequest("no journey named 'Nope'")))
    }

    // MARK: after the lookups

    func record(subject: String = "alice", realm: String = "/", journey: String = "Confirm", state: TransactionRecord.State = .created,
                expires: Int = AuthenticateCommandTests.now + 60, display: String? = "Pay 100 to Bob?") -> TransactionRecord {
        TransactionRecord(txid: Self.txid, state: state, realm: realm, resource: "https://gw.example/transfer", method: "POST",
                          subject: subject, journey: journey, bodyDigest: nil, bound: [:], display: display, expires: expires)
    }

    func approval(_ record: TransactionRecord?, uid: String = "alice") -> Result<JourneyState, AuthenticateCommand.ApprovalRefusal> {
        AuthenticateCommand.approval(JourneyState(realm: "/", journey: "Login", shared: ["goto": "/transfer"]), txid: Self.txid,
                                     record: record, uid: uid, sessionKey: "session:abc", settings, now: Self.now)
    }

    @Test func anApprovalStartsTheTransactionsJourneyForItsOwnSubject() throws {
        let state = try approval(record()).get()
        #expect(state == JourneyState(realm: "/", journey: "Confirm", username: "alice",
                                      shared: ["goto": "/transfer", JourneyState.approvalSessionKey: "session:abc",
                                               "display": "Pay 100 to Bob?"],
                                      txid: Self.txid))
        #expect(try approval(record(display: nil)).get().shared["display"] == nil)
    }

    @Test func anApprovalIsRefused() {
        #expect(approval(nil) == .failure(.refused(.gone)))
        #expect(approval(record(expires: Self.now)) == .failure(.refused(.gone)))
        #expect(approval(record(state: .completed)) == .failure(.refused(.gone)))
        #expect(approval(record(), uid: "bob") == .failure(.refused(.anotherSubject)))
        #expect(approval(record(realm: "/branch")) == .failure(.refused(.anotherSubject)))
        #expect(approval(record(journey: "Removed")) == .failure(.journeyNotConfigured("Removed")))
        #expect(AuthenticateCommand.ApprovalRefusal.journeyNotConfigured("Removed").message
            == "the transaction's journey 'Removed' is not configured")
        #expect(AuthenticateCommand.ApprovalRefusal.refused(.gone).message == "the transaction is unknown, expired or already approved")
        #expect(AuthenticateCommand.ApprovalRefusal.refused(.anotherSubject).message == "this transaction belongs to another user")
    }

    @Test func aStepUpKeepsTheSessionsKeyNotItsToken() {
        let strong = JourneyState(realm: "/", journey: "Strong")
        #expect(AuthenticateCommand.stepUpState(strong, session: nil) == strong)
        #expect(AuthenticateCommand.stepUpState(strong, session: (uid: "alice", key: "session:abc"))
            == JourneyState(realm: "/", journey: "Strong", username: "alice", shared: [JourneyState.stepUpSessionKey: "session:abc"]))
    }

    @Test func aSuspendedJourneyResumesInItsOwnRealmOnly() throws {
        let state = JourneyState(realm: "/", journey: "Login", node: 1, username: "alice", shared: ["goto": "/x"])
        let bytes = Array(try JSONEncoder().encode(state))
        #expect(AuthenticateCommand.resumed(bytes, realm: "/") == state)
        #expect(AuthenticateCommand.resumed(bytes, realm: "/branch") == nil)
        #expect(AuthenticateCommand.resumed(nil, realm: "/") == nil)
        #expect(AuthenticateCommand.resumed(Array("not json".utf8), realm: "/") == nil)
    }
}
