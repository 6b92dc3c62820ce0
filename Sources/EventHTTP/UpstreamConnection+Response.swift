import CLibevent
import HTTPCore

/// Reading the response: its head, then its body by its framing, handed to the call.
extension UpstreamConnection {
    /// Returns true when the body may follow in the same input.
    func readHead(_ input: OpaquePointer) -> Bool {
        guard let head = parseHead(input) else { return false }
        if head.status / 100 == 1 && head.status != 101 { return true }  // interim response: skip
        guard head.status != 101 else {
            fail(.protocolError("protocol upgrades are not supported"))
            return false
        }
        guard begin(head) else { return false }  // the handler cancelled
        if framing == .none || framing == .contentLength(0) { complete(); return false }
        return true
    }

    /// A final response head, its `framing` set: the body's state, then the head to the call.
    /// False when the handler cancelled (the connection is then closed).
    private func begin(_ head: ResponseHead) -> Bool {
        responseKeepAlive = head.allowsKeepAlive
        state = .body
        switch framing {
        case .contentLength(let len): remaining = len
        case .chunked: chunked = ChunkedDecoder()
        default: break
        }
        call?.deliverHead(head, framing)
        return state == .body
    }

    /// A response that arrived with nothing buffered ahead of it (`SocketChannel`'s direct
    /// read): when it starts with a whole, valid, final response head, the head is parsed from
    /// the bytes in place, and a `Content-Length` body that came with it (all of it or its
    /// start) goes to the handler from there too (`upstreamResponseBody(bytes:)`): a small
    /// response read whole never touches the input buffer. A body framed otherwise, or bytes
    /// beyond the body, go through the input as always. Anything else (a partial head, an
    /// interim response, an error) is left, 0 taken, for `readable`.
    func takeResponse(_ bytes: UnsafeRawBufferPointer) -> Int {
        let n = bytes.count
        var headLength = 0
        guard state == .waitingHead,
              let head = try? HTTPParser.parseResponseHead(bytes, reusing: &spareHeaders, headLength: &headLength),
              head.status >= 200, let framing = try? HTTPParser.responseFraming(head, answersHEAD: requestIsHEAD) else {
            return 0
        }
        bytesReceived = true
        self.framing = framing
        guard begin(head), let channel else { return n }  // the handler cancelled: the connection is closed
        let rest = UnsafeRawBufferPointer(rebasing: bytes[headLength...])
        if case .contentLength = framing, !rest.isEmpty, rest.count <= remaining {
            remaining -= rest.count
            if let h = call?.handler { h.upstreamResponseBody(bytes: rest) }
            if remaining == 0 && state == .body { complete() }
            return n
        }
        if !rest.isEmpty { _ = evbuffer_add(channel.input, rest.baseAddress, rest.count) }
        if framing == .none || framing == .contentLength(0) {
            complete()
        } else {
            readBody(channel.input)
        }
        return n
    }

    /// The response head, once it has all arrived and is valid; nil while it is incomplete
    /// or after failing the call.
    private func parseHead(_ input: OpaquePointer) -> ResponseHead? {
        guard let end = EvBuffer.search(input, "\r\n\r\n") else {
            if evbuffer_get_length(input) > Self.maxHeadBytes {
                fail(.protocolError(Self.tooLargeHead))
            } else if Self.hasBareLF(input) {
                // A head with bare-LF line endings would never end: refused at once (502),
                // not left to the response timeout.
                fail(.protocolError("the response head has bare LF line endings"))
            }
            return nil
        }
        let n = end + 4
        guard n <= Self.maxHeadBytes else {
            fail(.protocolError(Self.tooLargeHead))
            return nil
        }
        let head: ResponseHead
        do {
            head = try HTTPParser.parseResponseHead(UnsafeRawBufferPointer(start: evbuffer_pullup(input, n), count: n),
                                                    reusing: &spareHeaders)
            framing = try HTTPParser.responseFraming(head, answersHEAD: requestIsHEAD)
        } catch {
            fail(.protocolError(error.message))
            return nil
        }
        evbuffer_drain(input, n)
        return head
    }

    /// Built once, not for every response head (it was, at about 1,400 instructions each).
    static let tooLargeHead = "response headers larger than \(maxHeadBytes) bytes"

    /// Whether the (incomplete) head so far has a line that ends in LF without CR.
    private static func hasBareLF(_ input: OpaquePointer) -> Bool {
        guard let lf = EvBuffer.search(input, "\n") else { return false }
        if lf == 0 { return true }
        var before: UInt8 = 0
        var pos = evbuffer_ptr()
        guard evbuffer_ptr_set(input, &pos, lf - 1, EVBUFFER_PTR_SET) == 0 else { return false }
        _ = withUnsafeMutableBytes(of: &before) { evbuffer_copyout_from(input, &pos, $0.baseAddress, 1) }
        return before != 0x0D
    }

    func readBody(_ input: OpaquePointer) {
        switch framing {
        case .contentLength:
            let n = min(remaining, evbuffer_get_length(input))
            guard n > 0 else { return }
            scratch.take(n, from: input)
            remaining -= n
            deliver()
            if remaining == 0 && state == .body { complete() }
        case .chunked:
            let done: Bool
            do { done = try chunked.decode(from: input, into: scratch.buffer) } catch {
                fail(.protocolError(error.message))
                return
            }
            deliver()
            if done && state == .body { complete() }
        case .untilClose:
            scratch.takeAll(from: input)
            deliver()
        case .none:
            complete()
        }
    }

    private func deliver() {
        guard !scratch.isEmpty else { return }
        if let h = call?.handler { h.upstreamResponseBody(scratch) }
        scratch.removeAll()
    }

    func complete() {
        guard let channel else { return }
        let call = self.call
        self.call = nil
        let reusable = responseKeepAlive && framing != .untilClose && pool.endpoint.maxIdle > 0
            && evbuffer_get_length(channel.input) == 0
        if reusable { pool.release(self) } else { close() }
        call?.finish(nil)
    }
}
