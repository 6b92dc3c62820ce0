import EventHTTP
import Foundation
import HTTPCore
import Synchronization
import Testing
import TestSupport

/// A server connection's life (ServerConnection): keep-alive and its end, `100 Continue` sent
/// only when the application asks for the body, an answer given before the body arrived (the
/// connection then closes, lingering so that the client reads the answer rather than a reset),
/// and pipelined requests answered in order, one at a time.
@Suite struct ServerConnectionTests {
    /// Answers every request with its connection's number, at once.
    static func connectionNumbers() throws -> LoopServer {
        try LoopServer(limits: ServerLimits()) { ex in ex.respond(status: 200, body: Array(String(ex.connectionId).utf8)) }
    }

    /// A keep-alive connection's bodiless requests share one empty `Body` (no allocation each),
    /// but never one that an earlier exchange still holds or wrote into.
    @Test func bodilessRequestsShareABodyOnlyWhenNothingHoldsOrFilledIt() throws {
        final class Held: @unchecked Sendable { var exchanges: [ServerExchange] = [] }  // touched on the loop only
        let held = Held()
        let server = try LoopServer(limits: ServerLimits()) { ex in
            let answer = "\(ObjectIdentifier(ex.body).hashValue) \(ex.body.count)"
            switch ex.head.path {
            case "/fill": ex.body.append("left behind")
            case "/hold": held.exchanges.append(ex)
            default: break
            }
            ex.respond(status: 200, body: Array(answer.utf8))
        }
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        defer { client.close() }
        func body(_ path: String) throws -> (id: String, count: String) {
            let parts = try client.request("GET", path).bodyText.split(separator: " ").map(String.init)
            return (parts[0], parts[1])
        }
        let first = try body("/"), second = try body("/")
        #expect(first.count == "0" && second.count == "0")
        #expect(first.id == second.id, "the first request's body, released, serves the second")
        let filled = try body("/fill")
        let afterFill = try body("/")
        #expect(afterFill.count == "0" && afterFill.id != filled.id, "a body written into is not handed on")
        let heldBody = try body("/hold")
        let afterHold = try body("/")
        #expect(afterHold.count == "0" && afterHold.id != heldBody.id, "a body an exchange still holds is not handed on")
        let post = try client.request("POST", "/", body: Array("abc".utf8)).bodyText
        #expect(post.hasSuffix(" 3"))
        #expect(try body("/").count == "0")
    }

    @Test func anHTTP11ConnectionServesRequestsUntilTheClientSaysClose() throws {
        let server = try Self.connectionNumbers()
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        defer { client.close() }
        let answers = try (0..<3).map { _ in try client.request("GET", "/") }
        #expect(Set(answers.map(\.bodyText)).count == 1, "one connection: \(answers.map(\.bodyText))")
        #expect(answers.allSatisfy { $0.header("Connection") == nil }, "\(answers.map(\.headerSummary))")
        #expect(!client.serverClosed(within: 0.1))
        let last = try client.request("GET", "/", headers: [("Connection", "close")])
        #expect(last.header("Connection") == "close" && last.bodyText == answers[0].bodyText)
        #expect(client.serverClosed(within: 3))
    }

