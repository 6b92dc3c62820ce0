import Glibc
import CLibevent
import COpenSSL

/// A TCP socket read and written by EventHTTP itself, on three libevent events: a
/// persistent EV_READ, an EV_WRITE armed only while output waits for the socket (or while
/// connecting), and one timer for both timeouts. Plain, or TLS over an `SSL` it owns
/// (SocketChannel+TLS.swift): the same events, timeouts and callbacks either way.
///
/// What a socket bufferevent costs per read and it does not: an `ioctl(FIONREAD)` before
/// each read (it reads into the input's reserved space until a short read instead), an
/// `event_add` per read to push the read timeout back (the timer keeps the time of the last
/// read and is re-armed only when it fires, or when a deadline moves earlier), and the
/// freezing of the output around a write.
final class SocketChannel: Channel {
    /// Bytes asked of a read: a new evbuffer chain is this plus its header, rounded up to a
    /// power of two, and a body takes the chains as they are (free space included), so a
    /// 4 KiB chain holds it.
    static let readSize = 4_096 - 64
    /// After a plain read that filled what it asked (a large body arriving), the next one asks
    /// for what the socket holds (`FIONREAD`), up to this: a chain the size of what fills it,
    /// and a 1 MiB body in about 32 reads instead of 256.
    static let bulkReadSize = 65_536 - 64
    /// A plain wake-up reads no more once it has this many bytes (its last read may pass it),
    /// and the handler hears of them.
    static let bytesPerWakeup = 65_536
    /// Reads into the input buffer per wake-up at most (with TLS, 64 KiB of `readSize`) before
    /// the handler hears of them. A plain wake-up's first read, into the loop's shared buffer
    /// (`readDirect`), comes before these when the input buffer is empty.
    static let readsPerWakeup = 16

    private let base: OpaquePointer
    /// The loop's head writer, told when a read callback starts and ends (`HeadScratch.mayHold`).
    private let heads: HeadScratch
    /// The loop's read buffer (`EventLoop.readBuffer`), for a read with nothing buffered.
    private let readBuffer: UnsafeMutableRawPointer
    private(set) var fd: Int32 = -1
    private var handler: Unmanaged<ChannelHandler>?
    private(set) var readEvent: OpaquePointer?
    private(set) var writeEvent: OpaquePointer?
    private var timer: OpaquePointer?
    private(set) var wantsRead = false
    private(set) var readArmed = false
    private(set) var writeArmed = false
    private var connecting = false
    private(set) var closed = false
    /// TLS (SocketChannel+TLS.swift): the session, nil for a plain socket and once closed.
    var tls: TLSState?
    /// The TLS failure's code kept when the session is freed (`tlsError`).
    var closedTLSError: UInt?
    /// A connect refused at once, told from the write event like any other outcome.
    private var connectError: Int32 = 0
    /// An error a read returned after bytes in the same wake-up: told at the next one.
    private var deferredError: Int32 = 0
    /// Timeouts in nanoseconds (0: none) and the last progress in each direction.
    private var readTimeout: UInt64 = 0
    private var writeTimeout: UInt64 = 0
    var lastRead: UInt64 = 0
    var lastWrite: UInt64 = 0
    /// When the timer is due (0: not pending).
    private var timerDue: UInt64 = 0

    /// A channel on an accepted non-blocking socket, or with -1, one to `connect` later; with
    /// `ssl` (which it then owns), TLS: the server's side of a handshake on an accepted socket,
    /// the client's after `connect`.
    init(loop: EventLoop, fd: Int32, ssl: OpaquePointer? = nil) {
        guard let i = evbuffer_new(), let o = evbuffer_new() else { fatalError("evbuffer_new failed: out of memory") }
        base = loop.base
        heads = loop.heads
        readBuffer = loop.readBuffer
        super.init(input: i, output: o)
        timer = event_new(base, -1, 0, { _, _, arg in SocketChannel.run(arg) { $0.timerFired() } }, selfPointer)
        if let ssl { tls = TLSState(ssl) }
        if fd >= 0 {
            attach(fd)
            if let ssl { startTLS(ssl, fd: fd, accepting: true) }
        }
    }

