import Testing
@testable import HTTPCore

/// `HTTPHeaders` keeps its fields as bytes (one buffer, ranges into it): what it reads as text,
/// what it copies as bytes and what it writes must be the fields given, in order.
@Suite struct HTTPHeadersTests {
    func parsed(_ fields: [UInt8]) throws -> HTTPHeaders {
        let wire = Array("GET / HTTP/1.1\r\n".utf8) + fields + Array("\r\n".utf8)
        return try wire.withUnsafeBytes { try HTTPParser.parseRequestHead($0).headers }
    }

    func written(_ h: HTTPHeaders) -> String {
        var w = HeadWriter()
        w.writeFields(h)
        return String(decoding: w.bytes, as: UTF8.self)
    }

    @Test func parsedFieldsReadAsTheirNamesAndTrimmedValues() throws {
        let h = try parsed(Array("Host: a.example\r\nX-Empty:\r\nAccept:  text/html , */*\t\r\nhost: b\r\nCONNECTION: Keep-Alive, X-Hop\r\n".utf8))
        #expect(h.count == 5)
        #expect(h.fields.map(\.name) == ["Host", "X-Empty", "Accept", "host", "CONNECTION"])
        #expect(h.fields.map(\.value) == ["a.example", "", "text/html , */*", "b", "Keep-Alive, X-Hop"])
        #expect(h.first("HOST") == "a.example")
        #expect(h.values("host") == ["a.example", "b"])
        #expect(h.contains("x-empty") && !h.contains("X-Emptyy") && !h.contains("X-Empt"))
        #expect(h.first("Missing") == nil)
        #expect(h.hasToken("Connection", "keep-alive") && h.hasToken("connection", "X-HOP"))
        #expect(!h.hasToken("Connection", "close") && !h.hasToken("Accept", "text"))
        #expect(h.tokens("Accept") == ["text/html", "*/*"])
        #expect(h.connectionNamedHeaders() == ["X-Hop"])
        #expect(written(h) == "Host: a.example\r\nX-Empty: \r\nAccept: text/html , */*\r\nhost: b\r\nCONNECTION: Keep-Alive, X-Hop\r\n")
        #expect(h.wireSize == written(h).utf8.count)
    }

    @Test func fieldsCopiedAsBytesKeepTheirOrderAndWhatWasNotUTF8() throws {
        let source = try parsed(Array("A: 1\r\nX-Latin: caf".utf8) + [0xE9] + Array("\r\nB: two words\r\n".utf8))
        var copy = HTTPHeaders()
        copy.add("First", "0")
        source.forEachRaw { f in
            if !f.name.elementsEqual("B".utf8) { copy.append(f) }
        }
        copy.add("Last", "\u{e9}t\u{e9}")
        #expect(copy.fields.map(\.name) == ["First", "A", "X-Latin", "Last"])
        #expect(copy.first("X-Latin") == "caf\u{FFFD}")
        #expect(copy.fields[2].received == Array("caf".utf8) + [0xE9])
        #expect(copy.fields[3].received == nil)
        var w = HeadWriter()
        w.writeFields(copy)
        #expect(w.bytes == Array("First: 0\r\nA: 1\r\nX-Latin: caf".utf8) + [0xE9] + Array("\r\nLast: \u{e9}t\u{e9}\r\n".utf8))
        // A field appended as a Field keeps its received bytes too.
        var again = HTTPHeaders()
        again.append(copy.fields[2])
        #expect(again.fields[0].received == Array("caf".utf8) + [0xE9])
    }

    @Test func removingAndSettingKeepTheOtherFieldsInOrder() throws {
        var h = try parsed(Array("A: 1\r\nB: 2\r\na: 3\r\nC: 4\r\n".utf8))
        h.remove("a")
        #expect(h.fields.map(\.value) == ["2", "4"])
        h.add("D", "5")
        h.set("b", "6")
        #expect(written(h) == "C: 4\r\nD: 5\r\nb: 6\r\n")
        h.removeAll(where: { $0.value == "5" })
        #expect(written(h) == "C: 4\r\nb: 6\r\n")
        h.removeAll(whereName: { $0.count == 1 && $0[0] == UInt8(ascii: "C") })
        #expect(written(h) == "b: 6\r\n")
        h.remove("nothing")
        #expect(h.count == 1)
    }