    @Test func anHTTP10ConnectionIsKeptOnlyWhenItAsks() throws {
        let server = try Self.connectionNumbers()
        defer { server.stop() }
        let once = try RawHTTPClient(port: server.port)
        defer { once.close() }
        try once.send("GET / HTTP/1.0\r\n\r\n")
        #expect(try once.readResponse().header("Connection") == "close")
        #expect(once.serverClosed(within: 3))

        let kept = try RawHTTPClient(port: server.port)
        defer { kept.close() }
        try kept.send("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        let first = try kept.readResponse()
        #expect(first.header("Connection") == "keep-alive")
        try kept.send("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        #expect(try kept.readResponse().bodyText == first.bodyText)
    }

    /// A body of unknown length streamed to an HTTP/1.0 client has no framing but the end of the
    /// connection: the answer says `Connection: close` even to a client that asked to keep it,
    /// and the server closes after it; an HTTP/1.1 client gets it chunked and keeps the connection.
    @Test func aBodyStreamedToAnHTTP10ClientEndsWithTheConnection() throws {
        let server = try LoopServer(limits: ServerLimits()) { ex in
            ex.startResponse(status: 200, headers: HTTPHeaders(), framing: .stream)
            ex.writeBody(Array("streamed".utf8))
            ex.finish()
        }
        defer { server.stop() }
        let old = try RawHTTPClient(port: server.port)
        defer { old.close() }
        try old.send("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        let r = try old.readResponse()
        #expect(r.header("Connection") == "close" && r.header("Transfer-Encoding") == nil && r.bodyText == "streamed", "\(r.headerSummary)")

        let current = try RawHTTPClient(port: server.port)
        defer { current.close() }
        let first = try current.request("GET", "/")
        #expect(first.header("Transfer-Encoding") == "chunked" && first.header("Connection") == nil && first.bodyText == "streamed")
        #expect(try current.request("GET", "/").bodyText == "streamed", "kept alive")
    }

    /// A server whose handler reads the body (and answers with it) when the path says so, and
    /// answers at once without it otherwise.
    static func bodyOnDemand() throws -> LoopServer {
        try LoopServer(limits: ServerLimits(maxBodyBytes: 64 << 20)) { ex in
            guard ex.head.path == "/read" else {
                ex.respond(status: 403, body: Array("no".utf8))
                return
            }
            ex.whenBodyComplete { complete in
                if complete { ex.respond(status: 200, body: Array(String(ex.body.count).utf8)) }
            }
        }
    }

    @Test func continueIsSentWhenTheBodyIsAskedForAndNeverWhenTheAnswerComesWithoutIt() throws {
        let server = try Self.bodyOnDemand()
        defer { server.stop() }
        let reading = try RawHTTPClient(port: server.port)
        defer { reading.close() }
        try reading.send("POST /read HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
        #expect(try reading.readLine() == "HTTP/1.1 100 Continue")
        #expect(try reading.readLine() == "")
        try reading.send("hello")
        let read = try reading.readResponse(method: "POST")
        #expect(read.status == 200 && read.bodyText == "5" && read.header("Connection") == nil, "\(read)")
        // Read whole: the connection goes on.
        #expect(try reading.request("GET", "/read").status == 200)

        let refusing = try RawHTTPClient(port: server.port)
        defer { refusing.close() }
        try refusing.send("POST /refuse HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
        #expect(try refusing.readLine() == "HTTP/1.1 403 Forbidden", "the answer, with no 100 before it")
        var fields: [String] = []
        while case let line = try refusing.readLine(), !line.isEmpty { fields.append(line) }
        #expect(fields.contains("Connection: close"), "\(fields)")
        #expect(try refusing.readExactly(2) == Array("no".utf8))
        try refusing.send("hello")
        #expect(refusing.serverClosed(within: 3), "answered before the body: the body is never taken for a next request")
    }

    @Test func anExpectationOtherThanContinueIs417() throws {
        let server = try Self.bodyOnDemand()
        defer { server.stop() }
        let r = try RawHTTPClient.fetch(port: server.port, "POST", "/read", headers: [("Expect", "x-magic")], body: Array("a".utf8))
        #expect(r.status == 417, "\(r)")
    }

    @Test func afterAnAnswerBeforeTheBodyTheServerLingersTakingWhatTheClientStillSends() throws {
        let server = try Self.bodyOnDemand()
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        defer { client.close() }
        let part = [UInt8](repeating: 0x78, count: 64 << 10)
        try client.send(Array("POST /refuse HTTP/1.1\r\nHost: t\r\nContent-Length: \(21 * part.count)\r\n\r\n".utf8) + part)
        let r = try client.readResponse(method: "POST")
        #expect(r.status == 403 && r.bodyText == "no", "\(r)")
        #expect(r.header("Connection") == "close")
        // A client that sends its whole body before it reads (most do) is still sending: the
        // server half-closed and drains it. Had it closed, the kernel would answer these bytes
        // with a reset, which takes the answer from a client that has not read it yet.
        for _ in 0..<20 { try client.send(part) }
        #expect(client.serverClosed(within: 1), "the server's side is closed (it half-closed after its answer)")
        #expect(server.openConnections == 1, "while it still takes what the client sends")
        client.close()
        #expect(Timing.poll(timeout: 3) { server.openConnections == 0 }, "lingering ends with the client's end")
    }

    @Test func pipelinedRequestsAreHandledOneAtATimeAndAnsweredInOrder() throws {
        let events = Mutex<[String]>([])
        /// The timers that answer later, kept until the server stops (used on its loop only).
        final class Timers { var held: [LoopTimer] = [] }
        let timers = Timers()
        let server = try LoopServer(limits: ServerLimits()) { ex in
            let target = ex.head.target
            events.withLock { $0.append("handle \(target)") }
            let answer = {
                events.withLock { $0.append("answer \(target)") }
                ex.respond(status: 200, body: Array(target.utf8))
            }
            // The first one answers last, from a later turn of the loop.
            if target == "/1" {
                let timer = LoopTimer(loop: ex.loop) { answer() }
                timers.held.append(timer)
                timer.schedule(afterMs: 50)
            } else {
                answer()
            }
        }
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        defer { client.close() }
        try client.send("GET /1 HTTP/1.1\r\nHost: t\r\n\r\nGET /2 HTTP/1.1\r\nHost: t\r\n\r\nGET /3 HTTP/1.1\r\nHost: t\r\n\r\n")
        let bodies = try (0..<3).map { _ in try client.readResponse().bodyText }
        #expect(bodies == ["/1", "/2", "/3"])
        #expect(events.withLock { $0 } == ["handle /1", "answer /1", "handle /2", "answer /2", "handle /3", "answer /3"])
    }

    /// A request that arrives whole into an empty input is parsed straight from the loop's read
    /// buffer; every other arrival goes through the input as before. Both are answered alike:
    /// whole, in parts, with a body behind it, several at once, behind empty lines, around the
    /// read buffer's size (16 KiB), and a malformed one.
    @Test func requestsReadWholeOrInPartsAreAnsweredAlike() throws {
        let server = try LoopServer(limits: ServerLimits(maxHeaderBytes: 64 << 10)) { ex in
            ex.whenBodyComplete { _ in
                let pad = ex.head.headers.first("X-Pad")?.utf8.count ?? 0
                ex.respond(status: 200, body: Array("\(ex.head.method) \(ex.head.target) \(ex.body.count) \(pad)".utf8))
            }
        }
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        defer { client.close() }
        func head(_ target: String, padTo total: Int? = nil) -> String {
            let bare = "GET \(target) HTTP/1.1\r\nHost: t\r\nX-Pad: \r\n\r\n"
            let pad = max(0, (total ?? 0) - bare.utf8.count)
            return "GET \(target) HTTP/1.1\r\nHost: t\r\nX-Pad: \(String(repeating: "p", count: pad))\r\n\r\n"
        }
        func answer() throws -> String { try client.readResponse().bodyText }

        try client.send(head("/whole"))
        #expect(try answer() == "GET /whole 0 0")
        let parts = head("/parts")
        try client.send(String(parts.prefix(10)))
        Thread.sleep(forTimeInterval: 0.05)
        try client.send(String(parts.dropFirst(10)))
        #expect(try answer() == "GET /parts 0 0")
        try client.send("POST /body HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello")
        #expect(try answer() == "POST /body 5 0")
        try client.send(head("/a") + head("/b"))
        #expect(try answer() == "GET /a 0 0")
        #expect(try answer() == "GET /b 0 0")
        try client.send("\r\n" + head("/after-empty-line"))
        #expect(try answer() == "GET /after-empty-line 0 0")
        for size in [16_383, 16_384, 16_385, 40_000] {
            let big = head("/big", padTo: size)
            #expect(big.utf8.count == size)
            try client.send(big)
            let pad = size - head("/big").utf8.count
            #expect(try answer() == "GET /big 0 \(pad)", "a head of \(size) bytes")
        }
        try client.send("GET /bad HTTP/1.1\r\nBad Name: x\r\n\r\n")
        let bad = try client.readResponse()
        #expect(bad.status == 400 && bad.bodyText.contains("malformed header name"), "\(bad)")
    }
}
