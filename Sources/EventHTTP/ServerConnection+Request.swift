import CLibevent
import HTTPCore

/// Reading requests: the head, then the body by its framing. The exchange goes to the handler
/// as soon as the head is parsed and what has arrived of the body is read: whole if it came
/// with the head, else still arriving (`ServerExchange.whenBodyComplete`).
extension ServerConnection {
    /// Parses as far as the buffered input allows.
    func process() {
        while true {
            switch state.phase {
            case .head:
                guard readHead() else { return }
            case .body:
                guard readBody() else {
                    if state.phase == .body {
                        startBodyClock()
                        // Decide before the rest of the body: the application asks for it
                        // only when the decision or the upstream needs it.
                        if exchange == nil { dispatch() }
                    }
                    // Answered at once (and kept alive): the next request may be buffered already.
                    if state.phase == .head { continue }
                    return
                }
                state.bodyComplete()
                if let exchange {
                    body = nil
                    setReadTimeout(nil)
                    exchange.bodyArrived()
                } else {
                    dispatch()
                }
            case .handling, .lingering, .closed:
                return
            }
        }
    }

    /// Returns true when state changed and processing should go on.
    private func readHead() -> Bool {
        guard let parsed = parseHead() else { return false }
        return accept(parsed)
    }

    /// A request that arrived with nothing buffered ahead of it (`SocketChannel`'s direct
    /// read): when the bytes are exactly one whole, valid, bodiless request head (nearly every
    /// GET), it is parsed from them in place and handled, with no input buffer in between.
    /// Anything else (a partial head, a body or a next request behind it, empty lines before
    /// it, an error to answer) is left, 0 taken, for the input and `readable`, as always.
    func takeWholeHead(_ bytes: UnsafeRawBufferPointer) -> Int {
        let n = bytes.count
        guard state.phase == .head, n >= 4, n <= limits.maxHeaderBytes, bytes[0] != 0x0D,
              bytes.loadUnaligned(fromByteOffset: n - 4, as: UInt32.self) == 0x0A0D_0A0D else { return 0 }
        var length = 0
        var spare = HeadersSpare(lending: requestHeaders.take())
        guard let parsed = try? HTTPParser.parseRequestHead(bytes, reusing: &spare, headLength: &length),
              length == n, (try? HTTPParser.requestFraming(parsed)) == BodyFraming.none else { return 0 }
        framing = .none
        if accept(parsed) { process() }
        return n
    }

    /// Takes a parsed head: the connection's state for its body, then the exchange. The head
    /// is moved into the connection, not copied (a copy retained and released its strings and
    /// its headers' buffers, four of each per request).
    private func accept(_ parsed: consuming RequestHead) -> Bool {
        headDeadline = 0
        emptyLinesBeforeHead = 0
        if case .contentLength(let n) = framing, n > limits.maxBodyBytes {
            fail(413, "request body of \(n) bytes exceeds the limit of \(limits.maxBodyBytes) bytes")
            return false
        }
        guard let expectsContinue = checkExpect(parsed) else { return false }
        let hasBody = framing != .none
        state.requestStarted(wantsKeepAlive: parsed.wantsKeepAlive, draining: server.draining, hasBody: hasBody,
                             expectsContinue: expectsContinue)
        head = consume parsed
        bodyStartNanos = 0
        switch framing {
        case .none:
            body = bodilessBody()
            dispatch()
            return true
        case .contentLength(let n):
            body = Body()
            remaining = n
        case .chunked, .untilClose:
            body = Body()
            chunked = ChunkedDecoder()
        }
        // Until a 100 Continue is sent, the client may be waiting for it: no body clock yet.
        setReadTimeout(state.continueExpected ? nil : limits.bodyTimeoutMs)
        return true
    }

    /// The request head and its body framing, once the whole head has arrived and is valid;
    /// nil while it is incomplete or after answering an error.
    private func parseHead() -> RequestHead? {
        let input = self.input
        var available = evbuffer_get_length(input)
        if available == 0 { return nil }
        if !skipEmptyLines(&available) { return nil }
        let limit = limits.maxHeaderBytes
        guard let end = EvBuffer.search(input, "\r\n\r\n") else {
            if available > limit {
                fail(431, "request header fields exceed the limit of \(limit) bytes")
            } else {
                armHeadDeadline()
            }
            return nil
        }
        let headLength = end + 4
        guard headLength <= limit else {
            fail(431, "request header fields exceed the limit of \(limit) bytes")
            return nil
        }
        let parsed: RequestHead
        do {
            let p = evbuffer_pullup(input, headLength)
            var spare = HeadersSpare(lending: requestHeaders.take())
            parsed = try HTTPParser.parseRequestHead(UnsafeRawBufferPointer(start: p, count: headLength), reusing: &spare)
            framing = try HTTPParser.requestFraming(parsed)
        } catch {
            fail(error.status, error.message)
            return nil
        }
        evbuffer_drain(input, headLength)
        return parsed
    }

    /// Drains the empty lines before a request line (RFC 9112 §2.2), at most
    /// `HTTPParser.maxEmptyLinesBeforeRequest` per request. False when nothing is left to parse
    /// yet (the head deadline runs) or after answering 400. One byte is peeked first, so a
    /// request that starts with its method costs one copy of one byte.
    private func skipEmptyLines(_ available: inout Int) -> Bool {
        var first: UInt8 = 0
        guard evbuffer_copyout(input, &first, 1) == 1, first == 0x0D else { return true }
        let bound = HTTPParser.maxEmptyLinesBeforeRequest
        let window = min(available, 2 * (bound + 1))
        let skip = HTTPParser.emptyLinesPrefix(UnsafeRawBufferPointer(start: evbuffer_pullup(input, window), count: window))
        emptyLinesBeforeHead += skip / 2
        guard emptyLinesBeforeHead <= bound else {
            fail(400, "more than \(bound) empty lines before the request line")
            return false
        }
        if skip > 0 {
            evbuffer_drain(input, skip)
            available -= skip
        }
        if available < 2 {
            // Nothing yet, or a lone CR: wait for more, within the head's deadline.
            armHeadDeadline()
            return false
        }
        return true
    }

