import EventHTTP
import Foundation
import Testing
import TestSupport
import TxGateCore
@testable import TxGate

/// `ReadBodyPhase` alone: it waits for the body (sending the `100 Continue` a client may wait
/// for) only where something needs it, and a request decided without it never has its body
/// read, nor its 100 sent.
@Suite struct ReadBodyPhaseTests {
    static let alice = Subject(uid: "alice", realm: "/", journeys: ["Login"], attributes: [:], token: "tok")
    static let policies = PolicySet([
        Policy(name: "bound", resources: [ResourcePattern("/bound")!], actions: ["POST"], subjects: .authenticated,
               requirement: .transaction(TransactionRule(journey: "Confirm", bindFields: ["/amount"]))),
        Policy(name: "unbound", resources: [ResourcePattern("/unbound")!], actions: ["POST"], subjects: .authenticated,
               requirement: .transaction(TransactionRule(journey: "Confirm"))),
    ])

    static func server(_ need: ReadBodyPhase.Need, subject: Subject? = nil, limits: ServerLimits = ServerLimits()) throws -> LoopServer {
        try PhaseServer.start(limits: limits, policies: policies) { _ in
            [Given { ctx in
                ctx.path = String(ctx.head.target.prefix { $0 != "?" })
                ctx.subject = subject
            }, ReadBodyPhase(need), Report()]
        }
    }

    /// Sends a POST head that expects `100 Continue`; the body is not sent.
    static func expectContinue(_ client: RawHTTPClient, _ target: String, length: Int) throws {
        try client.send("POST \(target) HTTP/1.1\r\nHost: t\r\nContent-Length: \(length)\r\nExpect: 100-continue\r\n\r\n")
    }

    /// The body asked for: a 100 Continue comes first (else this throws); the body is then
    /// sent, and the final answer read.
    static func answer(_ client: RawHTTPClient, body: String) throws -> Reported {
        let status = try client.readLine()
        guard status == "HTTP/1.1 100 Continue" else {
            throw HarnessError("no 100 Continue, but: \(status)")
        }
        #expect(try client.readLine() == "")
        try client.send(body)
        return try Reported(client.readResponse(method: "POST"))
    }

    @Test func beforeTheUpstreamTheBodyIsAskedForAndWaitedFor() throws {
        let server = try Self.server(.always)
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        defer { client.close() }
        try Self.expectContinue(client, "/x", length: 5)
        let r = try Self.answer(client, body: "hello")
        #expect(r.bodyComplete && r.body == "hello")
    }

    @Test func beforeTheAuthenticationEndpointsOnlyAnAmRequestsBodyIsRead() throws {
        let server = try Self.server(.forAuthEndpoints)
        defer { server.stop() }
        let am = try RawHTTPClient(port: server.port)
        defer { am.close() }
        try Self.expectContinue(am, "/am/json/realms/root/authenticate", length: 2)
        #expect(try Self.answer(am, body: "{}").body == "{}")

        let other = try RawHTTPClient(port: server.port)
        defer { other.close() }
        try Self.expectContinue(other, "/transfer", length: 5)
        let r = try other.readResponse(method: "POST")
        #expect(r.interim.isEmpty, "a 100 Continue for a body nobody reads")
        #expect(r.status == 200 && r.header("Connection") == "close", "answered before the body: the connection ends\n\(r)")
        let reported = try Reported(r)
        #expect(!reported.bodyComplete && reported.body.isEmpty)
    }

    @Test func beforeTheDecisionOnlyABoundTransactionsBodyIsReadAndOnlyWithASubject() throws {
        let withSubject = try Self.server(.forBoundTransaction, subject: Self.alice)
        defer { withSubject.stop() }
        let bound = try RawHTTPClient(port: withSubject.port)
        defer { bound.close() }
        try Self.expectContinue(bound, "/bound", length: 12)
        #expect(try Self.answer(bound, body: #"{"amount":1}"#).bodyComplete)
        for target in ["/unbound", "/elsewhere"] {
            let client = try RawHTTPClient(port: withSubject.port)
            defer { client.close() }
            try Self.expectContinue(client, target, length: 12)
            let r = try client.readResponse(method: "POST")
            #expect(try r.interim.isEmpty && !Reported(r).bodyComplete, "\(target)")
        }
        // Without a subject, the login challenge goes out at once: nothing to bind yet.
        let anonymous = try Self.server(.forBoundTransaction)
        defer { anonymous.stop() }
        let client = try RawHTTPClient(port: anonymous.port)
        defer { client.close() }
        try Self.expectContinue(client, "/bound", length: 12)
        let r = try client.readResponse(method: "POST")
        #expect(try r.interim.isEmpty && !Reported(r).bodyComplete)
    }

    @Test func aBodyThatArrivedWithTheHeadCostsNoWait() throws {
        let server = try Self.server(.always)
        defer { server.stop() }
        let r = try Reported(RawHTTPClient.fetch(port: server.port, "POST", "/x", body: Array("now".utf8)))
        #expect(r.bodyComplete && r.body == "now")
    }

    @Test func aBodyOverTheLimitIsAnsweredByTheServerAndTheRequestEndsThere() throws {
        let server = try Self.server(.always, limits: ServerLimits(maxBodyBytes: 10))
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        defer { client.close() }
        try client.send("POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        try client.send("8\r\n, world!\r\n0\r\n\r\n")
        let r = try client.readResponse(method: "POST")
        #expect(r.status == 413, "\(r)")
        #expect(r.header("X-Request-Id") == nil, "the server's own answer, not a phase's")
        #expect(client.serverClosed(within: 3))
    }
}
