import EventHTTP
import Foundation
import Testing
import TestSupport
import TxGateCore
@testable import TxGate

/// `ChallengePhase` alone, after a decision with advices (set by `Given`): the challenge in
/// each of its forms (WIRE.md §3): SSOADVICE for SDKs, RFC 9470 for bearer clients, the login
/// page for browsers (303 for a form's POST, 307 else; on `/-/authz`, what the proxy passes on).
@Suite struct ChallengePhaseTests {
    static let txid = "3f2b8c1e-0000-4000-8000-000000000001"
    static let transaction = Advices([(Advices.transaction, [txid])])
    static let stepUp = Advices([(Advices.authenticateToService, ["/:Strong"])])
    static let alice = Subject(uid: "alice", realm: "/", journeys: ["Login"], attributes: [:], token: "tok")
    static let policies = PolicySet([
        Policy(name: "transfer", resources: [ResourcePattern("/transfer")!], actions: ["POST"], subjects: .authenticated,
               requirement: .transaction(TransactionRule(journey: "Confirm"))),
        Policy(name: "admin", resources: [ResourcePattern("/admin")!], actions: ["GET"], subjects: .authenticated,
               requirement: .stepUp(journey: "Strong", maxAgeS: 300)),
    ])

    /// The phase after a decision: `advices`, allowing `allowed`; the subject and bearer token as given.
    static func server(_ advices: Advices, allowed: [String: Bool] = [:], subject: Subject? = alice, bearer: String? = nil,
                       proxy: ForwardedRequest.Proxy? = nil, bearerForm: String = "rfc9470") throws -> LoopServer {
        try PhaseServer.start(policies: policies) { _ in
            [Given { ctx in
                ctx.path = String(ctx.head.target.prefix { $0 != "?" })
                ctx.subject = subject
                ctx.bearer = bearer
                ctx.forwardedBy = proxy
                ctx.decision = Decision(resource: "https://gw.example" + ctx.path, actions: allowed, advices: advices)
            },
             ChallengePhase(publicURL: "https://gw.example", amURI: "https://gw.example/am/", bearerForm: bearerForm, parking: nil),
             Report()]
        }
    }

    static let sdk = [("x-authenticate-response", "header")]
    static let browserForm = [("Accept", "text/html"), ("Sec-Fetch-Mode", "navigate"), ("Content-Type", "application/x-www-form-urlencoded")]

    @Test func anAllowedRequestOrOneWithoutAdvicesGoesOn() throws {
        let allowed = try Self.server(Self.transaction, allowed: ["POST": true])
        defer { allowed.stop() }
        #expect(try Reported(RawHTTPClient.fetch(port: allowed.port, "POST", "/transfer", headers: Self.sdk, body: [])).path == "/transfer")
        let none = try Self.server(Advices([]))
        defer { none.stop() }
        #expect(try Reported(RawHTTPClient.fetch(port: none.port, "POST", "/transfer", headers: Self.sdk, body: [])).path == "/transfer")
    }

    @Test func anSDKGetsSSOADVICEAndTheAdvicesInTheBody() throws {
        let server = try Self.server(Self.transaction)
        defer { server.stop() }
        let r = try RawHTTPClient.fetch(port: server.port, "POST", "/transfer", headers: Self.sdk, body: [])
        #expect(r.status == 401)
        #expect(r.header("WWW-Authenticate") == Challenge.ssoAdviceHeader(realm: "/", advices: Self.transaction, amURI: "https://gw.example/am/"))
        #expect(r.header("Cache-Control") == "no-store")
        let body = try r.json()
        #expect(body["message"] as? String == "this request needs its own approval")
        #expect(body["advices"] as? [String: [String]] == [Advices.transaction: [Self.txid]])
        #expect(body["am_uri"] as? String == "https://gw.example/am/")
    }

