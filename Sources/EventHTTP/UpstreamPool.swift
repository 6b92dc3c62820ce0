import Glibc
import CLibevent
import COpenSSL
import HTTPCore

/// Where and how to reach one upstream.
public struct UpstreamEndpoint: @unchecked Sendable {
    public let address: SocketAddress
    /// Set for `https://` upstreams.
    public let tls: TLSContext?
    /// The host name for SNI and certificate verification.
    public let tlsHost: String
    public let connectTimeoutMs: Int
    public let responseTimeoutMs: Int
    /// Idle keep-alive connections kept per loop (0 disables reuse).
    public let maxIdle: Int

    public init(address: SocketAddress, tls: TLSContext?, tlsHost: String, connectTimeoutMs: Int,
                responseTimeoutMs: Int, maxIdle: Int) {
        self.address = address
        self.tls = tls
        self.tlsHost = tlsHost
        self.connectTimeoutMs = connectTimeoutMs
        self.responseTimeoutMs = responseTimeoutMs
        self.maxIdle = maxIdle
    }
}

public enum UpstreamFailure: Error, Equatable, CustomStringConvertible {
    case connectFailed(String)
    case connectTimeout(Int)
    case responseTimeout(Int)
    case protocolError(String)
    case closed(String)

    /// 504 for a slow upstream, 502 for everything else.
    public var status: Int {
        if case .responseTimeout = self { return 504 }
        return 502
    }

    public var description: String {
        switch self {
        case .connectFailed(let why): return "cannot connect to the upstream: \(why)"
        case .connectTimeout(let ms): return "the upstream did not accept a connection within \(ms) ms"
        case .responseTimeout(let ms): return "the upstream did not respond within \(ms) ms"
        case .protocolError(let why): return "the upstream sent an invalid response: \(why)"
        case .closed(let why): return why
        }
    }
}

public protocol UpstreamResponseHandler: AnyObject {
    func upstreamResponseHead(_ head: ResponseHead, framing: BodyFraming)
    /// Must take all of `data` (e.g. move it to the client).
    func upstreamResponseBody(_ data: OpaquePointer)
    func upstreamResponseEnd()
    func upstreamFailed(_ failure: UpstreamFailure)
}

/// An outgoing request. The body evbuffer is referenced, not consumed, so that a request on
/// a keep-alive connection the upstream had just closed can be sent again on a new one.
public struct UpstreamRequest {
    public var method: String
    public var target: String
    public var headers: HTTPHeaders
    public var body: OpaquePointer?

    public init(method: String, target: String, headers: HTTPHeaders, body: OpaquePointer?) {
        self.method = method
        self.target = target
        self.headers = headers
        self.body = body
    }

    func serializeHead() -> [UInt8] {
        var w = HeadWriter(capacity: 192 + headers.wireSize)
        w.write(method)
        w.write(" ")
        w.write(target)
        w.write(" HTTP/1.1\r\n")
        w.writeFields(headers)
        let n = body.map { evbuffer_get_length($0) } ?? 0
        if n > 0 || method == "POST" || method == "PUT" || method == "PATCH" {
            w.write("Content-Length: ")
            w.write(n)
            w.writeCRLF()
        }
        w.writeCRLF()
        return w.bytes
    }
}

/// A request in flight; lets the caller apply back-pressure or give up.
public final class UpstreamCall {
    let request: UpstreamRequest
    weak var handler: UpstreamResponseHandler?
    var connection: UpstreamConnection?
    var retried = false
    public private(set) var headReceived = false
    public private(set) var done = false

    init(request: UpstreamRequest, handler: UpstreamResponseHandler) {
        self.request = request
        self.handler = handler
    }

    public func pauseReading() { connection?.setReading(false) }
    public func resumeReading() { connection?.setReading(true) }

    /// Abandons the call; its connection is closed, not reused.
    public func cancel() {
        done = true
        handler = nil
        let c = connection
        connection = nil
        c?.call = nil
        c?.close()
    }

    func deliverHead(_ head: ResponseHead, _ framing: BodyFraming) {
        headReceived = true
        handler?.upstreamResponseHead(head, framing: framing)
    }

