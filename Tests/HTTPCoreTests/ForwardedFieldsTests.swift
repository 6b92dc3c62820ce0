import Testing
@testable import HTTPCore

@Suite struct ForwardedFieldsTests {
    func parsed(_ fields: String) throws -> HTTPHeaders {
        try Array("GET / HTTP/1.1\r\n\(fields)\r\n".utf8).withUnsafeBytes { try HTTPParser.parseRequestHead($0) }.headers
    }

    func lines(_ f: ForwardedFields) -> [String] {
        var w = HeadWriter()
        w.writeFields(f)
        return String(decoding: w.bytes, as: UTF8.self).split(separator: "\r\n").map(String.init)
    }

    /// The client's kept fields in their order, a replaced one in its place, then the forwarding
    /// fields, then the added ones; what the writer writes is what `headers` holds.
    @Test func fieldsGoInOrderWithoutACopy() throws {
        let client = try parsed("Host: gw.example\r\nCookie: a=1; s=x\r\nAccept: */*\r\nX-Drop: 1\r\nX-Keep: 2\r\n")
        var f = ForwardedFields(client)
        f.drop(at: 0)
        f.drop(at: 3)
        f.replace(at: 1, with: HTTPHeaders.Field(name: "Cookie", value: "a=1"))
        f.forwarding = .init(host: "backend:9000", forwardedFor: "10.0.0.1", tls: true, forwardedHost: 0, requestId: "rid")
        f.add("X-TxGate-User", "alice")
        #expect(lines(f) == ["Cookie: a=1", "Accept: */*", "X-Keep: 2", "Host: backend:9000", "X-Forwarded-For: 10.0.0.1",
                             "X-Forwarded-Proto: https", "X-Forwarded-Host: gw.example", "X-Request-Id: rid",
                             "X-TxGate-User: alice"])
        var w = HeadWriter()
        w.writeFields(f.headers)
        var direct = HeadWriter()
        direct.writeFields(f)
        #expect(w.bytes == direct.bytes)
        #expect(client.count == 5, "the client's headers are not changed")

        f.forwarding?.tls = false
        f.forwarding?.forwardedHost = nil
        #expect(lines(f).contains("X-Forwarded-Proto: http") && !lines(f).contains { $0.hasPrefix("X-Forwarded-Host") })
    }

    /// `remove` drops the client's fields (a replacement too) and the added ones of that name,
    /// in any case; the forwarding fields stay.
    @Test func removeDropsClientAndAddedFields() throws {
        var f = ForwardedFields(try parsed("Content-Type: text/plain\r\ncontent-type: x\r\nAccept: a\r\nCookie: s=1\r\n"))
        f.replace(at: 3, with: HTTPHeaders.Field(name: "Cookie", value: "t=2"))
        f.add("Content-Type", "application/json")
        f.forwarding = .init(host: "h", forwardedFor: "ip", tls: false, forwardedHost: nil, requestId: "r")
        f.remove("CONTENT-TYPE")
        f.remove("cookie")
        f.remove("Host")
        #expect(lines(f) == ["Accept: a", "Host: h", "X-Forwarded-For: ip", "X-Forwarded-Proto: http", "X-Request-Id: r"])
        f.add("Content-Type", "text/csv")
        #expect(lines(f).last == "Content-Type: text/csv")
        // Dropped after it was replaced: gone.
        var g = ForwardedFields(try parsed("Cookie: s=1\r\nAccept: a\r\n"))
        g.replace(at: 0, with: HTTPHeaders.Field(name: "Cookie", value: "t=2"))
        g.drop(at: 0)
        #expect(lines(g) == ["Accept: a"])
    }

    /// A value that is not UTF-8 (obs-text) goes upstream as its bytes, kept or replaced.
    @Test func obsTextGoesAsItsBytes() throws {
        let raw: [UInt8] = Array("GET / HTTP/1.1\r\nX-Latin: caf".utf8) + [0xE9] + Array("\r\nX-Other: 1\r\n\r\n".utf8)
        let client = try raw.withUnsafeBytes { try HTTPParser.parseRequestHead($0) }.headers
        var f = ForwardedFields(client)
        var w = HeadWriter()
        w.writeFields(f)
        #expect(w.bytes == Array("X-Latin: caf".utf8) + [0xE9] + Array("\r\nX-Other: 1\r\n".utf8))
        f.replace(at: 1, with: client.field(at: 0))
        var w2 = HeadWriter()
        w2.writeFields(f)
        #expect(w2.bytes == Array("X-Latin: caf".utf8) + [0xE9] + Array("\r\n".utf8) + Array("X-Latin: caf".utf8) + [0xE9]
                + Array("\r\n".utf8))
    }

    /// Fields beyond the first 64 are dropped and replaced as exactly as the first ones.
    @Test func manyFields() throws {
        let client = try parsed((0..<150).map { "X-F\($0): \($0)\r\n" }.joined())
        var f = ForwardedFields(client)
        let dropped: Set = [0, 63, 64, 65, 127, 128, 149]
        for i in dropped { f.drop(at: i) }
        f.replace(at: 100, with: HTTPHeaders.Field(name: "X-F100", value: "new"))
        f.replace(at: 2, with: HTTPHeaders.Field(name: "X-F2", value: "new"))
        let expected = (0..<150).filter { !dropped.contains($0) }.map { $0 == 2 || $0 == 100 ? "X-F\($0): new" : "X-F\($0): \($0)" }
        #expect(lines(f) == expected)
        f.remove("x-f140")
        #expect(lines(f) == expected.filter { $0 != "X-F140: 140" })
    }
}
