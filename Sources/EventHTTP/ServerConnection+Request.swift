import CLibevent
import HTTPCore

/// Reading requests: the head, then the body by its framing, then the handler.
extension ServerConnection {
    /// Parses as far as the buffered input allows.
    func process() {
        while true {
            switch state {
            case .head:
                guard readHead() else { return }
            case .body:
                guard readBody() else { return }
            case .handling, .lingering, .closed:
                return
            }
        }
    }

    /// Returns true when state changed and processing should go on.
    private func readHead() -> Bool {
        guard let parsed = parseHead() else { return false }
        keepAlive = parsed.wantsKeepAlive && !server.draining
        if case .contentLength(let n) = framing, n > limits.maxBodyBytes {
            fail(413, "request body of \(n) bytes exceeds the limit of \(limits.maxBodyBytes) bytes")
            return false
        }
        guard answerExpect(parsed) else { return false }
        head = parsed
        body = Body()
        switch framing {
        case .none:
            dispatch()
        case .contentLength(let n):
            remaining = n
            state = .body
            setReadTimeout(limits.requestTimeoutMs)
        case .chunked, .untilClose:
            chunked = ChunkedDecoder()
            state = .body
            setReadTimeout(limits.requestTimeoutMs)
        }
        return true
    }

    /// The request head and its body framing, once the whole head has arrived and is valid;
    /// nil while it is incomplete or after answering an error.
    private func parseHead() -> RequestHead? {
        let input = self.input
        let available = evbuffer_get_length(input)
        if available == 0 { return nil }
        let limit = limits.maxHeaderBytes
        guard let end = EvBuffer.search(input, "\r\n\r\n") else {
            if available > limit {
                fail(431, "request header fields exceed the limit of \(limit) bytes")
            } else {
                setReadTimeout(limits.requestTimeoutMs)
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
            parsed = try HTTPParser.parseRequestHead(UnsafeRawBufferPointer(start: p, count: headLength))
            framing = try HTTPParser.requestFraming(parsed)
        } catch {
            fail(error.status, error.message)
            return nil
        }
        evbuffer_drain(input, headLength)
        return parsed
    }

    /// Handles `Expect: 100-continue`; false after refusing any other expectation.
    private func answerExpect(_ parsed: RequestHead) -> Bool {
        guard let expect = parsed.headers.first("Expect") else { return true }
        guard asciiCaseInsensitiveEquals(expect, "100-continue") else {
            fail(417, "unsupported Expect '\(expect)'")
            return false
        }
        if framing != .none && parsed.versionMinor >= 1 {
            EvBuffer.append(output, "HTTP/1.1 100 Continue\r\n\r\n")
            flush()
        }
        return true
    }

    private func readBody() -> Bool {
        guard let body else { return false }
        let input = self.input
        switch framing {
        case .contentLength:
            let n = min(remaining, evbuffer_get_length(input))
            if n == 0 { return false }
            body.take(n, from: input)
            remaining -= n
            if remaining > 0 { return false }
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
            if !done { return false }
        }
        dispatch()
        return true
    }

    private func dispatch() {
        guard let head, let body else { return }
        self.head = nil
        self.body = nil
        state = .handling
        responseComplete = false
        setReadTimeout(nil)
        let ex = ServerExchange(connection: self, head: head, body: body)
        exchange = ex
        server.handler(ex)
    }

    /// Answers an error the HTTP layer detected itself and closes the connection afterwards.
    private func fail(_ status: Int, _ message: String) {
        keepAlive = false
        state = .handling
        let methodHead = head ?? RequestHead(method: "GET", target: "/")
        body = nil
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
