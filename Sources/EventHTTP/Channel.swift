import CLibevent

/// What a connection hears from its channel. A class, not a protocol, so that a callback
/// reaches its connection through one vtable call, without a dynamic cast.
///
/// `event` gets libevent's `BEV_EVENT_*` flags from either kind of channel: EOF, ERROR
/// (errno set), TIMEOUT with READING or WRITING, and CONNECTED.
class ChannelHandler {
    /// Bytes were appended to the input.
    func readable() {}
    /// Whether the next read, when nothing is buffered, may be offered as it is
    /// (`readable(direct:)`) before it goes into the input.
    var acceptsDirectRead: Bool { false }
    /// A read that arrived with nothing buffered, in the loop's read buffer (valid only during
    /// the call): the handler takes what it can from it and says how many bytes it took; the
    /// rest goes into the input, and `readable` follows.
    func readable(direct bytes: UnsafeRawBufferPointer) -> Int { 0 }
    /// All of the output has been sent (after a `flush` that left some).
    func writable() {}
    func event(_ what: Int32) {}
}

/// A connection's byte stream as the server and upstream connections see it: an input and an
/// output evbuffer, reading turned on or off, read and write timeouts, and the callbacks of
/// `ChannelHandler`. `SocketChannel` is the one kind: a TCP socket, read and written by
/// EventHTTP itself on plain libevent events, with recv into the input and writev from the
/// output, or with TLS, `SSL_read` and `SSL_write` on the same events
/// (SocketChannel+TLS.swift). The connections' logic is written against this interface.
///
/// A timeout fires after that many ms without progress while reading is on (READING) or
/// while output waits for the socket (WRITING), and turns that direction off; setting the
/// timeouts or turning reading on restarts their clocks (as with a bufferevent).
class Channel {
    final let input: OpaquePointer
    final let output: OpaquePointer

    init(input: OpaquePointer, output: OpaquePointer) {
        self.input = input
        self.output = output
    }

    /// A channel for an accepted socket: TLS over `ssl` (which it then owns), else plain.
    /// Nil when it cannot be allocated; the caller then closes `fd`.
    static func accepted(loop: EventLoop, fd: Int32, ssl: OpaquePointer?) -> Channel? {
        SocketChannel(loop: loop, fd: fd, ssl: ssl)
    }

    /// The socket (-1 before `connect` and after `close`).
    var socket: Int32 { -1 }

    /// Routes the callbacks to `handler`, which is not retained: it must keep itself alive
    /// until it closes the channel. Each callback keeps it alive until it returns, as the
    /// handler may close itself from inside.
    func setHandler(_ handler: ChannelHandler) {}

    func setReading(_ on: Bool) {}

    /// Reads (or, over TLS, goes on with the handshake) in this loop turn, as if the socket had
    /// been found readable, instead of after the next wait for events: for a socket whose bytes
    /// have most likely arrived already. Nothing there is no error.
    func readSoon() {}

    /// Sets the read timeout (nil: none) and the write timeout, and restarts both clocks.
    func setTimeouts(readMs: Int?, writeMs: Int) {}

    /// Appends `bytes` to the output; a channel that can send them at once, with nothing
    /// buffered ahead of them, sends what the socket takes now and buffers the rest.
    func write(_ bytes: UnsafeRawBufferPointer) {
        _ = evbuffer_add(output, bytes.baseAddress, bytes.count)
    }

    /// Appends `head`, then all of `body` (an evbuffer, left empty: its chains are moved, not
    /// copied); a channel that can send at once, with nothing buffered ahead, sends both with
    /// one system call and buffers what the socket does not take.
    func write(_ head: UnsafeRawBufferPointer, then body: OpaquePointer) {
        _ = evbuffer_add(output, head.baseAddress, head.count)
        evbuffer_add_buffer(output, body)
    }

    /// `write(_:then:)` with the body as bytes, valid only during the call (copied if kept).
    func write(_ head: UnsafeRawBufferPointer, then bytes: UnsafeRawBufferPointer) {
        _ = evbuffer_add(output, head.baseAddress, head.count)
        _ = evbuffer_add(output, bytes.baseAddress, bytes.count)
    }

    /// Sends buffered output now where the channel can; true when none is left. What the
    /// socket does not take goes out when it can, and `writable` follows.
    func flush() -> Bool { true }

    /// Starts connecting to `address` (CONNECTED or ERROR follows, never from inside this
    /// call); false when no socket could be created.
    func connect(to address: SocketAddress) -> Bool { false }

    /// Stops every callback and closes the socket, once.
    func close() {}

    /// The TLS layer's reason for the last failure, if any.
    var tlsError: String? { nil }
}