    @Test func equalityIsSameFieldsInSameOrder() throws {
        let p = try parsed(Array("A: 1\r\nB:  2 \r\n".utf8))
        #expect(p == HTTPHeaders([("A", "1"), ("B", "2")]))
        #expect(p != HTTPHeaders([("B", "2"), ("A", "1")]))
        #expect(p != HTTPHeaders([("a", "1"), ("B", "2")]), "names compare exactly")
        #expect(p != HTTPHeaders([("A", "1")]))
        var q = HTTPHeaders([("A", "1"), ("X", "y"), ("B", "2")])
        q.remove("X")
        #expect(p == q, "bytes left behind by a removal do not count")
    }

    @Test func byteNameComparisons() {
        func bytes(_ s: StaticString, _ body: (UnsafeBufferPointer<UInt8>) -> Bool) -> Bool {
            s.withUTF8Buffer(body)
        }
        #expect(bytes("Content-Length") { equalsLowercased($0, "content-length") })
        #expect(!bytes("Content-Lengt") { equalsLowercased($0, "content-length") })
        #expect(!bytes("Content_Length") { equalsLowercased($0, "content-length") })
        #expect(bytes("") { equalsLowercased($0, "") })
        #expect(bytes("X-TxID") { a in bytes("x-txid") { asciiCaseInsensitiveEquals(a, $0) } })
        #expect(!bytes("X-TxIE") { a in bytes("x-txid") { asciiCaseInsensitiveEquals(a, $0) } })
    }

