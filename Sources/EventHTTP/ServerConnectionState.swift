/// The life of one HTTP/1.1 server connection as a value: what it is doing, and what it must do
/// next. `ServerConnection` is the thin adapter around it: it owns the socket, the buffers and
/// the parsing, reports what happened (a request started, its body arrived, a response started
/// or ended, a read timed out, the client half-closed) and carries out the action the state
/// answers. Every rule of the lifecycle is here, tested without sockets
/// (Tests/EventHTTPTests/ServerConnectionStateTests.swift): keep-alive and its end, pipelining,
/// `100 Continue`, an answer given before the body was read, lingering close, draining.
/// swift-nio's `HTTPServerPipelineHandler` keeps its state the same way.
struct ServerConnectionState {
    enum Phase: Equatable {
        /// Waiting for the next request head, or reading it.
        case head
        /// The head is accepted; its body is arriving (the application may already have the
        /// exchange: it decides before the rest of the body).
        case body
        /// The request is read; the application answers.
        case handling
        /// Answered before the request was all read: half-closed, discarding what the client
        /// still sends, then closed.
        case lingering
        case closed
    }

    private(set) var phase = Phase.head
    /// The connection stays open after this exchange.
    private(set) var keepAlive = true
    /// The request asked for `100 Continue`, which has not been sent: it is sent when the
    /// application asks for the body, never when it answers without it.
    private(set) var continueExpected = false
    /// The response is all written; the exchange ends once the output has drained.
    private(set) var responseComplete = false
    /// The application's handler is running for the exchange just dispatched.
    private(set) var dispatching = false
    /// A turn of the loop is scheduled to read a request already buffered.
    private(set) var readScheduled = false

    // MARK: Reading a request

    /// A head was parsed and accepted (its size, framing and expectation checked): its body
    /// is read next, or the request is handled at once. `wantsKeepAlive`: what the request
    /// asked for (its version and `Connection`); a draining server keeps nothing.
    /// `expectsContinue`: `Expect: 100-continue` on an HTTP/1.1 request.
    mutating func requestStarted(wantsKeepAlive: Bool, draining: Bool, hasBody: Bool, expectsContinue: Bool) {
        keepAlive = wantsKeepAlive && !draining
        continueExpected = hasBody && expectsContinue
        responseComplete = false
        phase = hasBody ? .body : .handling
    }

    /// The body has all arrived.
    mutating func bodyComplete() {
        phase = .handling
        continueExpected = false
    }

    /// The application waits for the body: true when the `100 Continue` is owed now (once).
    mutating func bodyWanted() -> Bool {
        guard phase == .body, continueExpected else { return false }
        continueExpected = false
        return true
    }

    /// The handler runs (between the two, an exchange that ends does not start reading the
    /// next request: the reading loop that dispatched it goes on when the handler returns).
    mutating func dispatchBegins() { dispatching = true }
    mutating func dispatchEnds() { dispatching = false }

    // MARK: Answering

    /// A response starts: true when it must say `Connection: close`, the connection closing
    /// after it. So it does when the request asked, when the server drains, when the body
    /// has no framing (streamed to an HTTP/1.0 client, it ends with the connection), and when
    /// the answer comes before the body has all arrived: the rest of the body must never be
    /// parsed as a next request (RFC 9110 §10.1.1, RFC 9112 §9.6).
    mutating func responseStarts(unframedBody: Bool, draining: Bool) -> Bool {
        if phase == .body || unframedBody || draining { keepAlive = false }
        return !keepAlive
    }

    /// The response is all written (its output may still be draining).
    mutating func responseWritten() { responseComplete = true }

    /// What follows an exchange whose response has all gone out.
    enum AfterExchange: Equatable {
        /// Wait for the next request. `readNow`: one is buffered already and the caller is
        /// not a reading loop that goes on by itself, so it is read on the loop's next turn,
        /// never from inside the call that ended this exchange (the stack stays flat however
        /// many requests a client pipelines); `readScheduledRuns` says when it runs.
        case awaitNext(readNow: Bool)
        /// Half-close and take what the client still sends for a while, so that it reads the
        /// answer rather than a reset: an error, or an answer before the body was all read,
        /// on a plain connection.
        case linger
        /// Close now (the adapter's `close`).
        case close
    }

    /// The exchange's response has all gone out. `layerError`: the HTTP layer answered an
    /// error itself; `inputBuffered`: bytes of a next request are buffered.
    mutating func exchangeEnded(layerError: Bool, draining: Bool, isTLS: Bool,
                                inputBuffered: @autoclosure () -> Bool) -> AfterExchange {
        let bodyUnread = phase == .body
        if bodyUnread { keepAlive = false }
        if !keepAlive || draining {
            guard (layerError || bodyUnread) && !isTLS else { return .close }
            phase = .lingering
            return .linger
        }
        phase = .head
        guard !dispatching, !readScheduled, inputBuffered() else { return .awaitNext(readNow: false) }
        readScheduled = true
        return .awaitNext(readNow: true)
    }

    /// The scheduled read's turn has come: true when the connection still waits for a head.
    mutating func readScheduledRuns() -> Bool {
        readScheduled = false
        return phase == .head
    }

    /// The HTTP layer answers an error itself (malformed, too large, too slow): the
    /// connection closes after that answer.
    mutating func layerFails() {
        keepAlive = false
        continueExpected = false
        responseComplete = false
        phase = .handling
    }

    // MARK: The client and the clock

    /// What a read timeout means.
    enum ReadTimeout: Equatable {
        /// 408: a head started and did not arrive in time.
        case headTooSlow
        /// 408: the body stopped arriving.
        case bodyTooSlow
        /// An idle connection (or one waiting on the application, or lingering): just close.
        case close
    }

    func readTimedOut(inputBuffered: Bool) -> ReadTimeout {
        switch phase {
        case .head where inputBuffered: .headTooSlow
        case .body: .bodyTooSlow
        default: .close
        }
    }

    /// The client half-closed. True when the connection stays to answer the request it sent
    /// (and closes after it); false when it closes now.
    mutating func peerClosed(exchangeOpen: Bool) -> Bool {
        guard phase == .handling, exchangeOpen else { return false }
        keepAlive = false
        return true
    }

    /// True the first time: the connection was open and is closed now.
    mutating func close() -> Bool {
        guard phase != .closed else { return false }
        phase = .closed
        return true
    }
}