    deinit {
        close()
        if let readEvent { event_free(readEvent) }
        if let writeEvent { event_free(writeEvent) }
        if let timer { event_free(timer) }
        evbuffer_free(input)
        evbuffer_free(output)
    }

    private var selfPointer: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    /// Calls `body` on the channel behind a libevent callback's argument, kept alive meanwhile.
    private static func run(_ arg: UnsafeMutableRawPointer?, _ body: (SocketChannel) -> Void) {
        let channel = Unmanaged<SocketChannel>.fromOpaque(arg!).takeUnretainedValue()
        withExtendedLifetime(channel) { body(channel) }
    }

    private func attach(_ socket: Int32) {
        fd = socket
        readEvent = event_new(base, fd, Int16(EV_READ | EV_PERSIST), { _, _, arg in
            SocketChannel.run(arg) { $0.readReady() }
        }, selfPointer)
        writeEvent = event_new(base, fd, Int16(EV_WRITE | EV_PERSIST), { _, _, arg in
            SocketChannel.run(arg) { $0.writeReady() }
        }, selfPointer)
        guard readEvent != nil, writeEvent != nil else { fatalError("event_new failed: out of memory") }
    }

    /// Tells the handler, which stays alive until it returns.
    func deliver(_ body: (ChannelHandler) -> Void) {
        guard let h = handler?.takeUnretainedValue() else { return }
        withExtendedLifetime(h) { body(h) }
    }

    override var socket: Int32 { fd }

    override var tlsError: String? {
        guard let code = tls?.errorCode ?? closedTLSError, code != 0 else { return nil }
        return TLSError.message(code)
    }

    override func setHandler(_ handler: ChannelHandler) { self.handler = Unmanaged.passUnretained(handler) }

    override func close() {
        guard !closed else { return }
        if tls != nil { shutdownTLS() }
        closed = true
        handler = nil
        if let readEvent { event_del(readEvent) }
        if let writeEvent { event_del(writeEvent) }
        if let timer { event_del(timer) }
        readArmed = false
        writeArmed = false
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }

    override func setTimeouts(readMs: Int?, writeMs: Int) {
        readTimeout = UInt64(max(readMs ?? 0, 0)) * 1_000_000
        writeTimeout = UInt64(max(writeMs, 0)) * 1_000_000
        let now = EventLoop.coarseNanos()
        lastRead = now
        lastWrite = now
        scheduleTimer(now)
    }

    // MARK: Reading

    override func setReading(_ on: Bool) {
        wantsRead = on
        if on {
            let now = EventLoop.coarseNanos()
            lastRead = now
            armRead()
            scheduleTimer(now)
            // TLS may hold decrypted or buffered bytes the socket will not announce again.
            if tls != nil { resumeTLSReading() }
        } else if readArmed && !(tls?.needsReadEvent ?? false) {
            disarmRead()
        }
    }

    override func readSoon() {
        guard readArmed, let readEvent else { return }
        event_active(readEvent, EV_READ, 0)
    }

    /// Adds the read event if the handler (or, for TLS, the handshake or a write waiting on a
    /// read) needs it.
    func armRead() {
        guard wantsRead || (tls?.needsReadEvent ?? false), !readArmed, !connecting, !closed, let readEvent else { return }
        readArmed = true
        event_add(readEvent, nil)
    }

    func disarmRead() {
        guard readArmed else { return }
        readArmed = false
        event_del(readEvent)
    }

