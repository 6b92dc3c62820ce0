@testable import EventHTTP
import Testing

/// The connection's lifecycle without sockets (`ServerConnectionState`): each row is a request
/// as it happened on the wire, and what the connection must do. ServerConnectionTests and
/// PipelinedRequestTests check the same rules through a socket.
@Suite struct ServerConnectionStateTests {
    /// One exchange: the request, how far its body got before the answer, the answer, and
    /// what the connection must do after it.
    struct Exchange: CustomTestStringConvertible, Sendable {
        let name: String
        var wantsKeepAlive = true
        var hasBody = false
        /// The body had all arrived when the response started.
        var bodyRead = true
        /// The server started draining (a reload or a shutdown) during the exchange.
        var drainingMidway = false
        var drainingAtStart = false
        var unframedBody = false
        var layerError = false
        var isTLS = false
        var nextBuffered = false
        /// The exchange ended while its handler was still running.
        var endedInHandler = false
        /// What the response must say and what follows it.
        let closes: Bool
        let after: ServerConnectionState.AfterExchange

        var testDescription: String { name }
    }

    static let exchanges: [Exchange] = [
        Exchange(name: "keep-alive GET", closes: false, after: .awaitNext(readNow: false)),
        Exchange(name: "keep-alive POST, body read", hasBody: true, closes: false, after: .awaitNext(readNow: false)),
        Exchange(name: "a pipelined request waiting: read on the next turn", nextBuffered: true,
                 closes: false, after: .awaitNext(readNow: true)),
        Exchange(name: "answered inside the handler: its reading loop goes on", nextBuffered: true, endedInHandler: true,
                 closes: false, after: .awaitNext(readNow: false)),
        Exchange(name: "the client asked to close", wantsKeepAlive: false, closes: true, after: .close),
        Exchange(name: "answered before the body: linger", hasBody: true, bodyRead: false, closes: true, after: .linger),
        Exchange(name: "answered before the body, TLS: close", hasBody: true, bodyRead: false, isTLS: true,
                 closes: true, after: .close),
        Exchange(name: "answered before the body, next bytes buffered: they are body, never a request", hasBody: true,
                 bodyRead: false, nextBuffered: true, closes: true, after: .linger),
        Exchange(name: "draining when it started", drainingAtStart: true, closes: true, after: .close),
        Exchange(name: "draining from the middle", drainingMidway: true, closes: true, after: .close),
        Exchange(name: "a body streamed to HTTP/1.0 ends with the connection", unframedBody: true, closes: true, after: .close),
        Exchange(name: "the layer's own error: linger", layerError: true, closes: true, after: .linger),
        Exchange(name: "the layer's own error, TLS: close", layerError: true, isTLS: true, closes: true, after: .close),
    ]

    @Test(arguments: exchanges)
    func afterAnExchange(_ x: Exchange) {
        var s = ServerConnectionState()
        if x.layerError {
            s.layerFails()
        } else {
            s.requestStarted(wantsKeepAlive: x.wantsKeepAlive, draining: x.drainingAtStart, hasBody: x.hasBody, expectsContinue: false)
            if x.hasBody && x.bodyRead { s.bodyComplete() }
        }
        if x.endedInHandler { s.dispatchBegins() }
        let draining = x.drainingAtStart || x.drainingMidway
        let closes = s.responseStarts(unframedBody: x.unframedBody, draining: draining)
        #expect(closes == x.closes)
        s.responseWritten()
        #expect(s.responseComplete)
        let after = s.exchangeEnded(layerError: x.layerError, draining: draining, isTLS: x.isTLS, inputBuffered: x.nextBuffered)
        #expect(after == x.after)
        switch x.after {
        case .awaitNext: #expect(s.phase == .head)
        case .linger: #expect(s.phase == .lingering)
        case .close: #expect(s.phase != .closed, "closing is the adapter's (`close`)")
        }
        let closed = s.close(), again = s.close()
        #expect(closed && !again, "a connection closes once")
    }

    @Test func aScheduledReadRunsOnceAndOnlyForAHead() {
        var s = ServerConnectionState()
        func pipelined() -> ServerConnectionState.AfterExchange {
            s.requestStarted(wantsKeepAlive: true, draining: false, hasBody: false, expectsContinue: false)
            return s.exchangeEnded(layerError: false, draining: false, isTLS: false, inputBuffered: true)
        }
        #expect(pipelined() == .awaitNext(readNow: true))
        // Another exchange ending before the turn comes schedules nothing more.
        #expect(pipelined() == .awaitNext(readNow: false))
        let runs = s.readScheduledRuns()
        #expect(runs && !s.readScheduled)
        // The turn comes after the connection closed: nothing to read.
        #expect(pipelined() == .awaitNext(readNow: true))
        _ = s.close()
        let runsClosed = s.readScheduledRuns()
        #expect(!runsClosed)
    }

