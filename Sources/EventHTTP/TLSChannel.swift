import CLibevent
import COpenSSL

/// A TLS connection through libevent's `bufferevent_openssl`, which reads, writes and
/// handshakes by itself: `flush` only says whether the output is all gone.
final class TLSChannel: Channel {
    private var bev: OpaquePointer?

    /// Over `ssl` (which it then owns), on `fd` (-1 to `connect` later). Nil when libevent
    /// cannot allocate it.
    init?(loop: EventLoop, fd: Int32, ssl: OpaquePointer, state: bufferevent_ssl_state) {
        let flags = Int32(BEV_OPT_CLOSE_ON_FREE.rawValue)
        guard let b = bufferevent_openssl_socket_new(loop.base, fd, ssl, state, flags) else { return nil }
        bufferevent_openssl_set_allow_dirty_shutdown(b, 1)
        // libevent 2.1 reads at most 4 KiB at once, into a new chain rounded up to a power of
        // two with its header (8 KiB), and a body takes the chains as they are: each 4 KiB of
        // a large body would cost 8 KiB. Reading a little less fits the chain in 4 KiB.
        bufferevent_set_max_single_read(b, SocketChannel.readSize)
        bev = b
        super.init(input: bufferevent_get_input(b)!, output: bufferevent_get_output(b)!)
        // Writing stays on: the bufferevent sends whatever is added to the output.
        bufferevent_enable(b, Int16(EV_WRITE))
    }

    deinit { close() }

    override var socket: Int32 { bev.map { bufferevent_getfd($0) } ?? -1 }

    override func setHandler(_ handler: ChannelHandler) {
        guard let bev else { return }
        bufferevent_setcb(bev, { _, ctx in
            let h = Unmanaged<ChannelHandler>.fromOpaque(ctx!).takeUnretainedValue()
            withExtendedLifetime(h) { h.readable() }
        }, { _, ctx in
            let h = Unmanaged<ChannelHandler>.fromOpaque(ctx!).takeUnretainedValue()
            withExtendedLifetime(h) { h.writable() }
        }, { _, what, ctx in
            let h = Unmanaged<ChannelHandler>.fromOpaque(ctx!).takeUnretainedValue()
            withExtendedLifetime(h) { h.event(Int32(what)) }
        }, Unmanaged.passUnretained(handler).toOpaque())
    }

    override func setReading(_ on: Bool) {
        guard let bev else { return }
        if on { bufferevent_enable(bev, Int16(EV_READ)) } else { bufferevent_disable(bev, Int16(EV_READ)) }
    }

    override func setTimeouts(readMs: Int?, writeMs: Int) {
        guard let bev else { return }
        var w = timeval(milliseconds: writeMs)
        if let readMs {
            var r = timeval(milliseconds: readMs)
            bufferevent_set_timeouts(bev, &r, &w)
        } else {
            bufferevent_set_timeouts(bev, nil, &w)
        }
    }

    override func flush() -> Bool { evbuffer_get_length(output) == 0 }

    override func connect(to address: SocketAddress) -> Bool {
        guard let bev else { return false }
        return address.withSockaddr { sa, len in bufferevent_socket_connect(bev, sa, len) } == 0
    }

    override func close() {
        guard let b = bev else { return }
        bufferevent_disable(b, Int16(EV_READ | EV_WRITE))
        bufferevent_free(b)
        bev = nil
    }

    override var tlsError: String? {
        guard let bev else { return nil }
        let e = bufferevent_get_openssl_error(bev)
        return e != 0 ? TLSError.message(e) : nil
    }
}