    /// Reads until a short read or an empty socket (level-triggered epoll says when more
    /// comes, or that it ended), `bytesPerWakeup` or `readsPerWakeup`, then tells the handler
    /// once.
    private func readReady() {
        guard readArmed else { return }
        if tls != nil { tlsReadReady(); return }
        if deferredError != 0 { fail(deferredError, Int16(BEV_EVENT_READING)); return }
        var total = 0
        if evbuffer_get_length(input) == 0, let h = handler?.takeUnretainedValue(), h.acceptsDirectRead {
            guard let filled = readDirect() else { return }
            total = filled
        }
        for _ in 0..<Self.readsPerWakeup {
            guard total < Self.bytesPerWakeup else { break }
            var size = Self.readSize
            if total > 0 {
                // The last read filled what it asked: ask for what has arrived since. A body
                // keeps its chains whole, so a chain sized past what fills it would be kept
                // empty for as long as the body is (a peer sending just over 4 KiB a time).
                var available: Int32 = 0
                guard withUnsafeMutablePointer(to: &available, { ioctl(fd, UInt(FIONREAD), $0) }) == 0,
                      available > 0 else { break }
                size = min(Int(available), Self.bulkReadSize)
            }
            var vec = iovec()
            guard evbuffer_reserve_space(input, size, &vec, 1) == 1 else { break }
            let asked = vec.iov_len
            let n = recv(fd, vec.iov_base, asked, 0)
            if n > 0 {
                vec.iov_len = n
                evbuffer_commit_space(input, &vec, 1)
                total += n
                if n < asked { break }
                continue
            }
            let err = errno
            if n < 0 && (err == EAGAIN || err == EWOULDBLOCK || err == EINTR) { break }
            if total > 0 {
                // The bytes first; an end of stream shows again at the next wake-up.
                if n < 0 { deferredError = err }
                break
            }
            readEnded(n, err)
            return
        }
        guard total > 0 else { return }
        delivered { $0.readable() }
    }

    /// Tells the handler of bytes read (`lastRead` moved). A response head started in the
    /// callback may wait for its body, delivered by this same callback when it has arrived;
    /// whatever still waits goes out when it returns.
    private func delivered(_ body: (ChannelHandler) -> Void) {
        lastRead = EventLoop.coarseNanos()
        heads.mayHold = true
        deliver(body)
        heads.mayHold = false
        heads.releaseHeld()
    }

    /// One read into the loop's read buffer, offered to the handler as it is
    /// (`readable(direct:)`); what it does not take goes into the input, and `readable`
    /// follows. Nil when that is done (or on EOF, an error, nothing to read: as in
    /// `readReady`); a read that filled the buffer goes into the input whole, and its size is
    /// returned for `readReady` to read on.
    private func readDirect() -> Int? {
        let size = EventLoop.readBufferSize
        let n = recv(fd, readBuffer, size, 0)
        guard n > 0 else {
            let err = errno
            if n < 0 && (err == EAGAIN || err == EWOULDBLOCK || err == EINTR) { return nil }
            readEnded(n, err)
            return nil
        }
        guard n < size else {
            _ = evbuffer_add(input, readBuffer, n)
            return n
        }
        let bytes = UnsafeRawBufferPointer(start: readBuffer, count: n)
        delivered { h in
            let taken = h.readable(direct: bytes)
            guard taken < n else { return }
            _ = evbuffer_add(input, readBuffer + taken, n - taken)
            h.readable()
        }
        return nil
    }

    /// A read that returned the end of the stream (0) or error `err`, with nothing read before
    /// it in this wake-up: reading stops, and the handler hears of it.
    private func readEnded(_ n: Int, _ err: Int32) {
        if n == 0 {
            setReading(false)
            deliver { $0.event(BEV_EVENT_EOF | BEV_EVENT_READING) }
        } else {
            fail(err, Int16(BEV_EVENT_READING))
        }
    }

    /// Turns `direction` off and tells the handler of error `err` (in errno).
    func fail(_ err: Int32, _ direction: Int16) {
        deferredError = 0
        if direction == Int16(BEV_EVENT_READING) { setReading(false) } else { disarmWrite() }
        errno = err
        deliver { $0.event(BEV_EVENT_ERROR | Int32(direction)) }
    }

    // MARK: Writing

