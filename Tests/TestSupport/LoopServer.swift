import EventHTTP
import Foundation
import Synchronization

/// An HTTPServer alone on its own loop thread, with limits no gateway config can set (the
/// idle and write timeouts), answering every request with `handler`.
public final class LoopServer: Sendable {
    public let port: Int
    public let loop = EventLoop()
    private let server: LoopBound<HTTPServer>
    private let finished = DispatchSemaphore(value: 0)
    /// Client connections open now (told by the server on its loop).
    public let open = Atomic<Int>(0)

    /// With `tls`, the server listens with TLS.
    public init(limits: ServerLimits, tls: TLSContext? = nil, _ handler: @escaping (ServerExchange) -> Void) throws {
        let s = try HTTPServer(loop: loop, address: SocketAddress(host: "127.0.0.1", port: 0), tls: tls,
                               limits: limits, errorBody: { _, m in ("text/plain", Array(m.utf8)) }, handler: handler)
        port = s.boundPort
        server = LoopBound(s, loop: loop)
        s.onConnectionCountChange = { [weak self] d in self?.open.add(d, ordering: .relaxed) }
        Thread { [loop, finished] in
            loop.run()
            finished.signal()
        }.start()
    }

    public var openConnections: Int { open.load(ordering: .relaxed) }

    public func stop() {
        loop.execute { [server] in server.value.closeAll() }
        loop.stop()
        finished.wait()
    }
}

