import Glibc
import CLibevent
import HTTPCore

/// One connection to the upstream: sends a call's request, reads its response (see
/// UpstreamConnection+Response.swift), then goes back to its pool or closes.
final class UpstreamConnection: ChannelHandler {
    /// Strong: the pool holds its idle connections, and a busy or idle one stays until it
    /// closes. An `unowned` reference cost a checked retain and a release on every use.
    let pool: UpstreamPool
    /// Nil once closed.
    var channel: Channel?
    enum State { case connecting, waitingHead, body, idle, closed }
    var state = State.connecting
    var call: UpstreamCall?
    /// Whether the call's request is a HEAD (its response has no body): a flag, not the method
    /// kept as a string (a retain and a release a request).
    var requestIsHEAD = false
    var framing = BodyFraming.none
    var remaining = 0
    var chunked = ChunkedDecoder()
    var responseKeepAlive = true
    private var requestCount = 0
    var bytesReceived = false
    /// When the connection last went back to the pool (`EventLoop.nowNanos`).
    private(set) var idleSince: UInt64 = 0
    private var connectTimer: LoopTimer?
    /// Response body bytes on their way to the handler.
    let scratch = Body()
    /// The previous response's header buffers, reused for the next head once it is done with them.
    var spareHeaders = HeadersSpare()
    private var retainedSelf: Unmanaged<UpstreamConnection>?
    static let maxHeadBytes = 65_536

    init?(pool: UpstreamPool) {
        self.pool = pool
        super.init()
        let ep = pool.endpoint
        let channel: Channel
        if let tls = ep.tls {
            guard let ssl = tls.newClientSSL(host: ep.tlsHost) else { return nil }
            channel = SocketChannel(loop: pool.loop, fd: -1, ssl: ssl)
        } else {
            channel = SocketChannel(loop: pool.loop, fd: -1)
        }
        self.channel = channel
        pool.opened()
        // The connection keeps itself alive while its socket is open; close() lets go.
        retainedSelf = Unmanaged.passRetained(self)
        channel.setHandler(self)
        channel.setReading(true)
        guard channel.connect(to: ep.address) else {
            close()
            return nil
        }
        // Not `weak`: a weak reference gives the connection a side table, and every retain of
        // it, for every request it carries, then takes the slow path. The timer is pending only
        // while the connection is open (connected and close() cancel it), which keeps it alive;
        // the closure holds it for the call, since timing out closes it.
        let timer = LoopTimer(loop: pool.loop) { [unowned(unsafe) self] in
            let connection = self
            withExtendedLifetime(connection) { connection.connectTimedOut() }
        }
        timer.schedule(afterMs: ep.connectTimeoutMs)
        connectTimer = timer
    }

    func start(_ call: UpstreamCall) {
        guard let channel else { call.finish(.connectFailed("connection closed")); return }
        self.call = call
        call.connection = self
        requestIsHEAD = call.method.utf8.count == 4 && call.method == "HEAD"
        bytesReceived = false
        requestCount += 1
        call.writeRequest(to: channel, with: pool.heads)
        if state == .idle {
            state = .waitingHead
            // Through the channel held here: each read of `self.channel` for a call on it
            // retained and released it around the call.
            armResponseTimeout(channel)
            channel.setReading(true)
            _ = channel.flush()
            // Bytes that arrived while idle mean a broken upstream.
            if evbuffer_get_length(channel.input) > 0 {
                fail(.protocolError("unsolicited data on an idle connection"))
            }
        }
    }

    /// The response timeout also bounds how long the connection may sit idle in the pool, so
    /// that a reused connection needs no timer changes (each one is libevent heap work).
    private var timeoutsArmed = false

    private func armResponseTimeout(_ channel: Channel) {
        guard !timeoutsArmed else { return }
        timeoutsArmed = true
        let ms = pool.endpoint.responseTimeoutMs
        channel.setTimeouts(readMs: ms, writeMs: ms)
    }

    func setReading(_ on: Bool) {
        guard let channel, state == .waitingHead || state == .body else { return }
        channel.setReading(on)
    }

    func becomeIdle() {
        state = .idle
        idleSince = EventLoop.coarseNanos()
        channel?.setReading(true)
    }

    /// Whether an idle connection's socket shows nothing from the upstream: no close, no
    /// error, no stray bytes (delivered or still in the kernel).
    func isQuiet() -> Bool {
        guard let channel, evbuffer_get_length(channel.input) == 0 else { return false }
        let fd = channel.socket
        guard fd >= 0 else { return false }
        var byte: UInt8 = 0
        let n = recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
    }

    private func connectTimedOut() {
        if state == .connecting { fail(.connectTimeout(pool.endpoint.connectTimeoutMs)) }
    }

    override func readable() {
        guard let input = channel?.input else { return }
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

    override var acceptsDirectRead: Bool { state == .waitingHead }

    override func readable(direct bytes: UnsafeRawBufferPointer) -> Int { takeResponse(bytes) }

    override func event(_ what: Int32) {
        if what & BEV_EVENT_CONNECTED != 0 {
            connected()
        } else if what & BEV_EVENT_TIMEOUT != 0 {
            if state == .idle { pool.forget(self); close(); return }
            fail(.responseTimeout(pool.endpoint.responseTimeoutMs))
        } else if what & BEV_EVENT_EOF != 0 && state == .body && framing == .untilClose {
            responseKeepAlive = false
            complete()
        } else if state == .idle {
            pool.forget(self)
            close()
        } else if state == .connecting {
            fail(.connectFailed(socketError()))
        } else {
            fail(.closed("the upstream closed the connection before the response was complete"
                + (what & BEV_EVENT_ERROR != 0 ? " (\(socketError()))" : "")))
        }
    }

    private func connected() {
        connectTimer?.cancel()
        connectTimer = nil
        guard let channel else { return }
        setNoDelay(channel.socket)
        if state == .connecting {
            state = .waitingHead
            armResponseTimeout(channel)
            // Sends the request now that the connection is up (see Channel.flush).
            _ = channel.flush()
        }
    }

    private func socketError() -> String {
        if let tls = channel?.tlsError { return "TLS: " + tls }
        let err = errno
        return err != 0 ? String(cString: strerror(err)) : "connection closed"
    }

    func fail(_ failure: UpstreamFailure) {
        let call = self.call
        self.call = nil
        // A reused connection that failed before any response byte: most likely the upstream
        // closed it just as the request went out, but it may as well have processed the
        // request and then lost the connection. Only a resendable request goes once more, on
        // a new connection; the handler is told, to log and count it.
        let stale = requestCount > 1 && !bytesReceived && (state == .waitingHead)
        close()
        guard let call else { return }
        if stale && call.resendable && !call.retried && !call.headReceived {
            if case .responseTimeout = failure {} else {
                call.retried = true
                call.handler?.upstreamWillResend(after: failure)
                pool.dispatch(call, fresh: true)
                return
            }
        }
        call.finish(failure)
    }

    func close() {
        guard state != .closed else { return }
        state = .closed
        pool.closed()
        connectTimer?.cancel()
        connectTimer = nil
        channel?.close()
        channel = nil
        let r = retainedSelf
        retainedSelf = nil
        r?.release()
    }
}
