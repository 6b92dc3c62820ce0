import Glibc
import CLibevent
import COpenSSL

/// A TLS session on a `SocketChannel`: OpenSSL reads and writes the socket itself (a socket
/// BIO), on the channel's own events. It replaced libevent's `bufferevent_openssl`, which cost
/// about 4k instructions per proxied request in its own bookkeeping (event_add per read and
/// write, deferred callbacks, freezing) and wrote each evbuffer chain as its own TLS record:
/// a response's head and body were two records, two encryptions and two `write`s, where nginx
/// sends one (`ssl_buffer_size`).
///
/// What this one does:
/// - writes up to `recordBytes` of contiguous output per `SSL_write` (one record, one `write`);
/// - reads with read-ahead (a whole record, or several, per `recv`) until OpenSSL wants more;
/// - clears OpenSSL's per-thread error queue once per wake-up, not around every call;
/// - sends `close_notify` when it closes a healthy session.
final class TLSState {
    let ssl: OpaquePointer
    var handshaking = true
    var isClient = false
    /// After a fatal error no `close_notify` may be sent (OpenSSL forbids any further I/O).
    var failed = false
    /// An `SSL_read` waits for the socket to take a write (a key update, a renegotiation).
    var readWantsWrite = false
    /// An `SSL_write` waits for the socket to bring a read: the write event stays off meanwhile.
    var writeWantsRead = false
    /// Bytes handed to an `SSL_write` that did not complete: OpenSSL has taken them into a
    /// record and must be given the same bytes again. They leave the output at once, so that
    /// nothing OpenSSL has committed can be withdrawn from it (`withdrawUnsentResponse`).
    var retry: OpaquePointer?
    /// An end or error that came after data in one wake-up: told at the next one.
    var deferredEvent: Int32 = 0
    var deferredErrno: Int32 = 0
    /// A write error, told from the write event (never from inside `flush`).
    var writeErrno: Int32 = 0
    /// OpenSSL's code for the last failure (0: none).
    var errorCode: UInt = 0

    init(_ ssl: OpaquePointer) { self.ssl = ssl }

    deinit {
        if let retry { evbuffer_free(retry) }
    }

    /// The handshake, or a write, needs the read event whatever the handler asked for.
    var needsReadEvent: Bool { handshaking || writeWantsRead }

    var retryBytes: Int { retry.map { evbuffer_get_length($0) } ?? 0 }

    /// The outcome of a failed call (`SSL_get_error` code `e`, return value `rc`) as a
    /// channel event and errno: the peer's `close_notify` and a bare close of the socket are
    /// EOF (what `bufferevent_openssl_set_allow_dirty_shutdown` gave), anything else ERROR
    /// with OpenSSL's reason kept for `tlsError`. OpenSSL 3 reports a close without
    /// `close_notify` in the middle of a record as a protocol error: ERROR, as before.
    func outcome(_ e: Int32, _ rc: Int32) -> (what: Int32, err: Int32) {
        let err = errno
        let code = ERR_get_error()
        if code != 0 { errorCode = code }
        ERR_clear_error()
        if e == SSL_ERROR_ZERO_RETURN { return (BEV_EVENT_EOF, 0) }
        failed = true
        if e == SSL_ERROR_SYSCALL && code == 0 && (rc == 0 || err == 0) { return (BEV_EVENT_EOF, 0) }
        return (BEV_EVENT_ERROR, err != 0 ? err : EPROTO)
    }
}

extension SocketChannel {
    /// Plaintext bytes per `SSL_write`, i.e. per record: TLS's largest (nginx's default
    /// `ssl_buffer_size`). A small response is one record and one `write`.
    static let recordBytes = 16_384

    func startTLS(_ ssl: OpaquePointer, fd: Int32, accepting: Bool) {
        SSL_set_fd(ssl, fd)
        SSL_set_read_ahead(ssl, 1)
        if accepting {
            SSL_set_accept_state(ssl)
        } else {
            SSL_set_connect_state(ssl)
            tls?.isClient = true
        }
    }

    /// Drives the handshake; once done, a client hears CONNECTED.
    func handshake() {
        guard let t = tls, t.handshaking, !closed else { return }
        ERR_clear_error()
        let rc = SSL_do_handshake(t.ssl)
        if rc == 1 {
            t.handshaking = false
            disarmWrite()
            if !wantsRead { disarmRead() }
            if t.isClient { deliver { $0.event(BEV_EVENT_CONNECTED) } }
            resumeTLSReading()
            return
        }
        let e = SSL_get_error(t.ssl, rc)
        switch e {
        case SSL_ERROR_WANT_READ:
            disarmWrite()
            armRead()
        case SSL_ERROR_WANT_WRITE:
            armWrite(progress: false)
        default:
            let (what, err) = t.outcome(e, rc)
            report(what, err, reading: true)
        }
    }

    /// Tells the handler of an end (EOF) or a failure, reading or writing.
    private func report(_ what: Int32, _ err: Int32, reading: Bool) {
        if what == BEV_EVENT_EOF && reading {
            setReading(false)
            tls?.writeWantsRead = false
            disarmRead()
            deliver { $0.event(BEV_EVENT_EOF | BEV_EVENT_READING) }
        } else {
            tls?.writeWantsRead = false
            fail(err, Int16(reading ? BEV_EVENT_READING : BEV_EVENT_WRITING))
        }
    }

    /// Reading was turned on, or the handshake ended: bytes OpenSSL already holds, or an end
    /// seen after the last data, are told from the loop (the socket will not announce them).
    func resumeTLSReading() {
        guard let t = tls, !t.handshaking, wantsRead, readArmed, !closed, let readEvent else { return }
        if t.deferredEvent != 0 || SSL_has_pending(t.ssl) == 1 { event_active(readEvent, EV_READ, 0) }
    }

