import CLibevent
import COpenSSL

/// What a connection hears from its bufferevent. A class, not a protocol, so that a
/// callback reaches its connection through one vtable call, without a dynamic cast.
class BufferEventHandler {
    func readable() {}
    func writable() {}
    func event(_ what: Int32) {}
}

/// The one place where libevent's bufferevent callbacks come back into Swift, for server and
/// upstream connections alike.
enum BufferEvent {
    /// Stops and frees a bufferevent, once: `bev` is nil afterwards.
    static func free(_ bev: inout OpaquePointer?) {
        guard let b = bev else { return }
        bufferevent_disable(b, Int16(EV_READ | EV_WRITE))
        bufferevent_free(b)
        bev = nil
    }

    /// A plain socket bufferevent, or a TLS one on `ssl` (which it then owns), for `fd` (-1 to
    /// connect later). Nil when libevent cannot allocate it.
    static func make(loop: EventLoop, fd: Int32, ssl: OpaquePointer?, state: bufferevent_ssl_state) -> OpaquePointer? {
        let flags = Int32(BEV_OPT_CLOSE_ON_FREE.rawValue)
        guard let ssl else { return bufferevent_socket_new(loop.base, fd, flags) }
        let bev = bufferevent_openssl_socket_new(loop.base, fd, ssl, state, flags)
        if let bev { bufferevent_openssl_set_allow_dirty_shutdown(bev, 1) }
        return bev
    }

    /// Routes `bev`'s callbacks to `handler`, which is not retained: it must keep itself alive
    /// until it frees `bev`. Each callback keeps it alive until it returns, as the handler may
    /// close itself from inside.
    static func route(_ bev: OpaquePointer, to handler: BufferEventHandler) {
        bufferevent_setcb(bev, { _, ctx in
            let h = Unmanaged<BufferEventHandler>.fromOpaque(ctx!).takeUnretainedValue()
            withExtendedLifetime(h) { h.readable() }
        }, { _, ctx in
            let h = Unmanaged<BufferEventHandler>.fromOpaque(ctx!).takeUnretainedValue()
            withExtendedLifetime(h) { h.writable() }
        }, { _, what, ctx in
            let h = Unmanaged<BufferEventHandler>.fromOpaque(ctx!).takeUnretainedValue()
            withExtendedLifetime(h) { h.event(Int32(what)) }
        }, Unmanaged.passUnretained(handler).toOpaque())
    }

    /// Sends buffered output now, with one writev, instead of arming a write event and
    /// waiting a loop iteration: that costs two epoll_ctl calls per response. What the socket
    /// does not take is left to libevent (EV_WRITE). Returns true when nothing is left.
    /// Plain sockets only: a TLS bufferevent must write through OpenSSL.
    ///
    /// A socket bufferevent keeps the start of its output buffer frozen (only its own write
    /// callback may drain it), so `evbuffer_write` on it fails without writing anything.
    /// libevent's write callback thaws it around its own write; this does the same.
    static func writeDirectly(_ bev: OpaquePointer) -> Bool {
        let out = bufferevent_get_output(bev)!
        if evbuffer_get_length(out) > 0 {
            evbuffer_unfreeze(out, 1)
            _ = evbuffer_write(out, bufferevent_getfd(bev))
            evbuffer_freeze(out, 1)
        }
        guard evbuffer_get_length(out) == 0 else {
            bufferevent_enable(bev, Int16(EV_WRITE))
            return false
        }
        return true
    }

    /// Arms the read timeout (nil: none) and the write timeout.
    static func setTimeouts(_ bev: OpaquePointer, readMs: Int?, writeMs: Int) {
        var w = timeval(milliseconds: writeMs)
        if let readMs {
            var r = timeval(milliseconds: readMs)
            bufferevent_set_timeouts(bev, &r, &w)
        } else {
            bufferevent_set_timeouts(bev, nil, &w)
        }
    }

    static func setReading(_ bev: OpaquePointer, _ on: Bool) {
        if on { bufferevent_enable(bev, Int16(EV_READ)) } else { bufferevent_disable(bev, Int16(EV_READ)) }
    }
}
