import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A misbehaving upstream: a plain TCP listener on a free 127.0.0.1 port that reads each
/// request head and answers with exactly the bytes it is given, whatever they are (bare LF,
/// broken chunks), then keeps the connection open until stopped (so that only the bytes, not
/// a close, can end the response).
public final class RawUpstream: @unchecked Sendable {
    // @unchecked: `response` and `port` are immutable; the descriptors are guarded by `lock`.
    public let port: Int
    /// The answers in order: request n gets `responses[n]` (the last one once they run out).
    private let responses: [[UInt8]]
    /// With `resetOnConnectionRequest: n`: the n-th request on each connection is read and
    /// recorded (a backend that commits it), then the connection is reset without an answer.
    private let resetAt: Int?
    private let listener: Int32
    private let lock = NSLock()
    private var clients: [Int32] = []
    private var stopped = false
    private var heads: [String] = []
    private var rawHeads: [[UInt8]] = []

    /// How many connections were accepted so far.
    public var connectionCount: Int { lock.withLock { accepted } }
    private var accepted = 0

    /// The requests received so far (request line, header lines, body), in order.
    public var receivedRequests: [String] { lock.withLock { heads } }

    /// The same requests as the bytes received (for bytes that are not UTF-8).
    public var receivedRequestBytes: [[UInt8]] { lock.withLock { rawHeads } }

    public var url: String { "http://127.0.0.1:\(port)" }

    public convenience init(response: [UInt8]) throws {
        try self.init(responses: [response])
    }

    /// A scripted server: the n-th request (counted across connections) gets `responses[n]`.
    /// A request's `Content-Length` body is read and recorded with its head.
    /// With `resetOnConnectionRequest: n`, the n-th request on each connection (from 1) is
    /// recorded and then the connection is reset (RST) instead of answered: a backend that
    /// commits a request and loses the connection before its response.
    public init(responses: [[UInt8]], resetOnConnectionRequest: Int? = nil) throws {
        precondition(!responses.isEmpty)
        self.responses = responses
        self.resetAt = resetOnConnectionRequest
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard listener >= 0 else { throw HarnessError("socket(): \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 64) == 0 else {
            Glibc.close(listener)
            throw HarnessError("cannot listen: \(String(cString: strerror(errno)))")
        }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &len) }
        }
        port = Int(UInt16(bigEndian: addr.sin_port))
        self.listener = listener
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    deinit { stop() }

    /// Ends the listener and every connection (the peers see them closed). Safe to call more
    /// than once.
    ///
    /// Only shut down here: each descriptor is closed by the thread that uses it, once it is
    /// done. Closed here, a number could be handed to a new socket (another test's server or
    /// connection) while a thread still blocked on the old one went on to read the new one, and
    /// answer another test's request with this server's script.
    public func stop() {
        lock.withLock {
            guard !stopped else { return }
            stopped = true
            shutdown(listener, Int32(SHUT_RDWR))
            // Under the lock: a connection's thread takes its descriptor out of `clients` (under
            // the lock) before it closes it, so none shut down here can have been closed.
            for fd in clients { shutdown(fd, Int32(SHUT_RDWR)) }
            clients = []
        }
    }

    private func acceptLoop() {
        defer { Glibc.close(listener) }
        while true {
            let fd = accept(listener, nil, nil)
            if fd < 0 {
                if errno == EINTR { continue }
                return
            }
            lock.lock()
            if stopped { lock.unlock(); Glibc.close(fd); return }
            clients.append(fd)
            accepted += 1
            lock.unlock()
            let t = Thread { [self] in serve(fd) }
            t.start()
        }
    }

    /// Reads requests (head, then a `Content-Length` body) and answers each with its response;
    /// closes `fd` when done (a reset on purpose closes it its own way).
    private func serve(_ fd: Int32) {
        var closed = false
        defer {
            if !closed {
                lock.withLock { clients.removeAll { $0 == fd } }
                Glibc.close(fd)
            }
        }
        var pending: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        var onThisConnection = 0
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
            if n <= 0 { return }
            pending += chunk[0..<n]
            while let end = Self.headEnd(pending) {
                let head = String(decoding: pending[0..<end], as: UTF8.self)
                let length = Self.contentLength(head)
                guard pending.count >= end + length else { break }
                let bytes = Array(pending[0..<(end + length)])
                let request = String(decoding: bytes, as: UTF8.self)
                pending.removeSubrange(0..<(end + length))
                onThisConnection += 1
                if onThisConnection == resetAt {
                    lock.withLock {
                        heads.append(request)
                        clients.removeAll { $0 == fd }
                    }
                    // A zero linger makes close() send a reset.
                    var l = linger(l_onoff: 1, l_linger: 0)
                    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, socklen_t(MemoryLayout<linger>.size))
                    Glibc.close(fd)
                    closed = true
                    return
                }
                let response = lock.withLock {
                    heads.append(request)
                    rawHeads.append(bytes)
                    return responses[min(heads.count - 1, responses.count - 1)]
                }
                let ok = response.withUnsafeBytes { send(fd, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) }
                if ok < 0 { return }
            }
        }
    }

    private static func contentLength(_ head: String) -> Int {
        for line in head.split(separator: "\r\n") where line.lowercased().hasPrefix("content-length:") {
            return Int(line.dropFirst(15).trimmingCharacters(in: .whitespaces)) ?? 0
        }
        return 0
    }

    private static func headEnd(_ b: [UInt8]) -> Int? {
        guard b.count >= 4 else { return nil }
        for i in 0...(b.count - 4) where b[i] == 13 && b[i + 1] == 10 && b[i + 2] == 13 && b[i + 3] == 10 { return i + 4 }
        return nil
    }
}
