import Foundation
import Logging
import Testing
@testable import TxGateCore

/// The access log's hand-made lines must be the JSON `JSONLogHandler` writes for the same event.
struct LogLineTests {
    @Test func fieldsAreEncodedAsTheSwiftLogHandlerEncodesThem() {
        for s in ["plain", "quote \" and \\ backslash", "tab\tnew\nline\r", "\u{01}\u{1f}", "ünïcødé ✓", ""] {
            var line = LogLine()
            line.field("k", s)
            #expect(String(decoding: line.bytes, as: UTF8.self) == #","k":"# + JSONLogHandler.encode(.string(s)))
        }
        for n in [0, 7, 200, 499, 1_234_567, Int.max] {
            var line = LogLine()
            line.field("k", n)
            #expect(String(decoding: line.bytes, as: UTF8.self) == #","k":"# + JSONLogHandler.encode(.stringConvertible(n)))
        }
        for nanos: UInt64 in [0, 400, 500, 999, 1_000, 1_500, 10_000, 100_000, 1_000_000, 1_234_567, 12_345_678_901, 250_000_000] {
            var line = LogLine()
            line.field("k", millisFromNanos: nanos)
            let ms = (Double(nanos) / 1_000).rounded() / 1_000
            #expect(String(decoding: line.bytes, as: UTF8.self) == #","k":"# + JSONLogHandler.encode(.stringConvertible(ms)), "\(nanos)")
        }
    }

    @Test func aLineIsTheHandlersLine() throws {
        var line = LogLine()
        line.begin(opening: LogLine.opening(level: "info", label: "txgate", message: "access"), seconds: 1_790_000_000, millis: 7)
        line.field("bytes", 12)
        line.append(encoded: LogLine.encodedField("log", json: #""access""#))
        line.field("path", "/a\"b")
        line.end()
        let text = String(decoding: line.bytes, as: UTF8.self)
        #expect(text == #"{"ts":"2026-09-21T14:13:20.007Z","level":"info","label":"txgate","msg":"access","bytes":12,"log":"access","path":"/a\"b"}"# + "\n")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.bytes)) as? [String: Any])
        #expect(object["path"] as? String == "/a\"b")
        // The same second formatted by the handler.
        let handlerTs = JSONLogHandler.timestamp()
        var now = LogLine()
        now.begin(opening: LogLine.opening(level: "info", label: "txgate", message: "m"))
        let mine = String(decoding: now.bytes, as: UTF8.self).dropFirst(7).prefix(19)
        #expect(mine == handlerTs.prefix(19) || mine > handlerTs.prefix(19))
    }

    /// The pieces encoded once (a line's opening, a fixed field) and the path read from a
    /// target write what the handler writes.
    @Test func piecesEncodedOnceWriteWhatTheLineWouldWrite() {
        for (level, label, message) in [("info", "txgate", "access"), ("warning", "a \"quoted\"\tlabel", "m\u{01}")] {
            var once = LogLine()
            once.begin(opening: LogLine.opening(level: level, label: label, message: message), seconds: 1_790_000_000, millis: 42)
            #expect(String(decoding: once.bytes, as: UTF8.self)
                == #"{"ts":"2026-09-21T14:13:20.042Z","level":"# + JSONLogHandler.encode(.string(level)) + #","label":"#
                + JSONLogHandler.encode(.string(label)) + #","msg":"# + JSONLogHandler.encode(.string(message)))
        }
        var fixed = LogLine()
        fixed.append(encoded: LogLine.encodedField("k\"ey", json: #"{"a":1}"#))
        #expect(String(decoding: fixed.bytes, as: UTF8.self) == #","k\"ey":{"a":1}"#)
        for (target, path) in [("/", "/"), ("/a/b?x=1&y=?", "/a/b"), ("?q", ""), ("/q\"uote\u{7f}?", "/q\"uote\u{7f}"), ("/ünï?ç", "/ünï"), ("", "")] {
            var line = LogLine()
            line.field("path", target, before: UInt8(ascii: "?"))
            #expect(String(decoding: line.bytes, as: UTF8.self) == #","path":"# + JSONLogHandler.encode(.string(path)), "\(target)")
        }
    }
}
