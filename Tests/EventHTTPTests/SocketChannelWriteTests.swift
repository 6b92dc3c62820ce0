import CLibevent
import Foundation
import HTTPCore
import Testing
@testable import EventHTTP
#if canImport(Glibc)
import Glibc
#endif

/// `SocketChannel.write(_:then:)`: a response head and its body handed to the socket together
/// (one `sendmsg` when nothing is buffered ahead). Whatever the socket does not take, in the
/// head or in the body, is buffered and follows in order.
@Suite struct SocketChannelWriteTests {
    @Test(arguments: [(1, 0), (100, 5), (100_000, 3 << 20), (20, 3 << 20)])
    func aHeadAndBodyTheSocketTakesInPartsArriveWholeAndInOrder(headBytes: Int, bodyBytes: Int) throws {
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        defer { Glibc.close(fds[1]) }
        _ = fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK)
        var small: Int32 = 4096
        setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        let loop = EventLoop()
        let channel = SocketChannel(loop: loop, fd: fds[0])
        defer { channel.close() }
        let head = (0..<headBytes).map { UInt8(truncatingIfNeeded: $0 % 7 + 0x30) }
        let bodyPattern = (0..<bodyBytes).map { UInt8(truncatingIfNeeded: $0 % 251) }
        let body = Body(bodyPattern)
        // The reader starts only after the write: the socket takes what its buffer holds, no more.
        head.withUnsafeBytes { channel.write($0, then: body.buffer) }
        #expect(body.isEmpty, "the body's chains moved to the channel")
        let sentAtOnce = headBytes + bodyBytes - evbuffer_get_length(channel.output)
        if headBytes + bodyBytes > 1 << 20 { #expect(sentAtOnce < headBytes + bodyBytes, "the socket took it all") }
        let reader = fds[1]
        let total = headBytes + bodyBytes
        final class Received: @unchecked Sendable { var bytes: [UInt8] = [] }
        let received = Received()
        let done = DispatchSemaphore(value: 0)
        Thread {
            var chunk = [UInt8](repeating: 0, count: 65_536)
            while received.bytes.count < total {
                let n = chunk.withUnsafeMutableBytes { recv(reader, $0.baseAddress, $0.count, 0) }
                if n <= 0 { break }
                received.bytes += chunk[..<n]
            }
            done.signal()
        }.start()
        let deadline = Date().addingTimeInterval(20)
        while !channel.flush() && Date() < deadline { usleep(500) }
        #expect(done.wait(timeout: .now() + 20) == .success)
        let bytes = received.bytes
        #expect(bytes.count == total)
        #expect(bytes.prefix(headBytes).elementsEqual(head), "the head arrives first and whole")
        #expect(bytes.dropFirst(headBytes).elementsEqual(bodyPattern), "then the body, in order")
    }

    /// A proxied request's small body leaves in the same system call as its head: the upstream
    /// gets the request in one segment, not its head and then its body (one wake-up, not two).
    /// Either way the body stays whole, for a resend on another connection; a large one follows
    /// the head by reference.
    @Test(arguments: [45, UpstreamCall.bodyWithHeadLimit + 1])
    func aSmallRequestBodyLeavesWithItsHead(bodyBytes: Int) throws {
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        defer { Glibc.close(fds[1]) }
        _ = fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK)
        let loop = EventLoop()
        let channel = SocketChannel(loop: loop, fd: fds[0])
        defer { channel.close() }
        final class Ignored: UpstreamResponseHandler {
            func upstreamResponseHead(_ head: ResponseHead, framing: BodyFraming) {}
            func upstreamResponseBody(_ body: Body) {}
            func upstreamResponseEnd() {}
            func upstreamFailed(_ failure: UpstreamFailure) {}
            func upstreamWillResend(after failure: UpstreamFailure) {}
        }
        var client = HTTPHeaders()
        client.add("Host", "upstream")
        let pattern = (0..<bodyBytes).map { UInt8(truncatingIfNeeded: $0 % 251) }
        let body = Body(pattern)
        let call = UpstreamCall(loop: loop, method: "POST", target: "/transfer", headers: ForwardedFields(client), body: body,
                                resendable: false, handler: Ignored())
        call.writeRequest(to: channel, with: HeadScratch())
        #expect(body.bytes == pattern, "the body stays whole for a resend")
        var received = [UInt8](repeating: 0, count: 1 << 20)
        let n = received.withUnsafeMutableBytes { recv(fds[1], $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        let head = Array("POST /transfer HTTP/1.1\r\nHost: upstream\r\nContent-Length: \(bodyBytes)\r\n\r\n".utf8)
        if bodyBytes <= UpstreamCall.bodyWithHeadLimit {
            #expect(evbuffer_get_length(channel.output) == 0, "nothing left behind for a second system call")
            #expect(Array(received.prefix(max(0, n))) == head + pattern, "head and body in one read")
        } else {
            #expect(Array(received.prefix(max(0, n))) == head, "the head at once")
            #expect(evbuffer_get_length(channel.output) == bodyBytes, "the body by reference, flushed next")
        }
    }
}