    func finish(_ failure: UpstreamFailure?) {
        guard !done else { return }
        done = true
        connection = nil
        let h = handler
        handler = nil
        if let failure { h?.upstreamFailed(failure) } else { h?.upstreamResponseEnd() }
    }
}

/// The keep-alive connections from one loop to one upstream.
public final class UpstreamPool {
    public let loop: EventLoop
    public let endpoint: UpstreamEndpoint
    private var idle: [UpstreamConnection] = []

    public init(loop: EventLoop, endpoint: UpstreamEndpoint) {
        self.loop = loop
        self.endpoint = endpoint
    }

    public var idleCount: Int { idle.count }

    @discardableResult
    public func send(_ request: UpstreamRequest, handler: UpstreamResponseHandler) -> UpstreamCall {
        let call = UpstreamCall(request: request, handler: handler)
        dispatch(call, fresh: false)
        return call
    }

    func dispatch(_ call: UpstreamCall, fresh: Bool) {
        if !fresh, let c = idle.popLast() {
            c.start(call)
            return
        }
        guard let c = UpstreamConnection(pool: self) else {
            call.finish(.connectFailed("cannot create a socket"))
            return
        }
        c.start(call)
    }

    func release(_ c: UpstreamConnection) {
        guard idle.count < endpoint.maxIdle else { c.close(); return }
        idle.append(c)
        c.becomeIdle()
    }

    func forget(_ c: UpstreamConnection) {
        if let i = idle.firstIndex(where: { $0 === c }) { idle.remove(at: i) }
    }

    /// Closes the idle connections (at shutdown).
    public func closeIdle() {
        let all = idle
        idle.removeAll()
        for c in all { c.close() }
    }
}

final class UpstreamConnection {
    unowned let pool: UpstreamPool
    private var bev: OpaquePointer?
    private enum State { case connecting, waitingHead, body, idle, closed }
    private var state = State.connecting
    var call: UpstreamCall?
    private var method = "GET"
    private var framing = BodyFraming.none
    private var remaining = 0
    private var chunked = ChunkedDecoder()
    private var responseKeepAlive = true
    private var requestCount = 0
    private var bytesReceived = false
    private var connectTimer: LoopTimer?
    private let scratch: OpaquePointer = evbuffer_new()
    private var retainedSelf: Unmanaged<UpstreamConnection>?
    private static let maxHeadBytes = 65_536

