import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A blocking HTTP/1.1 client on a plain POSIX socket. It sends exactly the bytes it is told
/// to (so tests can send what a well-behaved library never would), keeps the connection for
/// several requests, and never hangs: every receive is bounded by SO_RCVTIMEO.
public final class RawHTTPClient {
    public let host: String
    public let port: Int
    public let timeout: Double
    private var fd: Int32
    private var buffer: [UInt8] = []
    private var readOffset = 0
    /// True once a read returned end-of-stream.
    private(set) var peerClosed = false

    /// `source`: the local address to connect from (any 127.0.0.0/8 address on loopback), to
    /// look like another client.
    public init(port: Int, host: String = "127.0.0.1", source: String? = nil, timeout: Double = 10) throws {
        self.host = host
        self.port = port
        self.timeout = timeout
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SocketFailure.system("socket(): \(errnoString())") }
        var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - Double(Int(timeout))) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        if let source {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            let bound = inet_pton(AF_INET, source, &local.sin_addr) == 1 && withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            } == 0
            guard bound else {
                let e = errno
                Glibc.close(fd)
                throw SocketFailure.system("bind(\(source)): \(errnoString(e))")
            }
        }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET, host, &addr.sin_addr) == 1 else {
            Glibc.close(fd)
            throw SocketFailure.system("not an IPv4 address: \(host)")
        }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if rc != 0 {
            let e = errno
            Glibc.close(fd)
            fd = -1
            throw SocketFailure.system("connect(\(host):\(port)): \(errnoString(e))")
        }
    }

    deinit { close() }

    public func close() {
        if fd >= 0 {
            Glibc.close(fd)
            fd = -1
        }
    }

    /// Closes the connection with a reset (a zero linger), whatever was received or not: the
    /// server sees a client that left, never a half-close.
    public func reset() {
        guard fd >= 0 else { return }
        var l = linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, socklen_t(MemoryLayout<linger>.size))
        close()
    }

    /// Half-closes the connection (shutdown(SHUT_WR)): the server reads end-of-stream, while
    /// this client can still read the answer.
    public func shutdownWrite() {
        if fd >= 0 { shutdown(fd, Int32(SHUT_WR)) }
    }

    // MARK: Sending

    /// Writes every byte, or throws (reset, timeout).
    public func send(_ bytes: [UInt8]) throws {
        guard fd >= 0 else { throw SocketFailure.system("send on a closed client") }
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { p in
                Glibc.send(fd, p.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
            }
            if n < 0 {
                let e = errno
                if e == EINTR { continue }
                if e == EAGAIN || e == EWOULDBLOCK {
                    throw SocketFailure.timedOut("send stalled after \(sent) of \(bytes.count) bytes")
                }
                if e == EPIPE || e == ECONNRESET {
                    throw SocketFailure.reset("send after \(sent) of \(bytes.count) bytes: \(errnoString(e))")
                }
                throw SocketFailure.system("send: \(errnoString(e))")
            }
            sent += n
        }
    }

    public func send(_ text: String) throws {
        try send(Array(text.utf8))
    }

    /// Sends a request head (and body). Adds `Host` unless given, and `Content-Length` when
    /// there is a body and neither Content-Length nor Transfer-Encoding was given.
    public func sendRequest(_ method: String, _ target: String, headers: [(String, String)] = [],
                     body: [UInt8]? = nil) throws {
        var head = "\(method) \(target) HTTP/1.1\r\n"
        let names = Set(headers.map { $0.0.lowercased() })
        if !names.contains("host") { head += "Host: \(host):\(port)\r\n" }
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if let body, !names.contains("content-length"), !names.contains("transfer-encoding") {
            head += "Content-Length: \(body.count)\r\n"
        }
        head += "\r\n"
        try send(Array(head.utf8) + (body ?? []))
    }

    /// Sends a request and reads its response.
    public func request(_ method: String, _ target: String, headers: [(String, String)] = [],
                 body: [UInt8]? = nil) throws -> HTTPResponse {
        try sendRequest(method, target, headers: headers, body: body)
        return try readResponse(method: method)
    }

    /// Opens a connection, sends one request, reads the response and closes.
    public static func fetch(port: Int, _ method: String = "GET", _ target: String, headers: [(String, String)] = [],
                             body: [UInt8]? = nil, source: String? = nil, timeout: Double = 10) throws -> HTTPResponse {
        let c = try RawHTTPClient(port: port, source: source, timeout: timeout)
        defer { c.close() }
        return try c.request(method, target, headers: headers, body: body)
    }

    // MARK: Receiving

    /// Reads one response (skipping 1xx interim responses other than 101, which it lists in
    /// `interim`). `method` matters for framing: a HEAD response has no body.
    public func readResponse(method: String = "GET") throws -> HTTPResponse {
        var interim: [Int] = []
        while true {
            let statusLine = try readLine()
            let parts = statusLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count >= 2, parts[0].hasPrefix("HTTP/"), let status = Int(parts[1]) else {
                throw SocketFailure.system("malformed status line: \(statusLine.debugDescription)")
            }
            var headers: [(name: String, value: String)] = []
            while true {
                let line = try readLine()
                if line.isEmpty { break }
                guard let colon = line.firstIndex(of: ":") else {
                    throw SocketFailure.system("malformed header line: \(line.debugDescription)")
                }
                headers.append((name: String(line[..<colon]),
                                value: line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
            }
            var response = HTTPResponse(version: String(parts[0]), status: status,
                                        reason: parts.count > 2 ? String(parts[2]) : "",
                                        headers: headers, body: [], framing: .none)
            if (100..<200).contains(status) && status != 101 {
                interim.append(status)
                continue
            }
            response.interim = interim
            try readBody(into: &response, method: method)
            return response
        }
    }

    private func readBody(into r: inout HTTPResponse, method: String) throws {
        if method == "HEAD" || (100..<200).contains(r.status) || r.status == 204 || r.status == 304 {
            r.framing = .none
            return
        }
        if r.headerTokens("Transfer-Encoding").last == "chunked" {
            r.framing = .chunked
            r.body = try readChunkedBody()
            return
        }
        if let cl = r.header("Content-Length") {
            guard let n = Int(cl), n >= 0 else { throw SocketFailure.system("bad Content-Length: \(cl)") }
            r.framing = .contentLength(n)
            r.body = try readExactly(n)
            return
        }
        r.framing = .untilClose
        r.body = try readUntilClose()
    }

    private func readChunkedBody() throws -> [UInt8] {
        var body: [UInt8] = []
        while true {
            let sizeLine = try readLine()
            let hex = sizeLine.split(separator: ";", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
            guard let size = Int(hex, radix: 16), size >= 0 else {
                throw SocketFailure.system("bad chunk size line: \(sizeLine.debugDescription)")
            }
            if size == 0 {
                while try !readLine().isEmpty {}  // trailer fields
                return body
            }
            body += try readExactly(size)
            let end = try readLine()
            guard end.isEmpty else { throw SocketFailure.system("chunk not followed by CRLF: \(end.debugDescription)") }
        }
    }

    private var available: Int { buffer.count - readOffset }

    /// One recv() into the buffer. Returns false at end of stream.
    private func fill() throws -> Bool {
        guard fd >= 0 else { throw SocketFailure.system("read on a closed client") }
        if peerClosed { return false }
        if readOffset > 0 && (readOffset == buffer.count || readOffset > 1 << 20) {
            buffer.removeSubrange(0..<readOffset)
            readOffset = 0
        }
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
            if n > 0 {
                buffer += chunk[0..<n]
                return true
            }
            if n == 0 {
                peerClosed = true
                return false
            }
            let e = errno
            if e == EINTR { continue }
            if e == EAGAIN || e == EWOULDBLOCK {
                throw SocketFailure.timedOut("no data from 127.0.0.1:\(port) within \(timeout) s (have \(available) unread bytes)")
            }
            if e == ECONNRESET { throw SocketFailure.reset("recv: \(errnoString(e))") }
            throw SocketFailure.system("recv: \(errnoString(e))")
        }
    }

    /// One CRLF-terminated line, without the CRLF (also for line-based protocols such as RESP).
    public func readLine() throws -> String {
        // Bytes after readOffset already searched for CRLF (the buffer may be compacted by
        // fill(), so this is kept relative to readOffset).
        var searched = 0
        while true {
            var i = readOffset + searched
            while i + 1 < buffer.count {
                if buffer[i] == 13 && buffer[i + 1] == 10 {
                    let line = String(decoding: buffer[readOffset..<i], as: UTF8.self)
                    readOffset = i + 2
                    return line
                }
                i += 1
            }
            searched = max(0, available - 1)
            guard try fill() else {
                throw SocketFailure.closedEarly("while reading a line (\(available) bytes unread)")
            }
        }
    }

    public func readExactly(_ n: Int) throws -> [UInt8] {
        while available < n {
            guard try fill() else {
                throw SocketFailure.closedEarly("body truncated: got \(available) of \(n) bytes")
            }
        }
        let out = Array(buffer[readOffset..<(readOffset + n)])
        readOffset += n
        return out
    }

    private func readUntilClose() throws -> [UInt8] {
        while try fill() {}
        let out = Array(buffer[readOffset...])
        readOffset = buffer.count
        return out
    }

    /// Whether the server has closed the connection: waits up to `within` seconds for the
    /// socket to become readable and then checks for end-of-stream (a reset counts as closed).
    /// Bytes that arrive instead are kept for the next read.
    public func serverClosed(within: Double = 1) -> Bool {
        if peerClosed { return true }
        guard fd >= 0 else { return true }
        if available > 0 { return false }
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let rc = poll(&pfd, 1, Int32(within * 1000))
        if rc <= 0 { return false }
        do {
            return try !fill()
        } catch SocketFailure.reset {
            return true
        } catch {
            return false
        }
    }
}
