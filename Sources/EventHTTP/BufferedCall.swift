import HTTPCore

/// A whole response, read into memory: for small JSON answers (a policy decision, a login
/// step), not for proxying.
public struct BufferedResponse {
    public let head: ResponseHead
    public let body: [UInt8]
}

/// One request on an `UpstreamPool` whose answer is read whole, within a deadline that covers
/// the connect, the send and the whole response (the pool's own timeouts cover each step).
/// Lives until it answers; `done` runs once, on the pool's loop.
public final class BufferedCall: UpstreamResponseHandler {
    private var head: ResponseHead?
    private let body = Body()
    private let maxBytes: Int
    private var done: ((Result<BufferedResponse, UpstreamFailure>) -> Void)?
    private var call: UpstreamCall?
    private var timer: LoopTimer?
    /// Keeps itself alive until it has answered, whether or not the call is still in flight.
    private var selfRef: BufferedCall?

    private init(maxBytes: Int, done: @escaping (Result<BufferedResponse, UpstreamFailure>) -> Void) {
        self.maxBytes = maxBytes
        self.done = done
    }

    /// Sends `request` on `pool`; `done` gets the response or why there is none.
    public static func send(_ request: UpstreamRequest, on pool: UpstreamPool, deadlineMs: Int, maxBytes: Int = 1 << 20,
                            _ done: @escaping (Result<BufferedResponse, UpstreamFailure>) -> Void) {
        let c = BufferedCall(maxBytes: maxBytes, done: done)
        c.selfRef = c
        c.timer = LoopTimer(loop: pool.loop) { [weak c] in
            c?.call?.cancel()
            c?.finish(.failure(.responseTimeout(deadlineMs)))
        }
        c.timer?.schedule(afterMs: deadlineMs)
        c.call = pool.send(request, handler: c)
    }

    public func upstreamResponseHead(_ head: ResponseHead, framing: BodyFraming) { self.head = head }

    public func upstreamResponseBody(_ chunk: Body) {
        chunk.moveAll(to: body)
        if body.count > maxBytes {
            call?.cancel()
            finish(.failure(.protocolError("the answer is larger than \(maxBytes) bytes")))
        }
    }

    public func upstreamResponseEnd() {
        guard let head else { finish(.failure(.protocolError("no response head"))); return }
        finish(.success(BufferedResponse(head: head, body: body.bytes)))
    }

    public func upstreamFailed(_ failure: UpstreamFailure) { finish(.failure(failure)) }

    private func finish(_ r: Result<BufferedResponse, UpstreamFailure>) {
        guard let d = done else { return }
        done = nil
        timer?.cancel()
        timer = nil
        call = nil
        selfRef = nil
        d(r)
    }
}