    /// A head is incomplete: it must be whole by its deadline (counted from its first byte
    /// on a kept-alive connection), however slowly its bytes come.
    private func armHeadDeadline() {
        let now = EventLoop.coarseNanos()
        if headDeadline == 0 { headDeadline = now + UInt64(limits.headerTimeoutMs) * 1_000_000 }
        guard now < headDeadline else {
            fail(408, "the request head did not arrive within \(limits.headerTimeoutMs) ms")
            return
        }
        setReadTimeout(Int((headDeadline - now + 999_999) / 1_000_000))
    }

    /// Whether the request expects a `100 Continue` (an HTTP/1.1 `Expect: 100-continue`); nil
    /// after answering 417 to any other expectation. The 100 itself waits until the
    /// application asks for the body (`bodyWanted`).
    private func checkExpect(_ parsed: RequestHead) -> Bool? {
        guard let expect = parsed.headers.first("Expect") else { return false }
        guard asciiCaseInsensitiveEquals(expect, "100-continue") else {
            fail(417, "unsupported Expect '\(expect)'")
            return nil
        }
        return parsed.versionMinor >= 1
    }

    /// The application waits for the body: the client may send it now.
    func bodyWanted() {
        guard state.bodyWanted() else { return }
        EvBuffer.append(output, "HTTP/1.1 100 Continue\r\n\r\n")
        setReadTimeout(limits.bodyTimeoutMs)
        startBodyClock()
        flush()
    }

    /// Starts measuring the body's rate (`minBodyRate`), unless a 100 Continue is still due.
    private func startBodyClock() {
        if bodyStartNanos == 0 && !state.continueExpected { bodyStartNanos = EventLoop.coarseNanos() }
    }

    /// Moves what has arrived of the body into it. True once it is complete; false while
    /// more is due, or after answering an error (413, 400, 408).
    private func readBody() -> Bool {
        guard let body else { return false }
        let input = self.input
        switch framing {
        case .contentLength:
            let n = min(remaining, evbuffer_get_length(input))
            if n == 0 { return false }
            body.take(n, from: input)
            remaining -= n
            if remaining > 0 { _ = tooSlow(body); return false }
        default:
            let done: Bool
            do {
                done = try chunked.decode(from: input, into: body.buffer)
            } catch {
                fail(error.status, error.message)
                return false
            }
            if body.count > limits.maxBodyBytes {
                fail(413, "request body exceeds the limit of \(limits.maxBodyBytes) bytes")
                return false
            }
            if !done { _ = tooSlow(body); return false }
        }
        return true
    }

    /// After the grace period (`bodyTimeoutMs`), a body that averages less than `minBodyRate`
    /// since its start is answered 408 (true).
    private func tooSlow(_ body: Body) -> Bool {
        guard limits.minBodyRate > 0, bodyStartNanos != 0 else { return false }
        let elapsedMs = Int((EventLoop.coarseNanos() - bodyStartNanos) / 1_000_000)
        guard elapsedMs > limits.bodyTimeoutMs, body.count * 1000 < limits.minBodyRate * elapsedMs else { return false }
        fail(408, "the request body arrived slower than \(limits.minBodyRate) bytes/s")
        return true
    }

    /// A bodiless request's (empty) body: the one the connection's previous bodiless request
    /// had, once nothing else holds it and it is still empty, so that a keep-alive connection's
    /// GETs share one `Body` instead of allocating and releasing one each.
    private func bodilessBody() -> Body {
        if isKnownUniquelyReferenced(&spareBody), let spare = spareBody, spare.isEmpty { return spare }
        let fresh = Body()
        spareBody = fresh
        return fresh
    }

    private func dispatch() {
        guard head != nil, let body else { return }
        // Moved out, not copied (a copy retains each of the head's fields, then releases them).
        let head = self.head.take()!
        let complete = state.phase == .handling
        if complete {
            self.body = nil
            setReadTimeout(nil)
        }
        let ex = ServerExchange(connection: self, head: head, body: body, bodyComplete: complete)
        exchange = ex
        // An exchange answered before the handler returns does not start the next request from
        // inside the handler: this loop (`process`) reads it when the handler has returned.
        state.dispatchBegins()
        server.handler(ex)
        state.dispatchEnds()
    }

    /// Answers an error the HTTP layer detected itself and closes the connection afterwards.
    /// When the application holds the exchange (its body failed while it decided), the
    /// application's exchange is cut off and its wait for the body ends, without a second
    /// response; if its response had already started, the connection just closes.
    func fail(_ status: Int, _ message: String) {
        let app = exchange
        exchange = nil
        app?.detach()
        defer { app?.bodyFailed() }
        if let app, app.responseStarted {
            close()
            return
        }
        state.layerFails()
        let methodHead = head ?? app?.head ?? RequestHead(method: "GET", target: "/")
        dropBody()
        head = nil
        let ex = ServerExchange(connection: self, head: methodHead, body: Body())
        ex.isLayerError = true
        exchange = ex
        let e = server.errorBody(status, message)
        var h = HTTPHeaders()
        h.add("Content-Type", e.contentType)
        ex.respond(status: status, headers: h, body: e.body)
    }
}
