import Glibc
import CLibevent

/// A listening socket on one loop (`SO_REUSEADDR`, `SO_REUSEPORT`, close-on-exec, non-blocking
/// accepted sockets) whose read event accepts at most `acceptsPerTurn` connections each time
/// the loop finds it ready. What it leaves in the kernel's queue is taken on the next turn, after
/// the events of the connections already open.
///
/// libevent's `evconnlistener` accepts until the queue is empty in one callback, and a TLS
/// server starts each handshake in the turn after its accept: under a storm of new connections
/// one turn then held dozens of handshakes (about 0.25 ms of CPU each) ahead of every request
/// already read, and requests on new TLS connections waited 3.5 to 7 ms at the median where
/// nginx, which takes one connection a turn (`multi_accept off`), answered in 1 to 2.5 ms.
package final class Listener {
    package let fd: Int32
    private var event: OpaquePointer?
    private let acceptsPerTurn: Int
    private let onAccept: (Int32, UnsafePointer<sockaddr>) -> Void
    private let onError: (Int32) -> Void

    /// `onAccept` gets each new socket and its peer's address; `onError` the `errno` of an
    /// accept that failed for a reason that does not go away by itself (out of descriptors).
    package init(loop: EventLoop, address: SocketAddress, backlog: Int32, acceptsPerTurn: Int,
                 onAccept: @escaping (Int32, UnsafePointer<sockaddr>) -> Void, onError: @escaping (Int32) -> Void) throws {
        precondition(acceptsPerTurn >= 1)
        self.acceptsPerTurn = acceptsPerTurn
        self.onAccept = onAccept
        self.onError = onError
        let s = socket(Int32(address.storage.ss_family), Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var one: Int32 = 1
        let size = socklen_t(MemoryLayout<Int32>.size)
        let bound = s >= 0
            && setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, size) == 0
            && setsockopt(s, SOL_SOCKET, SO_REUSEPORT, &one, size) == 0
            && address.withSockaddr({ sa, len in bind(s, sa, socklen_t(len)) }) == 0
            && listen(s, backlog) == 0
        guard bound else {
            let error = errno
            if s >= 0 { Glibc.close(s) }
            throw SocketError("cannot listen on \(address): \(String(cString: strerror(error)))", code: error)
        }
        fd = s
        event = event_new(loop.base, s, Int16(EV_READ | EV_PERSIST), { _, _, arg in
            Unmanaged<Listener>.fromOpaque(arg!).takeUnretainedValue().acceptReady()
        }, Unmanaged.passUnretained(self).toOpaque())
        enable()
    }

    deinit { close() }

    /// The port bound (the real one when asked for port 0).
    package var port: Int {
        var bound = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &bound) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        // sin_port and sin6_port lie at the same offset.
        return withUnsafePointer(to: bound) { p in
            p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
        }
    }

    package func enable() {
        if let event { event_add(event, nil) }
    }

    package func disable() {
        if let event { event_del(event) }
    }

    /// Stops accepting and closes the socket; connections already accepted stay.
    package func close() {
        guard let e = event else { return }
        event = nil
        event_free(e)
        Glibc.close(fd)
    }

    private func acceptReady() {
        for _ in 0..<acceptsPerTurn {
            var peer = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let s = withUnsafeMutablePointer(to: &peer) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    txg_accept_nonblocking(fd, $0, &length)
                }
            }
            guard s >= 0 else {
                let e = errno
                // Nothing left, or a connection reset before it was taken: not an error.
                if e == EAGAIN || e == EWOULDBLOCK || e == EINTR || e == ECONNABORTED { return }
                onError(e)
                return
            }
            withUnsafePointer(to: peer) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { onAccept(s, $0) } }
            // The callback may have closed this listener (a drain).
            if event == nil { return }
        }
    }
}
