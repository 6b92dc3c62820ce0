import Glibc
import CLibevent

/// One TCP connect to an address, closed as soon as it is accepted: is something listening
/// there? (A readiness check; no TLS handshake, no request.)
public enum ConnectProbe {
    /// Connects to `address`; `done` is called once, on `loop`, never from inside this call.
    public static func run(on loop: EventLoop, to address: SocketAddress, timeoutMs: Int,
                           _ done: @escaping (Result<Void, SocketError>) -> Void) {
        loop.preconditionInEventLoop()
        ConnectAttempt(loop: loop, done: done).start(address, timeoutMs: timeoutMs)
    }
}

/// A probe's connection, confined to its loop; it keeps itself alive until it finishes.
final class ConnectAttempt: ChannelHandler {
    private let loop: EventLoop
    private var channel: SocketChannel?
    private var timer: LoopTimer?
    private var done: ((Result<Void, SocketError>) -> Void)?
    private var retainedSelf: Unmanaged<ConnectAttempt>?

    init(loop: EventLoop, done: @escaping (Result<Void, SocketError>) -> Void) {
        self.loop = loop
        self.done = done
        super.init()
    }

    func start(_ address: SocketAddress, timeoutMs: Int) {
        // Alive until finished, whatever the caller keeps.
        retainedSelf = Unmanaged.passRetained(self)
        let t = LoopTimer(loop: loop) { [weak self] in self?.finish(.failure(SocketError("no answer within \(timeoutMs) ms"))) }
        t.schedule(afterMs: timeoutMs)
        timer = t
        let channel = SocketChannel(loop: loop, fd: -1)
        self.channel = channel
        channel.setHandler(self)
        if !channel.connect(to: address) {
            let code = errno
            later(.failure(SocketError(String(cString: strerror(code)), code: code)))
        }
    }

    private func later(_ result: Result<Void, SocketError>) {
        loop.execute { [self] in finish(result) }
    }

    override func event(_ what: Int32) {
        if what & BEV_EVENT_CONNECTED != 0 {
            finish(.success(()))
        } else {
            let err = errno
            finish(.failure(err != 0 ? SocketError(String(cString: strerror(err)), code: err) : SocketError("connection closed")))
        }
    }

    private func finish(_ result: Result<Void, SocketError>) {
        guard let done else { return }
        self.done = nil
        timer?.cancel()
        timer = nil
        channel?.close()
        channel = nil
        done(result)
        let r = retainedSelf
        retainedSelf = nil
        r?.release()
    }
}
