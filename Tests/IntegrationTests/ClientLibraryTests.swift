import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import TxGateClient
import TxGateCore
import TestSupport

/// The TxGateClient library (docs/CLIENT.md) against the real gateway, and against a scripted
/// server where what the client sends must be seen byte for byte.
@Suite(.testbed) struct ClientLibraryTests {
    typealias Kit = TransactionKit

    /// Answers each step from a table keyed by prompt, and records what the steps showed.
    final class Answers: StepUpDelegate, @unchecked Sendable {
        // @unchecked: `shown` and `challenges` are only touched under `lock`.
        let table: [String: String]
        private let lock = NSLock()
        private var shown: [String] = []
        private var challenges: [StepUpChallenge] = []
        init(_ table: [String: String]) { self.table = table }
        var messages: [String] { lock.withLock { shown } }
        var seen: [StepUpChallenge] { lock.withLock { challenges } }

        func answer(_ step: JourneyStep, for challenge: StepUpChallenge) async throws -> JourneyStep {
            lock.withLock {
                shown += step.displayedMessages
                challenges.append(challenge)
            }
            var step = step
            for i in step.callbacks.indices where step.callbacks[i].needsInput {
                guard let v = table[step.callbacks[i].label] else { throw TxGateClientError.challengeNotAnswered(step.callbacks[i].label) }
                step.callbacks[i].answer(v)
            }
            return step
        }
    }

    static func client(_ url: String, _ configure: (inout ClientConfiguration) -> Void = { _ in },
                       interceptors: [RequestInterceptor] = []) -> TxGateClient {
        var c = ClientConfiguration(serverURL: URL(string: url)!)
        configure(&c)
        return TxGateClient(configuration: c, interceptors: interceptors)
    }

    static func login(_ client: TxGateClient) async throws {
        let answers = Answers(["User Name": "demo", "Password": Kit.password])
        _ = try await client.complete(try await client.start(journey: "Login")) { try await answers.answer($0, for: StepUpChallenge(form: .body, advices: Advices([]))) }
    }

    static func transferRequest(_ g: GatewayInstance) -> URLRequest {
        var r = URLRequest(url: URL(string: Kit.publicURL(g) + "/transfer")!)
        r.httpMethod = "POST"
        r.setValue("application/json", forHTTPHeaderField: "Content-Type")
        r.httpBody = Data(Kit.transferBody)
        return r
    }

    /// The three forms a gateway steps up with: SSOADVICE (asked for with
    /// `x-authenticate-response: header`), the redirect (retried here with X-TxID), and RFC 9470
    /// for a request that carries its own `Authorization: Bearer`.
    @Test(arguments: [StepUpChallenge.Form.ssoAdvice, .redirect, .bearer])
    func sendStepsUpInEachFormAndRetriesOnce(form: StepUpChallenge.Form) async throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(config: Kit.config())
        let client = Self.client(Kit.publicURL(g)) {
            $0.requestHeaderChallenges = form == .ssoAdvice
            if form == .redirect { $0.txidCarrier = .header }
        }
        try await Self.login(client)
        #expect(try await client.validate())
        var request = Self.transferRequest(g)
        if form == .bearer { request.setValue("Bearer \(try #require(try client.currentToken()))", forHTTPHeaderField: "Authorization") }
        var codes = Kit.Codes()
        let answers = Answers(["One Time Password": codes.next(Kit.demoSecret)])
        let r = try await client.send(request, delegate: answers)
        #expect(r.status == 201, "\(r.status) \(r.bodyText)")
        #expect(r.challenge == nil)
        #expect(answers.messages == ["Approve 100 EUR to Bob?"])
        #expect(answers.seen.map(\.form) == [form])
        #expect(answers.seen.first?.txid.map(Kit.isUUID) == true)

        // Without a delegate, the challenge comes back to the caller as is (IG's 307: the client
        // is no browser's form navigation, WIRE-EXTENSIONS §3b).
        let bare = try await client.send(request, delegate: nil)
        #expect(bare.status == (form == .redirect ? 307 : 401))
        #expect(bare.challenge?.form == form)
        #expect(bare.challenge?.txid != nil && bare.challenge?.txid != answers.seen.first?.txid)