    func tlsReadReady() {
        guard let t = tls else { return }
        if t.handshaking { handshake(); return }
        if t.writeWantsRead {
            t.writeWantsRead = false
            tlsWriteReady()
            if closed { return }
            if !wantsRead { disarmRead(); return }
        }
        guard wantsRead else { disarmRead(); return }
        if t.deferredEvent != 0 {
            let what = t.deferredEvent, err = t.deferredErrno
            t.deferredEvent = 0
            report(what, err, reading: true)
            return
        }
        ERR_clear_error()
        var total = 0
        var drained = false
        for _ in 0..<Self.readsPerWakeup {
            var vec = iovec()
            guard evbuffer_reserve_space(input, Self.readSize, &vec, 1) == 1 else { break }
            let n = SSL_read(t.ssl, vec.iov_base, Int32(vec.iov_len))
            if n > 0 {
                vec.iov_len = Int(n)
                evbuffer_commit_space(input, &vec, 1)
                total += Int(n)
                continue
            }
            drained = true
            let e = SSL_get_error(t.ssl, n)
            if e == SSL_ERROR_WANT_READ { break }
            if e == SSL_ERROR_WANT_WRITE {
                t.readWantsWrite = true
                armWrite(progress: false)
                break
            }
            let (what, err) = t.outcome(e, n)
            if total > 0 {
                // The bytes first; the end or error at the next turn of the loop.
                t.deferredEvent = what
                t.deferredErrno = err
                event_active(readEvent, EV_READ, 0)
                break
            }
            report(what, err, reading: true)
            return
        }
        // Stopped at the cap with bytes still inside OpenSSL: the socket may have none left
        // to wake the loop with.
        if !drained && SSL_has_pending(t.ssl) == 1 { event_active(readEvent, EV_READ, 0) }
        guard total > 0 else { return }
        lastRead = EventLoop.coarseNanos()
        deliver { $0.readable() }
    }

    /// Encrypts and sends the output, one record per `SSL_write` from contiguous bytes, until
    /// it is all gone or the socket is full. The bytes written, or -1 after a fatal error
    /// (`writeErrno` set).
    private func tlsWriteOut(_ t: TLSState) -> Int {
        ERR_clear_error()
        var written = 0
        while true {
            let src: OpaquePointer
            let len: Int
            if let r = t.retry, evbuffer_get_length(r) > 0 {
                src = r
                len = evbuffer_get_length(r)
            } else {
                src = output
                len = min(evbuffer_get_length(output), Self.recordBytes)
                if len == 0 { return written }
            }
            guard let p = evbuffer_pullup(src, len) else { fatalError("evbuffer_pullup failed: out of memory") }
            let n = SSL_write(t.ssl, p, Int32(len))
            if n > 0 {
                evbuffer_drain(src, Int(n))
                written += Int(n)
                continue
            }
            if src == output {
                if t.retry == nil { t.retry = evbuffer_new() }
                guard let r = t.retry else { fatalError("evbuffer_new failed: out of memory") }
                evbuffer_remove_buffer(output, r, len)
            }
            let e = SSL_get_error(t.ssl, n)
            if e == SSL_ERROR_WANT_WRITE { return written }
            if e == SSL_ERROR_WANT_READ {
                t.writeWantsRead = true
                armRead()
                return written
            }
            let (_, err) = t.outcome(e, n)
            t.writeErrno = err != 0 ? err : EPIPE
            return -1
        }
    }

    private func hasOutput(_ t: TLSState) -> Bool { evbuffer_get_length(output) > 0 || t.retryBytes > 0 }

    func tlsFlush() -> Bool {
        guard let t = tls else { return false }
        // A client's output waits for the handshake (the handler flushes on CONNECTED).
        if t.handshaking || t.writeErrno != 0 { return false }
        if hasOutput(t) {
            let n = tlsWriteOut(t)
            if n < 0 {
                // Told from the write event, as a plain socket's write error is.
                armWrite(progress: false)
                if let writeEvent { event_active(writeEvent, EV_WRITE, 0) }
                return false
            }
            if hasOutput(t) {
                if t.writeWantsRead { disarmWrite() } else { armWrite(progress: n > 0) }
                return false
            }
        }
        if !t.readWantsWrite { disarmWrite() }
        return true
    }

    func tlsWriteReady() {
        guard let t = tls else { return }
        if t.handshaking { handshake(); return }
        if t.writeErrno != 0 {
            let err = t.writeErrno
            t.writeErrno = 0
            report(BEV_EVENT_ERROR, err, reading: false)
            return
        }
        if t.readWantsWrite {
            t.readWantsWrite = false
            if readArmed, let readEvent { event_active(readEvent, EV_READ, 0) }
        }
        let waiting = hasOutput(t)
        guard waiting else { disarmWrite(); return }
        let n = tlsWriteOut(t)
        if n < 0 {
            let err = t.writeErrno
            t.writeErrno = 0
            report(BEV_EVENT_ERROR, err, reading: false)
            return
        }
        if hasOutput(t) {
            if n > 0 { lastWrite = EventLoop.coarseNanos() }
            if t.writeWantsRead { disarmWrite() }
            return
        }
        disarmWrite()
        deliver { $0.writable() }
    }

    /// Sends `close_notify` on a healthy session (best effort: the socket closes right after),
    /// and lets go of the session and its buffers.
    func shutdownTLS() {
        guard let t = tls else { return }
        if !t.handshaking && !t.failed && fd >= 0 {
            ERR_clear_error()
            _ = SSL_shutdown(t.ssl)
            ERR_clear_error()
        }
        closedTLSError = t.errorCode
        SSL_free(t.ssl)
        tls = nil
    }
}
