import Foundation
import Logging
import Testing
import TestSupport
import TxGateCore
@testable import TxGate

/// The access line is the JSON line `JSONLogHandler` writes: its own keys first, then every
/// field in key order, the logger's own metadata (encoded once, `AccessLog.fixed`) among the
/// request's fields wherever its keys sort.
@Suite struct AccessLogTests {
    @Test func theLoggersOwnFieldsSitAmongTheRequestsInKeyOrder() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path + "/access.log"
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        #expect(fd >= 0)
        defer { close(fd) }
        var handler = JSONLogHandler(label: "txgate", fd: fd)
        // Before every request field, between two of them, right after one that is its prefix,
        // and after all of them.
        handler.metadata = ["aaa": "first", "method_x": "m\"x", "pid": "42", "zzz": .stringConvertible(7)]
        let logger = Logger(label: "txgate") { _ in handler }
        let server = try PhaseServer.start(accessLog: AccessLog(logger: logger)) { _ in
            [CanonicalRequestPhase(paths: PathsConfig()), Report()]
        }
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        defer { client.close() }
        #expect(try client.request("GET", "/a/b?x=1", headers: [("User-Agent", "t/1 \"quoted\"")]).status == 200)
        var line = ""
        #expect(Timing.poll(timeout: 3) {
            line = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            return line.hasSuffix("\n")
        })
        let keys = ["ts", "level", "label", "msg", "aaa", "bytes", "client", "details", "duration_ms", "log", "method", "method_x",
                    "path", "pid", "request_id", "status", "user_agent", "zzz"]
        let at = keys.map { key in line.range(of: "\"\(key)\":").map { line.distance(from: line.startIndex, to: $0.lowerBound) } ?? -1 }
        #expect(!at.contains(-1), "\(line)")
        #expect(at == at.sorted(), "\(line)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object.count == keys.count, "\(line)")
        #expect(object["aaa"] as? String == "first")
        #expect(object["method_x"] as? String == "m\"x")
        #expect(object["pid"] as? String == "42")
        #expect(object["zzz"] as? Int == 7)
        #expect(object["log"] as? String == "access")
        #expect(object["msg"] as? String == "access")
        #expect(object["path"] as? String == "/a/b")
        #expect(object["method"] as? String == "GET")
        #expect(object["user_agent"] as? String == "t/1 \"quoted\"")
        #expect(object["status"] as? Int == 200)
    }
}