    /// A plain, connected socket with no output waiting takes the bytes with one `send` (an
    /// upstream request head: no evbuffer chain allocated, filled, written and freed for it);
    /// what it does not take, or everything on a failure (which the next flush reports), is
    /// buffered as before.
    override func write(_ bytes: UnsafeRawBufferPointer) {
        var sent = 0
        if tls == nil, !closed, !connecting, evbuffer_get_length(output) == 0 {
            let n = send(fd, bytes.baseAddress, bytes.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL))
            if n > 0 { sent = n }
        }
        if sent < bytes.count { _ = evbuffer_add(output, bytes.baseAddress! + sent, bytes.count - sent) }
    }

    /// Whether bytes may go to the socket at once: plain, connected, no output waiting.
    private var sendsAtOnce: Bool { tls == nil && !closed && !connecting && evbuffer_get_length(output) == 0 }

    /// `sendmsg` of `count` vectors, without blocking; the bytes the socket took (0 on a
    /// failure, which the next flush reports).
    private func sendVectors(_ vectors: UnsafeMutablePointer<iovec>, _ count: Int) -> Int {
        var message = msghdr()
        message.msg_iov = vectors
        message.msg_iovlen = count
        return max(0, sendmsg(fd, &message, Int32(MSG_DONTWAIT | MSG_NOSIGNAL)))
    }

    /// A plain, connected socket with no output waiting takes the head and the body's chains
    /// with one `sendmsg`; the rest is buffered.
    override func write(_ head: UnsafeRawBufferPointer, then body: OpaquePointer) {
        guard sendsAtOnce else {
            super.write(head, then: body)
            return
        }
        let maxVectors = 8
        let sent = withUnsafeTemporaryAllocation(of: iovec.self, capacity: maxVectors) { v -> Int in
            v[0] = iovec(iov_base: UnsafeMutableRawPointer(mutating: head.baseAddress), iov_len: head.count)
            let chains = Int(evbuffer_peek(body, -1, nil, v.baseAddress! + 1, Int32(maxVectors - 1)))
            return sendVectors(v.baseAddress!, 1 + min(chains, maxVectors - 1))
        }
        if sent < head.count {
            _ = evbuffer_add(output, head.baseAddress! + sent, head.count - sent)
        } else {
            evbuffer_drain(body, sent - head.count)
        }
        if evbuffer_get_length(body) > 0 { evbuffer_add_buffer(output, body) }
    }

    /// `write(_:then:)` with the body as bytes (valid only during the call): what the socket
    /// does not take is copied into the output.
    override func write(_ head: UnsafeRawBufferPointer, then bytes: UnsafeRawBufferPointer) {
        guard sendsAtOnce else {
            super.write(head, then: bytes)
            return
        }
        var v = (iovec(iov_base: UnsafeMutableRawPointer(mutating: head.baseAddress), iov_len: head.count),
                 iovec(iov_base: UnsafeMutableRawPointer(mutating: bytes.baseAddress), iov_len: bytes.count))
        let sent = withUnsafeMutablePointer(to: &v) { $0.withMemoryRebound(to: iovec.self, capacity: 2) { sendVectors($0, 2) } }
        if sent < head.count {
            _ = evbuffer_add(output, head.baseAddress! + sent, head.count - sent)
            _ = evbuffer_add(output, bytes.baseAddress, bytes.count)
        } else if sent < head.count + bytes.count {
            _ = evbuffer_add(output, bytes.baseAddress! + (sent - head.count), head.count + bytes.count - sent)
        }
    }

    override func flush() -> Bool {
        guard !closed, !connecting else { return false }
        if tls != nil { return tlsFlush() }
        if evbuffer_get_length(output) > 0 {
            let n = evbuffer_write(output, fd)
            if evbuffer_get_length(output) > 0 {
                armWrite(progress: n > 0)
                return false
            }
        }
        if writeArmed { disarmWrite() }
        return true
    }

    /// Waits for the socket to take the rest of the output (an error shows there too).
    func armWrite(progress: Bool) {
        let now = EventLoop.coarseNanos()
        if !writeArmed {
            writeArmed = true
            event_add(writeEvent, nil)
            lastWrite = now
        } else if progress {
            lastWrite = now
        }
        scheduleTimer(now)
    }

    func disarmWrite() {
        guard writeArmed else { return }
        writeArmed = false
        event_del(writeEvent)
    }

    private func writeReady() {
        guard writeArmed else { return }
        if connecting { connectFinished(); return }
        if tls != nil { tlsWriteReady(); return }
        let n = evbuffer_write(output, fd)
        if n < 0 {
            let err = errno
            if err != EAGAIN && err != EWOULDBLOCK && err != EINTR { fail(err, Int16(BEV_EVENT_WRITING)) }
            return
        }
        if evbuffer_get_length(output) > 0 {
            if n > 0 { lastWrite = EventLoop.coarseNanos() }
            return
        }
        disarmWrite()
        deliver { $0.writable() }
    }

    // MARK: Connecting and timeouts

    override func connect(to address: SocketAddress) -> Bool {
        guard fd < 0, !closed else { return false }
        let type = Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue)
        let s = Glibc.socket(Int32(address.storage.ss_family), type, 0)
        guard s >= 0 else { return false }
        attach(s)
        if let ssl = tls?.ssl { startTLS(ssl, fd: s, accepting: false) }
        connecting = true
        let rc = address.withSockaddr { sa, len in Glibc.connect(s, sa, socklen_t(len)) }
        let err = rc == 0 ? 0 : errno
        switch err {
        case 0, EINPROGRESS, EINTR:
            writeArmed = true
            event_add(writeEvent, nil)
        case ECONNREFUSED:
            connectError = err
            writeArmed = true
            event_active(writeEvent, EV_WRITE, 0)
        default:
            return false
        }
        return true
    }
}