        #expect(try await client.logout())
        #expect(try await client.validate() == false)
    }

    /// A scripted server: challenged, approved, and challenged again on the retry; the second
    /// challenge is handed back, and exactly four requests were sent.
    @Test func aSecondChallengeAfterTheRetryIsReturnedNotLoopedOn() async throws {
        let first = "11111111-1111-4111-8111-111111111111", second = "22222222-2222-4222-8222-222222222222"
        let challenge: (String) -> [UInt8] = { txid in
            let header = Challenge.ssoAdviceHeader(realm: "/", advices: Advices([(Advices.transaction, [txid])]), amURI: "http://x/am/")
            return http(401, #"{"code":401}"#, ["WWW-Authenticate: \(header)"])
        }
        let step = #"{"authId":"a1","callbacks":[{"type":"PasswordCallback","output":[{"name":"prompt","value":"Code"}],"input":[{"name":"IDToken1","value":""}],"_id":0}]}"#
        let server = try RawUpstream(responses: [challenge(first), http(200, step), http(200, #"{"tokenId":"tok","successUrl":"/","realm":"/"}"#),
                                                 challenge(second), http(500, "{}")])
        defer { server.stop() }
        let client = Self.client(server.url)
        var request = URLRequest(url: URL(string: server.url + "/pay?x=1")!)
        request.httpMethod = "POST"
        request.httpBody = Data("{}".utf8)
        let r = try await client.send(request, delegate: Answers(["Code": "123456"]))
        #expect(r.status == 401 && r.challenge?.txid == second)
        let sent = server.receivedRequests
        #expect(sent.count == 4, "\(sent)")
        #expect(sent.last?.hasPrefix("POST /pay?x=1&_txid=\(first) HTTP/1.1\r\n") == true, "\(sent.last ?? "")")
        #expect(sent.last?.lowercased().contains("\r\niplanetdirectorypro: tok\r\n") == true, "the retry carries the new session: \(sent)")
        #expect(sent[2].contains(#"{"name":"IDToken1","value":"123456"}"#) && sent[2].contains(#""authId":"a1""#), "\(sent[2])")
        #expect(sent[2].hasPrefix("POST /am/json/realms/root/authenticate HTTP/1.1\r\n"), "a step goes back without query: \(sent[2])")
    }

    /// Interceptors run in registration order on the tagged calls, with WIRE.md §6's payload.
    @Test func interceptorsChangeTheStartAuthenticateCallAsTheServerSeesIt() async throws {
        let step = #"{"authId":"a1","callbacks":[{"type":"NameCallback","output":[{"name":"prompt","value":"User Name"}],"input":[{"name":"IDToken1","value":""}],"_id":0}]}"#
        let server = try RawUpstream(responses: [http(200, step), http(200, #"{"tokenId":"tok"}"#), http(200, #"{"result":"Successfully logged out"}"#)])
        defer { server.stop() }
        let log = Recorder()
        let client = Self.client(server.url, interceptors: [
            ClosureInterceptor { r, action in
                log.add("\(action.type) \(action.payload["type"] ?? "-") \(action.payload["tree"] ?? "-")")
                var r = r
                if action.kind == .startAuthenticate {
                    r.addQueryItem("ForceAuth", "true")
                    r.setValue("en-GB", forHTTPHeaderField: "Accept-Language")
                }
                return r
            },
            ClosureInterceptor { r, action in
                // The second sees what the first did.
                if action.kind == .startAuthenticate { log.add("second saw \(r.url?.query ?? "")") }
                return r
            },
        ])
        let outcome = try await client.start(journey: "Login")
        guard case .step(var s) = outcome else { Issue.record("not a step: \(outcome)"); return }
        #expect(s.callbacks.first?.kind == .name)
        s.callbacks[0].answer("demo")
        _ = try await client.next(s)
        try await client.logout()

        let sent = server.receivedRequests
        #expect(sent.count == 3)
        #expect(sent[0].hasPrefix("POST /am/json/realms/root/authenticate?authIndexType=service&authIndexValue=Login&ForceAuth=true HTTP/1.1\r\n"), "\(sent[0])")
        #expect(sent[0].lowercased().contains("\r\naccept-language: en-gb\r\n"), "\(sent[0])")
        #expect(!sent[1].contains("ForceAuth") && !sent[1].lowercased().contains("accept-language: en-gb"), "only the START call: \(sent[1])")
        #expect(log.items == ["START_AUTHENTICATE service Login", "second saw authIndexType=service&authIndexValue=Login&ForceAuth=true",
                             "AUTHENTICATE service Login", "LOGOUT - -"])
    }

    @Test func resumeURIsAreCheckedBeforeSendingAndAnUsedIdIsATypedError() async throws {
        let bed = try Testbed.current
        let (g, _) = try bed.startGatewayWithBank(configForURL: { MagicLinkTests.config($0) })
        let server = try RawUpstream(responses: [http(500, "{}")])
        defer { server.stop() }
        // Pointed at the scripted server: a link for the gateway is another port, refused unsent.
        let elsewhere = Self.client(server.url)
        let foreign = "\(Kit.publicURL(g))/am/XUI/?suspendedId=abc"
        await #expect(throws: TxGateClientError.invalidResumeURI("\(Kit.publicURL(g)) is not the configured server \(server.url)")) {
            try await elsewhere.resume(resumeURI: foreign)
        }
        await #expect(throws: TxGateClientError.invalidResumeURI("no suspendedId in \(server.url)/am/XUI/?realm=/")) {
            try await elsewhere.resume(resumeURI: "\(server.url)/am/XUI/?realm=/")
        }
        #expect(server.receivedRequests.isEmpty)
        let authenticateCalls = g.logLines().filter { ($0["path"] as? String)?.hasSuffix("/authenticate") == true }
        #expect(authenticateCalls.isEmpty, "\(authenticateCalls)")

        let client = Self.client(Kit.publicURL(g))
        do {
            _ = try await client.resume(resumeURI: "\(Kit.publicURL(g))/am/XUI/?realm=/&suspendedId=unknownid")
            Issue.record("an unknown suspendedId was accepted")
        } catch TxGateClientError.suspendedSessionNotFound(let f) {
            #expect(f.code == 401 && f.isSuspendedSessionNotFound)
        }
    }
}

/// A whole HTTP/1.1 response with a JSON body.
func http(_ status: Int, _ body: String, _ headers: [String] = []) -> [UInt8] {
    let head = (["HTTP/1.1 \(status) X", "Content-Type: application/json", "Content-Length: \(body.utf8.count)"] + headers)
        .joined(separator: "\r\n")
    return Array((head + "\r\n\r\n" + body).utf8)
}

final class Recorder: @unchecked Sendable {
    // @unchecked: `list` is only touched under `lock`.
    private let lock = NSLock()
    private var list: [String] = []
    func add(_ s: String) { lock.withLock { list.append(s) } }
    var items: [String] { lock.withLock { list } }
}