    @Test func nothingBufferedIsNotLookedAt() {
        var s = ServerConnectionState()
        s.requestStarted(wantsKeepAlive: false, draining: false, hasBody: false, expectsContinue: false)
        var looked = false
        _ = s.exchangeEnded(layerError: false, draining: false, isTLS: false, inputBuffered: { looked = true; return true }())
        #expect(!looked, "a connection that closes does not read its input's length")
    }

    /// `100 Continue`: owed only to a request with a body that asked for it, sent once and only
    /// while the body is awaited, never after an answer given without it.
    @Test(arguments: [
        (hasBody: true, expects: true, wantedWhileBody: true, sent: true),
        (hasBody: true, expects: false, wantedWhileBody: true, sent: false),
        (hasBody: false, expects: true, wantedWhileBody: false, sent: false),
        (hasBody: true, expects: true, wantedWhileBody: false, sent: false),
    ])
    func continueIsSentOnceWhileTheBodyIsAwaited(_ c: (hasBody: Bool, expects: Bool, wantedWhileBody: Bool, sent: Bool)) {
        var s = ServerConnectionState()
        s.requestStarted(wantsKeepAlive: true, draining: false, hasBody: c.hasBody, expectsContinue: c.expects)
        if !c.wantedWhileBody && c.hasBody { s.bodyComplete() }
        let sent = s.bodyWanted(), again = s.bodyWanted()
        #expect(sent == c.sent)
        #expect(!again, "sent once at most")
        #expect(!s.continueExpected)
    }

    @Test func theLayersErrorForgetsAnOwedContinue() {
        var s = ServerConnectionState()
        s.requestStarted(wantsKeepAlive: true, draining: false, hasBody: true, expectsContinue: true)
        s.layerFails()
        let sent = s.bodyWanted()
        #expect(!s.continueExpected && !sent && !s.keepAlive && s.phase == .handling)
    }

    @Test(arguments: [
        (phase: ServerConnectionState.Phase.head, buffered: false, timeout: ServerConnectionState.ReadTimeout.close),
        (phase: .head, buffered: true, timeout: .headTooSlow),
        (phase: .body, buffered: false, timeout: .bodyTooSlow),
        (phase: .body, buffered: true, timeout: .bodyTooSlow),
        (phase: .handling, buffered: true, timeout: .close),
        (phase: .lingering, buffered: true, timeout: .close),
    ])
    func aReadTimeout(_ c: (phase: ServerConnectionState.Phase, buffered: Bool, timeout: ServerConnectionState.ReadTimeout)) {
        #expect(Self.state(in: c.phase).readTimedOut(inputBuffered: c.buffered) == c.timeout)
    }

    /// A client that half-closes after its request still reads the answer, and the connection
    /// closes after it; half-closed at any other time, it closes now.
    @Test func aHalfClosedClientIsAnsweredThenClosed() {
        var s = ServerConnectionState()
        s.requestStarted(wantsKeepAlive: true, draining: false, hasBody: false, expectsContinue: false)
        let stays = s.peerClosed(exchangeOpen: true)
        let closes = s.responseStarts(unframedBody: false, draining: false)
        let after = s.exchangeEnded(layerError: false, draining: false, isTLS: false, inputBuffered: false)
        #expect(stays && closes && after == .close, "answered with Connection: close, then closed")

        for phase in [ServerConnectionState.Phase.head, .body, .lingering] {
            var other = Self.state(in: phase)
            let otherStays = other.peerClosed(exchangeOpen: true)
            #expect(!otherStays, "\(phase)")
        }
        var noExchange = Self.state(in: .handling)
        let noExchangeStays = noExchange.peerClosed(exchangeOpen: false)
        #expect(!noExchangeStays)
    }

    /// A state in `phase`, reached through the transitions that lead there.
    static func state(in phase: ServerConnectionState.Phase) -> ServerConnectionState {
        var s = ServerConnectionState()
        switch phase {
        case .head: break
        case .body: s.requestStarted(wantsKeepAlive: true, draining: false, hasBody: true, expectsContinue: false)
        case .handling: s.requestStarted(wantsKeepAlive: true, draining: false, hasBody: false, expectsContinue: false)
        case .lingering:
            s.layerFails()
            _ = s.exchangeEnded(layerError: true, draining: false, isTLS: false, inputBuffered: false)
        case .closed: _ = s.close()
        }
        #expect(s.phase == phase)
        return s
    }
}