extension SocketChannel {
    /// The write event after a connect: CONNECTED (reading starts if it is on) or ERROR.
    fileprivate func connectFinished() {
        var err = connectError
        if err == 0 {
            var len = socklen_t(MemoryLayout<Int32>.size)
            if getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 { err = errno }
        }
        if err == EINPROGRESS || err == EINTR { return }
        connecting = false
        disarmWrite()
        if err != 0 {
            errno = err
            deliver { $0.event(BEV_EVENT_ERROR) }
            return
        }
        if wantsRead { setReading(true) }
        // TLS: CONNECTED once the handshake is done.
        if tls != nil { handshake(); return }
        deliver { $0.event(BEV_EVENT_CONNECTED) }
    }

    /// Arms the timer for the earliest deadline, unless it is due before that already (it
    /// then finds the deadline moved and re-arms itself).
    func scheduleTimer(_ now: UInt64) {
        var due = UInt64.max
        if readArmed && readTimeout > 0 { due = lastRead + readTimeout }
        if writeArmed && writeTimeout > 0 { due = min(due, lastWrite + writeTimeout) }
        guard due != .max, !closed, timerDue == 0 || timerDue > due else { return }
        timerDue = due
        let us = due > now ? (due - now + 999) / 1000 : 0
        var tv = timeval(tv_sec: Int(us / 1_000_000), tv_usec: Int(us % 1_000_000))
        event_add(timer, &tv)
    }

    fileprivate func timerFired() {
        timerDue = 0
        guard !closed else { return }
        let now = EventLoop.coarseNanos()
        if readArmed && readTimeout > 0 && now >= lastRead + readTimeout {
            setReading(false)
            deliver { $0.event(BEV_EVENT_TIMEOUT | BEV_EVENT_READING) }
            if closed { return }
        }
        if writeArmed && writeTimeout > 0 && now >= lastWrite + writeTimeout {
            disarmWrite()
            deliver { $0.event(BEV_EVENT_TIMEOUT | BEV_EVENT_WRITING) }
            if closed { return }
        }
        scheduleTimer(EventLoop.coarseNanos())
    }
}