    /// The parser checks names with a bit mask and values eight bytes at a time: both agree
    /// with the byte-by-byte definitions, for every byte at every offset.
    @Test func tokenCharactersAreRFC9110s() {
        let tchar = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
        for c in 0...255 { #expect(isTokenChar(UInt8(c)) == tchar.contains(UInt8(c)), "byte \(c)") }
    }

    @Test func everyValueByteIsCheckedWhereverItLies() throws {
        for b in 0...255 {
            let byte = UInt8(b)
            let allowed = byte == 0x09 || (byte >= 0x20 && byte != 0x7F)
            for offset in 0..<19 {
                var value = Array("abcdefghijklmnopqrs".utf8)
                value[offset] = byte
                // Leading and trailing blanks are trimmed, not part of the value.
                let blankAtAnEnd = (byte == 0x20 || byte == 0x09) && (offset == 0 || offset == 18)
                let wire = Array("GET / HTTP/1.1\r\nX-V: ".utf8) + value + Array("\r\n\r\n".utf8)
                let parsed = try? wire.withUnsafeBytes { try HTTPParser.parseRequestHead($0) }
                if byte == 0x0A {
                    #expect(parsed == nil, "a bare LF at \(offset)")
                    continue
                }
                #expect((parsed != nil) == allowed, "byte \(b) at \(offset)")
                guard let h = parsed?.headers, !blankAtAnEnd else { continue }
                var w = HeadWriter()
                w.writeFields(h)
                #expect(w.bytes == Array("X-V: ".utf8) + value + Array("\r\n".utf8), "byte \(b) at \(offset)")
                #expect(h.fields[0].received == (byte >= 0x80 ? value : nil))
            }
        }
    }

    /// The parser notes the framing and `Connection` fields as it reads them; what it noted
    /// answers as a pass over the same fields does, and stops answering once they change.
    @Test(arguments: [
        "", "Connection: close\r\n", "Connection: Keep-Alive\r\n", "connection: upgrade, CLOSE\r\nUpgrade: x\r\n",
        "Connection: keep-alive\r\nConnection: X-A\r\nX-A: 1\r\n", "Connection:\r\n", "Connection: ,close,\r\n",
        "Content-Length: 5\r\n", "Content-Length: 5\r\ncontent-length: 5\r\n", "Transfer-Encoding: chunked\r\n",
        "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n",
    ])
    func whatTheParserNotedAgreesWithAPassOverTheFields(_ fields: String) throws {
        let parsed = try parsed(Array(fields.utf8))
        let rebuilt = HTTPHeaders(parsed.fields.map { ($0.name, $0.value) })
        #expect(parsed.noted != nil && rebuilt.noted == nil)
        #expect(parsed.connectionClose == rebuilt.connectionClose)
        #expect(parsed.connectionKeepAlive == rebuilt.connectionKeepAlive)
        #expect(parsed.connectionNamedHeaders() == rebuilt.connectionNamedHeaders())
        #expect(parsed.framingFields().te == rebuilt.framingFields().te)
        #expect(parsed.framingFields().cl == rebuilt.framingFields().cl)
    }

    @Test func changedFieldsAreAskedAgain() throws {
        var h = try parsed(Array("Connection: close\r\nContent-Length: 5\r\n".utf8))
        #expect(h.connectionClose && h.framingFields().cl == "5")
        h.remove("connection")
        #expect(!h.connectionClose)
        h.add("Connection", "keep-alive, X-B")
        #expect(h.connectionKeepAlive && h.connectionNamedHeaders() == ["X-B"])
        h.removeAll(whereName: { $0.count == 14 })
        #expect(h.framingFields().cl == nil)
    }

    /// Past the room a parsed head leaves (16 fields) and past every growth of the buffer,
    /// each field reads back as written, in order.
    @Test func manyFieldsGrowTheBufferAndReadBackInOrder() throws {
        let wire = (0..<40).map { "X-Parsed-\($0): \(String(repeating: "v", count: $0 * 7))\r\n" }.joined()
        var h = try parsed(Array(wire.utf8))
        for i in 40..<300 { h.add("X-Added-\(i)", String(repeating: "w", count: i % 50)) }
        #expect(h.count == 300)
        for i in 0..<300 {
            let f = h.field(at: i)
            #expect(f.name == (i < 40 ? "X-Parsed-\(i)" : "X-Added-\(i)"))
            #expect(f.value == (i < 40 ? String(repeating: "v", count: i * 7) : String(repeating: "w", count: i % 50)))
        }
        h.removeAll(whereName: { $0.last.map { ($0 - 0x30) % 2 == 1 } ?? false })
        #expect(h.count == 150)
        #expect(h.fields.map(\.name).allSatisfy { Int(String($0.last!))! % 2 == 0 })
        #expect(h.wireSize == h.fields.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 })
    }

    /// A copy is a value: changing one leaves the other as it was.
    @Test func copiesAreIndependent() throws {
        let a = try parsed(Array("A: 1\r\nB: 2\r\n".utf8))
        var b = a
        b.add("C", "3")
        var c = a
        c.remove("A")
        var d = a
        d.reserveCapacity(64, bytes: 4096)
        #expect(a.fields.map(\.name) == ["A", "B"])
        #expect(b.fields.map(\.name) == ["A", "B", "C"])
        #expect(c.fields.map(\.name) == ["B"])
        #expect(d == a && a.noted != nil)
    }

    /// `equalsLowercased` compares long names a word at a time: for every name the gateway
    /// asks about, every byte at every position answers as the byte-by-byte definition does.
    @Test func wordAtATimeNameComparisonIsExact() {
        func check(_ lower: StaticString) {
            let reference = Array(lower.withUTF8Buffer { Array($0) })
            for position in reference.indices {
                for b in 0...255 {
                    var name = reference
                    name[position] = UInt8(b)
                    let expected = zip(name, reference).allSatisfy { lowerASCII($0) == $1 }
                    let got = name.withUnsafeBufferPointer { equalsLowercased($0, lower) }
                    #expect(got == expected, "\(lower) with byte \(b) at \(position)")
                }
            }
            let upper = reference.map { $0 >= 0x61 && $0 <= 0x7A ? $0 - 0x20 : $0 }
            #expect(upper.withUnsafeBufferPointer { equalsLowercased($0, lower) })
            #expect(!Array(reference.dropLast()).withUnsafeBufferPointer { equalsLowercased($0, lower) })
        }
        for name: StaticString in ["te", "host", "x-txid", "upgrade", "connection", "keep-alive", "x-request-id",
                                   "content-length", "x-forwarded-for", "proxy-connection", "transfer-encoding",
                                   "x-forwarded-proto", "proxy-authorization", "x-http-method-override"] {
            check(name)
        }
    }
}
