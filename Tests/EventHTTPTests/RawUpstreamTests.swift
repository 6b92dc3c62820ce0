import Foundation
import Testing
import TestSupport

/// The scripted server the proxy tests use (`RawUpstream`), itself: it must answer nobody but
/// its own clients.
@Suite struct RawUpstreamTests {
    static func ok(_ body: String) -> [UInt8] { Array("HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)".utf8) }

    /// A server stopped while a connection of its waits for its next request answers nothing
    /// more. It used to close the connection's descriptor under the thread reading it: the
    /// number went to the next socket opened (here the next server's connection), and a late
    /// request on the old connection was answered on the new one, with the old server's
    /// script. A full-suite run once showed it: a client library test got another test's
    /// answer ("Successfully logged out").
    @Test func aStoppedServerAnswersNobodyElse() throws {
        let a = try RawUpstream(responses: [Self.ok("from a")])
        let old = try RawHTTPClient(port: a.port, timeout: 2)
        defer { old.close() }
        #expect(try old.request("GET", "/").bodyText == "from a")
        a.stop()

        let b = try RawUpstream(responses: [Self.ok("from b")])
        defer { b.stop() }
        let client = try RawHTTPClient(port: b.port, timeout: 5)
        defer { client.close() }
        let deadline = Date().addingTimeInterval(5)
        while b.connectionCount < 1 && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        #expect(b.connectionCount == 1)
        // The old connection speaks again (after the fix it is shut down, and this may fail).
        try? old.sendRequest("GET", "/late")
        Thread.sleep(forTimeInterval: 0.2)
        #expect(try client.request("GET", "/").bodyText == "from b")
        #expect(b.receivedRequests.count == 1)
    }
}