    @Test func aBearerClientGetsRFC9470WithTheJourneyAndTheTxId() throws {
        let server = try Self.server(Self.transaction, bearer: "at")
        defer { server.stop() }
        let r = try RawHTTPClient.fetch(port: server.port, "POST", "/transfer", body: [])
        #expect(r.status == 401)
        #expect(r.headerValues("WWW-Authenticate") == [Challenge.bearerStepUp(acr: "Confirm", txid: Self.txid)], "\(r.headerSummary)")

        let stepUp = try Self.server(Self.stepUp, bearer: "at")
        defer { stepUp.stop() }
        let s = try RawHTTPClient.fetch(port: stepUp.port, "GET", "/admin")
        #expect(s.headerValues("WWW-Authenticate") == [Challenge.bearerStepUp(acr: "Strong", txid: nil, maxAge: 300)], "\(s.headerSummary)")
        #expect(try s.json()["message"] as? String == "step-up authentication required")
    }

    @Test func aBearerClientGetsBothFormsOrSSOADVICEAsConfigured() throws {
        let both = try Self.server(Self.transaction, bearer: "at", bearerForm: "both")
        defer { both.stop() }
        let r = try RawHTTPClient.fetch(port: both.port, "POST", "/transfer", body: [])
        #expect(r.headerValues("WWW-Authenticate").count == 2)
        #expect(r.headerValues("WWW-Authenticate").first?.hasPrefix("Bearer error=\"insufficient_user_authentication\"") == true)
        #expect(r.headerValues("WWW-Authenticate").last?.hasPrefix("SSOADVICE ") == true)
        let sso = try Self.server(Self.transaction, bearer: "at", bearerForm: "ssoadvice")
        defer { sso.stop() }
        let s = try RawHTTPClient.fetch(port: sso.port, "POST", "/transfer", body: [])
        #expect(s.headerValues("WWW-Authenticate").count == 1 && s.header("WWW-Authenticate")?.hasPrefix("SSOADVICE ") == true)
    }

    @Test func aBearerTokenWithoutASubjectIsAnInvalidToken() throws {
        let server = try Self.server(Self.transaction, subject: nil, bearer: "expired")
        defer { server.stop() }
        let r = try RawHTTPClient.fetch(port: server.port, "POST", "/transfer", body: [])
        #expect(r.status == 401)
        #expect(r.header("WWW-Authenticate") == #"Bearer error="invalid_token", error_description="The access token is not valid""#)
        #expect(try r.json()["message"] as? String == "authentication required")
    }

    @Test func aBrowserGoesToTheLoginPage307OrWithAFormsPOST303() throws {
        let server = try Self.server(Self.transaction)
        defer { server.stop() }
        let goto = "https://gw.example/transfer?ref=1&_txid=\(Self.txid)"
        let login = Challenge.loginRedirect(loginPage: "https://gw.example/am/XUI/", goto: goto, realm: "/", advices: Self.transaction)
        let form = try RawHTTPClient.fetch(port: server.port, "POST", "/transfer?ref=1", headers: Self.browserForm, body: Array("a=1".utf8))
        #expect(form.status == 303, "a form's POST must not be re-sent to the login page:\n\(form)")
        #expect(form.header("Location") == login)
        let script = try RawHTTPClient.fetch(port: server.port, "POST", "/transfer?ref=1", headers: [("Content-Type", "application/json")],
                                             body: Array("{}".utf8))
        #expect(script.status == 307 && script.header("Location") == login, "\(script)")
    }

    @Test func aBrowserWithoutASessionSignsInAndComesBackToTheRequest() throws {
        let server = try Self.server(Advices([(Advices.authenticateToService, ["/:Login"])]), subject: nil)
        defer { server.stop() }
        let r = try RawHTTPClient.fetch(port: server.port, "GET", "/accounts?x=1")
        #expect(r.status == 307)
        #expect(r.header("Location") == "https://gw.example/am/XUI/?goto=\(Query.encode("https://gw.example/accounts?x=1"))")
        #expect(try r.json()["message"] as? String == "authentication required")
    }

    @Test func onForwardAuthTheProxyGetsWhatItPassesOn() throws {
        for (proxy, status) in [(ForwardedRequest.Proxy.traefik, 302), (.nginx, 401)] {
            let server = try Self.server(Self.transaction, proxy: proxy)
            defer { server.stop() }
            let r = try RawHTTPClient.fetch(port: server.port, "POST", "/transfer", headers: Self.browserForm, body: Array("a=1".utf8))
            #expect(r.status == status, "\(proxy):\n\(r)")
            #expect(r.header("Location")?.hasPrefix("https://gw.example/am/XUI/?goto=") == true, "\(proxy): \(r.headerSummary)")
        }
    }
}
