import CLibevent
import Foundation
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
}