    init?(pool: UpstreamPool) {
        self.pool = pool
        let ep = pool.endpoint
        let base = pool.loop.base
        let flags = Int32(BEV_OPT_CLOSE_ON_FREE.rawValue)
        if let tls = ep.tls {
            guard let ssl = tls.newClientSSL(host: ep.tlsHost) else { return nil }
            bev = bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_CONNECTING, flags)
            if let bev { bufferevent_openssl_set_allow_dirty_shutdown(bev, 1) }
        } else {
            bev = bufferevent_socket_new(base, -1, flags)
        }
        guard let bev else { return nil }
        // The connection keeps itself alive while its socket is open; close() lets go.
        retainedSelf = Unmanaged.passRetained(self)
        bufferevent_setcb(bev, { _, ctx in
            let c = Unmanaged<UpstreamConnection>.fromOpaque(ctx!).takeUnretainedValue()
            withExtendedLifetime(c) { c.readable() }
        }, { _, ctx in
            let c = Unmanaged<UpstreamConnection>.fromOpaque(ctx!).takeUnretainedValue()
            withExtendedLifetime(c) { c.drained() }
        }, { _, what, ctx in
            let c = Unmanaged<UpstreamConnection>.fromOpaque(ctx!).takeUnretainedValue()
            withExtendedLifetime(c) { c.event(what) }
        }, Unmanaged.passUnretained(self).toOpaque())
        bufferevent_enable(bev, Int16(EV_READ | EV_WRITE))
        let rc = ep.address.withSockaddr { sa, len in bufferevent_socket_connect(bev, sa, len) }
        if rc != 0 {
            close()
            return nil
        }
        let timer = LoopTimer(loop: pool.loop) { [weak self] in self?.connectTimedOut() }
        timer.schedule(afterMs: ep.connectTimeoutMs)
        connectTimer = timer
    }

    deinit { evbuffer_free(scratch) }

    func start(_ call: UpstreamCall) {
        guard let bev else { call.finish(.connectFailed("connection closed")); return }
        self.call = call
        call.connection = self
        method = call.request.method
        bytesReceived = false
        requestCount += 1
        let out = bufferevent_get_output(bev)!
        EvBuffer.append(out, call.request.serializeHead())
        if let body = call.request.body, evbuffer_get_length(body) > 0 {
            if evbuffer_add_buffer_reference(out, body) != 0 {
                _ = evbuffer_add(out, evbuffer_pullup(body, -1), evbuffer_get_length(body))
            }
        }
        if state == .idle {
            state = .waitingHead
            armResponseTimeout()
            bufferevent_enable(bev, Int16(EV_READ))
            flushOutput()
            // Bytes that arrived while idle mean a broken upstream.
            if evbuffer_get_length(bufferevent_get_input(bev)!) > 0 {
                fail(.protocolError("unsolicited data on an idle connection"))
            }
        }
    }

    /// The response timeout also bounds how long the connection may sit idle in the pool, so
    /// that a reused connection needs no timer changes (each one is libevent heap work).
    private var timeoutsArmed = false

    /// Plain connections write requests directly once connected (no write event per request;
    /// see ServerConnection.flush()); libevent takes over only what the socket did not take.
    private var writesDirectly: Bool { pool.endpoint.tls == nil }

    private func flushOutput() {
        guard writesDirectly, let bev, state != .connecting else { return }
        let out = bufferevent_get_output(bev)!
        if evbuffer_get_length(out) > 0 { _ = evbuffer_write(out, bufferevent_getfd(bev)) }
        if evbuffer_get_length(out) > 0 {
            bufferevent_enable(bev, Int16(EV_WRITE))
        } else {
            bufferevent_disable(bev, Int16(EV_WRITE))
        }
    }

    private func drained() {
        if writesDirectly, let bev { bufferevent_disable(bev, Int16(EV_WRITE)) }
    }

    private func armResponseTimeout() {
        guard !timeoutsArmed else { return }
        timeoutsArmed = true
        var t = timeval(milliseconds: pool.endpoint.responseTimeoutMs)
        bufferevent_set_timeouts(bev, &t, &t)
    }

    func setReading(_ on: Bool) {
        guard let bev, state == .waitingHead || state == .body else { return }
        if on { bufferevent_enable(bev, Int16(EV_READ)) } else { bufferevent_disable(bev, Int16(EV_READ)) }
    }

    func becomeIdle() {
        state = .idle
        bufferevent_enable(bev, Int16(EV_READ))
    }

    private func connectTimedOut() {
        if state == .connecting { fail(.connectTimeout(pool.endpoint.connectTimeoutMs)) }
    }

    private func readable() {
        guard let bev else { return }
        let input = bufferevent_get_input(bev)!
        if evbuffer_get_length(input) > 0 { bytesReceived = true }
        while true {
            switch state {
            case .waitingHead:
                guard readHead(input) else { return }
            case .body:
                readBody(input)
                return
            case .idle:
                pool.forget(self)
                close()
                return
            case .connecting, .closed:
                return
            }
        }
    }

    private func readHead(_ input: OpaquePointer) -> Bool {
        guard let end = EvBuffer.search(input, "\r\n\r\n") else {
            if evbuffer_get_length(input) > Self.maxHeadBytes {
                fail(.protocolError("response headers larger than \(Self.maxHeadBytes) bytes"))
            }
            return false
        }
        let n = end + 4
        guard n <= Self.maxHeadBytes else {
            fail(.protocolError("response headers larger than \(Self.maxHeadBytes) bytes"))
            return false
        }
        let head: ResponseHead
        do {
            head = try HTTPParser.parseResponseHead(UnsafeRawBufferPointer(start: evbuffer_pullup(input, n), count: n))
            framing = try HTTPParser.responseFraming(head, requestMethod: method)
        } catch {
            fail(.protocolError(error.message))
            return false
        }
        evbuffer_drain(input, n)
        if head.status / 100 == 1 && head.status != 101 { return true }  // interim response: skip
        guard head.status != 101 else {
            fail(.protocolError("protocol upgrades are not supported"))
            return false
        }
        responseKeepAlive = head.allowsKeepAlive
        state = .body
        switch framing {
        case .contentLength(let len): remaining = len
        case .chunked: chunked = ChunkedDecoder()
        default: break
        }
        call?.deliverHead(head, framing)
        guard state == .body else { return false }  // the handler cancelled
        if framing == .none || framing == .contentLength(0) { complete(); return false }
        return true
    }

    private func readBody(_ input: OpaquePointer) {
        switch framing {
        case .contentLength:
            let n = min(remaining, evbuffer_get_length(input))
            guard n > 0 else { return }
            evbuffer_remove_buffer(input, scratch, n)
            remaining -= n
            deliver()
            if remaining == 0 && state == .body { complete() }
        case .chunked:
            let done: Bool
            do { done = try chunked.decode(from: input, into: scratch) } catch {
                fail(.protocolError(error.message))
                return
            }
            deliver()
            if done && state == .body { complete() }
        case .untilClose:
            evbuffer_add_buffer(scratch, input)
            deliver()
        case .none:
            complete()
        }
    }

    private func deliver() {
        guard evbuffer_get_length(scratch) > 0 else { return }
        if let h = call?.handler { h.upstreamResponseBody(scratch) }
        evbuffer_drain(scratch, evbuffer_get_length(scratch))
    }

    private func complete() {
        guard let bev else { return }
        let call = self.call
        self.call = nil
        let reusable = responseKeepAlive && framing != .untilClose && pool.endpoint.maxIdle > 0
            && evbuffer_get_length(bufferevent_get_input(bev)!) == 0
        if reusable { pool.release(self) } else { close() }
        call?.finish(nil)
    }

    private func event(_ what: Int16) {
        let w = Int32(what)
        if w & BEV_EVENT_CONNECTED != 0 {
            connectTimer?.cancel()
            connectTimer = nil
            if let bev { setNoDelay(bufferevent_getfd(bev)) }
            if state == .connecting {
                state = .waitingHead
                armResponseTimeout()
                flushOutput()
            }
            return
        }
        if w & BEV_EVENT_TIMEOUT != 0 {
            if state == .idle { pool.forget(self); close(); return }
            fail(.responseTimeout(pool.endpoint.responseTimeoutMs))
            return
        }
        if w & BEV_EVENT_EOF != 0 && state == .body && framing == .untilClose {
            responseKeepAlive = false
            complete()
            return
        }
        if state == .idle { pool.forget(self); close(); return }
        if state == .connecting {
            fail(.connectFailed(socketError(w)))
            return
        }
        fail(.closed("the upstream closed the connection before the response was complete"
            + (w & BEV_EVENT_ERROR != 0 ? " (\(socketError(w)))" : "")))
    }

    private func socketError(_ what: Int32) -> String {
        if pool.endpoint.tls != nil, let bev {
            let e = bufferevent_get_openssl_error(bev)
            if e != 0 {
                var buf = [CChar](repeating: 0, count: 256)
                ERR_error_string_n(e, &buf, buf.count)
                return "TLS: " + String(cString: buf)
            }
        }
        let err = errno
        return err != 0 ? String(cString: strerror(err)) : "connection closed"
    }

    private func fail(_ failure: UpstreamFailure) {
        let call = self.call
        self.call = nil
        // A reused connection the upstream closed just as we sent: nothing was processed,
        // so the request is sent once more on a new connection.
        let stale = requestCount > 1 && !bytesReceived && (state == .waitingHead)
        close()
        guard let call else { return }
        if stale && !call.retried && !call.headReceived {
            if case .responseTimeout = failure {} else {
                call.retried = true
                pool.dispatch(call, fresh: true)
                return
            }
        }
        call.finish(failure)
    }

    func close() {
        guard state != .closed else { return }
        state = .closed
        connectTimer?.cancel()
        connectTimer = nil
        if let bev {
            bufferevent_disable(bev, Int16(EV_READ | EV_WRITE))
            bufferevent_free(bev)
            self.bev = nil
        }
        let r = retainedSelf
        retainedSelf = nil
        r?.release()
    }
}
