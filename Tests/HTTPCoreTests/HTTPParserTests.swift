import Testing
@testable import HTTPCore

@Suite struct HTTPParserTests {
    func request(_ s: String) throws -> RequestHead {
        try Array(s.utf8).withUnsafeBytes { try HTTPParser.parseRequestHead($0) }
    }

    func status(_ s: String) -> Int? {
        do { _ = try request(s); return nil } catch { return (error as? HTTPParseError)?.status }
    }

    /// RFC 9112 §2.2 (issue 23 item 10): the server drains these before looking for the head.
    @Test func emptyLinesBeforeARequestLine() {
        func prefix(_ s: String) -> Int { Array(s.utf8).withUnsafeBytes { HTTPParser.emptyLinesPrefix($0) } }
        #expect(prefix("GET / HTTP/1.1\r\n") == 0)
        #expect(prefix("\r\nGET") == 2)
        #expect(prefix("\r\n\r\n\r\nGET") == 6)
        #expect(prefix("\r\n\r") == 2, "a lone CR may be the start of another empty line")
        #expect(prefix("\r") == 0)
        #expect(prefix("\n\r\n") == 0, "a bare LF is no empty line")
        #expect(prefix("\r\r\n") == 0)
        #expect(prefix("") == 0)
        #expect(HTTPParser.maxEmptyLinesBeforeRequest >= 1)
    }

    /// Issue 23 item 10: a value that is not UTF-8 is forwarded as the bytes received.
    @Test func headerBytesThatAreNotUTF8AreKept() throws {
        let wire = Array("GET / HTTP/1.1\r\nHost: a\r\nX-Name: caf".utf8) + [0xE9] + Array("\r\nX-Text: caf\u{e9}\r\n\r\n".utf8)
        let h = try wire.withUnsafeBytes { try HTTPParser.parseRequestHead($0) }
        let latin1 = try #require(h.headers.fields.first { $0.name == "X-Name" })
        #expect(latin1.received == Array("caf".utf8) + [0xE9])
        #expect(latin1.value == "caf\u{FFFD}")
        #expect(h.headers.fields.first { $0.name == "X-Text" }?.received == nil, "valid UTF-8 keeps no copy")
        var w = HeadWriter()
        w.writeFields(h.headers)
        #expect(w.bytes == Array("Host: a\r\nX-Name: caf".utf8) + [0xE9] + Array("\r\nX-Text: caf\u{e9}\r\n".utf8))
        #expect(h.headers.wireSize == w.count)
        // A value set anew is the text set.
        var changed = latin1
        changed.value = "cafe"
        #expect(changed.received == nil)
    }

    /// A header value's bytes, what `value` reads, and whether the bytes are kept (`received`):
    /// ASCII takes the parser's fast path, anything with a byte ≥ 0x80 the validating one.
    struct ValueCase: CustomTestStringConvertible, Sendable {
        let bytes: [UInt8]
        let value: String
        let kept: Bool
        var testDescription: String { bytes.map { String($0, radix: 16) }.joined(separator: " ") }
    }

    @Test(arguments: [
        ValueCase(bytes: [], value: "", kept: false),
        ValueCase(bytes: Array("text/plain; charset=utf-8".utf8), value: "text/plain; charset=utf-8", kept: false),
        ValueCase(bytes: Array("a\tb ~".utf8), value: "a\tb ~", kept: false),
        ValueCase(bytes: Array("caf\u{e9} \u{1F600}".utf8), value: "caf\u{e9} \u{1F600}", kept: false),
        ValueCase(bytes: Array("caf".utf8) + [0xE9], value: "caf\u{FFFD}", kept: true),
        ValueCase(bytes: [0x80], value: "\u{FFFD}", kept: true),
        ValueCase(bytes: [0x61, 0xC0, 0xAF, 0x62], value: "a\u{FFFD}\u{FFFD}b", kept: true),
        ValueCase(bytes: [0xF0, 0x9F, 0x98], value: "\u{FFFD}", kept: true),
    ])
    func aHeaderValueReadsAsTextAndKeepsBytesThatAreNotUTF8(_ c: ValueCase) throws {
        for wire in [Array("GET / HTTP/1.1\r\nHost: a\r\nX-V: ".utf8) + c.bytes + Array("\r\n\r\n".utf8),
                     Array("HTTP/1.1 200 OK\r\nX-V: ".utf8) + c.bytes + Array("\r\nContent-Length: 0\r\n\r\n".utf8)] {
            let headers = try wire.withUnsafeBytes { raw in
                wire.starts(with: Array("GET".utf8)) ? try HTTPParser.parseRequestHead(raw).headers
                                                     : try HTTPParser.parseResponseHead(raw).headers
            }
            let field = try #require(headers.fields.first { $0.name == "X-V" })
            #expect(field.value == c.value)
            #expect(field.received == (c.kept ? c.bytes : nil))
            // Forwarded as received, whichever path read it.
            var w = HeadWriter()
            w.writeFields(headers)
            #expect(w.bytes.count == headers.wireSize)
            let line = Array("X-V: ".utf8) + c.bytes + Array("\r\n".utf8)
            #expect(w.bytes.indices.contains { w.bytes[$0...].starts(with: line) }, "\(w.bytes)")
        }
    }

    /// Request lines, good and bad: `method target version` parsed, or the status and message
    /// of the refusal.
    @Test(arguments: [
        ("GET / HTTP/1.1", "GET|/|1"),
        ("POST /a/b?c=d%20e HTTP/1.0", "POST|/a/b?c=d%20e|0"),
        ("OPTIONS * HTTP/1.1", "OPTIONS|*|1"),
        ("M-SEARCH http://h:1/x HTTP/1.1", "M-SEARCH|http://h:1/x|1"),
        ("GET  / HTTP/1.1", "400 malformed request line"),
        (" GET / HTTP/1.1", "400 malformed request line"),
        ("GET / HTTP/1.1 ", "400 malformed request line"),
        ("GET / HTTP/1.1 x", "400 malformed request line"),
        ("GET /", "400 malformed request line"),
        ("GET", "400 malformed request line"),
        ("GET  HTTP/1.1", "400 malformed request line"),
        ("GET / ", "400 malformed HTTP version"),
        ("G@T / HTTP/1.1", "400 malformed method"),
        ("GET /a\u{7F} HTTP/1.1", "400 malformed request target"),
        ("GET /\u{e9} HTTP/1.1", "400 malformed request target"),
        ("GET / HTTP/2.0", "505 HTTP version not supported"),
        ("GET / HTTP/1.10", "400 malformed HTTP version"),
        ("GET / http/1.1", "400 malformed HTTP version"),
    ])
    func requestLines(_ line: String, _ expected: String) {
        let wire = Array((line + "\r\nHost: a\r\n\r\n").utf8)
        let got: String
        do {
            let h = try wire.withUnsafeBytes { try HTTPParser.parseRequestHead($0) }
            got = "\(h.method)|\(h.target)|\(h.versionMinor)"
        } catch let error as HTTPParseError {
            got = "\(error.status) \(error.message)"
        } catch {
            got = "\(error)"
        }
        #expect(got == expected)
    }

    @Test func parsesARequestHead() throws {
        let h = try request("\r\nPOST /transfer?x=1 HTTP/1.1\r\nHost: a\r\nX-Pad:   v  \r\nContent-Length: 3\r\n\r\n")
        #expect(h.method == "POST")
        #expect(h.target == "/transfer?x=1")
        #expect(h.path == "/transfer")
        #expect(h.versionMinor == 1)
        #expect(h.headers.first("x-pad") == "v")
        #expect(try HTTPParser.requestFraming(h) == .contentLength(3))
        #expect(h.wantsKeepAlive)
    }

    @Test func keepAliveRules() throws {
        #expect(try !request("GET / HTTP/1.1\r\nConnection: Close\r\n\r\n").wantsKeepAlive)
        #expect(try !request("GET / HTTP/1.0\r\n\r\n").wantsKeepAlive)
        #expect(try request("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").wantsKeepAlive)
    }

    @Test func rejectsMalformedAndAmbiguousRequests() throws {
        #expect(status("GET /\r\n\r\n") == 400)
        #expect(status("GET / HTTP/2.0\r\n\r\n") == 505)
        #expect(status("GET / HTTP/1.1\r\n folded\r\n\r\n") == 400)
        #expect(status("GET / HTTP/1.1\r\nBad Name: x\r\n\r\n") == 400)
        #expect(status("GET / HTTP/1.1\r\nName : x\r\n\r\n") == 400)
        #expect(status("GET / HTTP/1.1\r\nX: a\nb\r\n\r\n") == 400)
        let both = try request("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n")
        #expect(throws: HTTPParseError.self) { try HTTPParser.requestFraming(both) }
        let twoLengths = try request("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n")
        #expect(throws: HTTPParseError(400, "conflicting Content-Length values")) { try HTTPParser.requestFraming(twoLengths) }
        let gzip = try request("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n")
        #expect(throws: HTTPParseError.self) { try HTTPParser.requestFraming(gzip) }
        let negative = try request("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n")
        #expect(throws: HTTPParseError.self) { try HTTPParser.requestFraming(negative) }
    }

    @Test func responseFraming() throws {
        func head(_ s: String) throws -> ResponseHead {
            try Array(s.utf8).withUnsafeBytes { try HTTPParser.parseResponseHead($0) }
        }
        let chunked = try head("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        #expect(try HTTPParser.responseFraming(chunked, requestMethod: "GET") == .chunked)
        #expect(try HTTPParser.responseFraming(chunked, requestMethod: "HEAD") == .none)
        let noLength = try head("HTTP/1.0 200 OK\r\n\r\n")
        #expect(try HTTPParser.responseFraming(noLength, requestMethod: "GET") == .untilClose)
        #expect(!noLength.allowsKeepAlive)
        let notModified = try head("HTTP/1.1 304 Not Modified\r\nContent-Length: 50\r\n\r\n")
        #expect(try HTTPParser.responseFraming(notModified, requestMethod: "GET") == .none)
        let noReason = try head("HTTP/1.1 204\r\n\r\n")
        #expect(noReason.status == 204 && noReason.reason == "")
        #expect(throws: HTTPParseError.self) { try head("HTTP/1.1 2x0 OK\r\n\r\n") }
    }

    /// The Content-Length the parser noted, read from its bytes, frames a message exactly as the
    /// general path (`framingFields`, then `contentLength`) does, for requests and responses;
    /// fields built by hand (no notes) take the general path.
    @Test func notedContentLengthFramesAsTheGeneralPathDoes() throws {
        func outcome(_ f: () throws -> BodyFraming) -> String {
            do { return "\(try f())" } catch { return "error \((error as? HTTPParseError)?.status ?? 0)" }
        }
        for value in ["0", "7", "0042", "999999999999999999", "1000000000000000000", "", "+5", "-1", "5 ", "5,5", "5, 6", "x"] {
            let req = try request("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: \(value)\r\n\r\n")
            var byHand = HTTPHeaders()
            req.headers.forEachRaw { byHand.append($0) }
            #expect(byHand.noted == nil)
            let general = RequestHead(method: "POST", target: "/", versionMinor: 1, headers: byHand)
            #expect(outcome { try HTTPParser.requestFraming(req) } == outcome { try HTTPParser.requestFraming(general) }, "\(value)")
            let resp = try Array("HTTP/1.1 200 OK\r\nContent-Length: \(value)\r\n\r\n".utf8).withUnsafeBytes {
                try HTTPParser.parseResponseHead($0)
            }
            let generalResp = ResponseHead(status: 200, reason: "OK", versionMinor: 1,
                                           headers: HTTPHeaders([("Content-Length", value.trimmingOWS())]))
            #expect(outcome { try HTTPParser.responseFraming(resp, requestMethod: "GET") }
                    == outcome { try HTTPParser.responseFraming(generalResp, requestMethod: "GET") }, "\(value)")
        }
        #expect(try HTTPParser.requestFraming(request("POST / HTTP/1.1\r\nContent-Length: 0042\r\n\r\n")) == .contentLength(42))
        #expect(try HTTPParser.requestFraming(request("POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n")) == .none)
    }

    /// A lent spare (a loop's pool of finished requests' headers): the head is parsed into the
    /// lent buffers when nothing else holds them, and the spare keeps nothing afterwards.
    @Test func aLentSpareIsParsedIntoAndKeepsNothing() throws {
        func address(_ h: HTTPHeaders) -> UnsafeRawPointer? { h.storage.withUnsafeBytes { $0.baseAddress } }
        func parse(_ s: String, _ spare: inout HeadersSpare) throws -> RequestHead {
            try Array(s.utf8).withUnsafeBytes { try HTTPParser.parseRequestHead($0, reusing: &spare) }
        }
        var own = HeadersSpare(lending: nil)
        var finished: RequestHead? = try parse("GET /a HTTP/1.1\r\nHost: one\r\n\r\n", &own)
        #expect(own.headers == nil)
        let buffers = address(finished!.headers)
        var handedBack: HTTPHeaders? = finished!.headers  // what the pool holds
        finished = nil
        var lent = HeadersSpare(lending: handedBack.take())
        let next = try parse("GET /b HTTP/1.1\r\nHost: two\r\nX-B: 2\r\n\r\n", &lent)
        #expect(address(next.headers) == buffers, "parsed into the lent buffers")
        #expect(lent.headers == nil, "the lent spare keeps nothing")
        #expect(next.headers.fields.map { "\($0.name)=\($0.value)" } == ["Host=two", "X-B=2"])
    }

    /// The one-pass reading of the fields (`parseFields`) and the line-by-line one it hands
    /// anything unusual to (`parseFieldLines`) read every block alike: the same fields, notes
    /// and error, over random blocks of the bytes that matter (CR, LF, SP, HTAB, colon, DEL,
    /// NUL, obs-text, token characters) and of any byte.
    @Test func theOnePassFieldsReadAsTheLineByLineOnes() {
        let alphabet: [UInt8] = Array("aZ-:  \t\r\n\r\n".utf8) + [0x7F, 0x00, 0x80, 0xC3, 0xA9, 0x2C]
        var rng = SystemRandomNumberGenerator()
        func describe(_ r: Result<HTTPHeaders, HTTPParseError>) -> String {
            switch r {
            case .success(let h):
                return "\(h.fields.map { "\($0.name)=\($0.value)" }) \(String(describing: h.noted)) \(h.entries.map(\.isUTF8))"
            case .failure(let e): return "error \(e.status) \(e.message)"
            }
        }
        var accepted = 0
        for round in 0..<20_000 {
            var block: [UInt8] = []
            // Mostly well-formed lines, some bytes changed: both readers get past the first lines.
            for _ in 0..<Int.random(in: 0...4, using: &rng) { block += Array("Name-\(round % 7): value \(round)\r\n".utf8) }
            for _ in 0..<Int.random(in: 0...24, using: &rng) {
                block.append(Int.random(in: 0..<4, using: &rng) == 0 ? UInt8.random(in: 0...255, using: &rng)
                             : alphabet.randomElement(using: &rng)!)
            }
            if Bool.random(using: &rng) { block += Array("\r\n\r\n".utf8) }
            if !block.isEmpty, Int.random(in: 0..<3, using: &rng) == 0 {
                block[Int.random(in: 0..<block.count, using: &rng)] = alphabet.randomElement(using: &rng)!
            }
            let onePass = block.withUnsafeBytes { b -> Result<HTTPHeaders, HTTPParseError> in
                var lines = LineReader(b)
                var spare = HeadersSpare()
                return Result { () throws(HTTPParseError) in try HTTPParser.parseFields(&lines, reusing: &spare) }
            }
            let byLines = block.withUnsafeBytes { b -> Result<HTTPHeaders, HTTPParseError> in
                var lines = LineReader(b)
                var headers = HTTPHeaders()
                headers.reset(block: UnsafeBufferPointer(start: b.baseAddress?.assumingMemoryBound(to: UInt8.self), count: b.count))
                return Result { () throws(HTTPParseError) in
                    guard let base = b.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
                        throw HTTPParseError(400, "header block not terminated")
                    }
                    try HTTPParser.parseFieldLines(&lines, into: &headers, base, 0)
                    return headers
                }
            }
            #expect(describe(onePass) == describe(byLines), "\(block)")
            if case .success = onePass { accepted += 1 }
        }
        #expect(accepted > 200, "enough blocks parse for the comparison to mean something")
    }

    /// A connection's spare: the next head is parsed into the previous one's buffers once nothing
    /// holds them (no allocation), never into buffers a held head still reads; a large head's
    /// buffers are not kept.
    @Test func headsReuseTheSpareBuffersOnlyWhenNothingHoldsThem() throws {
        var spare = HeadersSpare()
        func parse(_ s: String) throws -> RequestHead {
            try Array(s.utf8).withUnsafeBytes { try HTTPParser.parseRequestHead($0, reusing: &spare) }
        }
        func address(_ h: HTTPHeaders) -> (UnsafeRawPointer?, UnsafeRawPointer?) {
            (h.storage.withUnsafeBytes { $0.baseAddress }, h.entries.withUnsafeBytes { $0.baseAddress })
        }
        var first: RequestHead? = try parse("GET /a HTTP/1.1\r\nHost: one\r\nX-A: 1\r\n\r\n")
        let firstBuffers = address(first!.headers)
        // Held: the next head gets buffers of its own, and the held one reads as it did.
        let second = try parse("GET /b HTTP/1.1\r\nHost: two\r\nX-B: 22\r\nX-C: 3\r\n\r\n")
        let secondBuffers = address(second.headers)
        #expect(secondBuffers.0 != firstBuffers.0 && secondBuffers.1 != firstBuffers.1)
        #expect(first!.headers.fields.map { "\($0.name)=\($0.value)" } == ["Host=one", "X-A=1"])
        #expect(second.headers.fields.map { "\($0.name)=\($0.value)" } == ["Host=two", "X-B=22", "X-C=3"])
        first = nil
        // `second` still held: the third is not parsed into its buffers either.
        var third: RequestHead? = try parse("GET /c HTTP/1.1\r\nHost: three\r\n\r\n")
        #expect(address(third!.headers).0 != secondBuffers.0)
        #expect(second.headers.first("X-B") == "22" && second.headers.count == 3)
        // Done with: the fourth head is parsed into the third's buffers.
        let thirdBuffers = address(third!.headers)
        third = nil
        let fourth = try parse("POST /d HTTP/1.1\r\nHost: four\r\nContent-Length: 5\r\n\r\n")
        #expect(address(fourth.headers) == thirdBuffers)
        #expect(fourth.headers.fields.map { "\($0.name)=\($0.value)" } == ["Host=four", "Content-Length=5"])
        #expect(try HTTPParser.requestFraming(fourth) == .contentLength(5))
        // A head of more than 4 KiB is parsed, and its buffers are not kept for the next one.
        let big = try parse("GET / HTTP/1.1\r\nX-Big: \(String(repeating: "b", count: 5000))\r\n\r\n")
        #expect(big.headers.first("X-Big")?.utf8.count == 5000)
        #expect(spare.headers == nil)
        // A head that fails to parse leaves the spare usable.
        #expect(throws: HTTPParseError.self) { try parse("GET / HTTP/1.1\r\nBad Name: x\r\n\r\n") }
        #expect(try parse("GET / HTTP/1.1\r\nHost: five\r\n\r\n").headers.first("Host") == "five")
    }

    /// Regression (Fuzz/README.md, fuzz-response-head): a bare CR or LF in the reason phrase was
    /// accepted and forwarded to the client's status line; so was a status line with no SP after the code.
    @Test func rejectsControlCharactersInTheReasonPhrase() throws {
        func head(_ bytes: [UInt8]) throws -> ResponseHead {
            try bytes.withUnsafeBytes { try HTTPParser.parseResponseHead($0) }
        }
        // The input the fuzzer saved.
        let found = Array("HTTP/1.1 204 No Cone\rttn\nConnection: close\r\n\r\n".utf8)
        #expect(throws: HTTPParseError(502, "invalid character in reason phrase")) { try head(found) }
        for bad in ["HTTP/1.1 200 O\nK\r\n\r\n", "HTTP/1.1 200 O\u{0}K\r\n\r\n", "HTTP/1.1 200 O\u{7F}K\r\n\r\n"] {
            #expect(throws: HTTPParseError.self) { try head(Array(bad.utf8)) }
        }
        #expect(throws: HTTPParseError(502, "malformed status line")) { try head(Array("HTTP/1.1 200XOK\r\n\r\n".utf8)) }
        #expect(try head(Array("HTTP/1.1 200 OK\tfine \u{E9}\r\n\r\n".utf8)).reason == "OK\tfine \u{E9}")
        #expect(try head(Array("HTTP/1.1 200 \r\n\r\n".utf8)).reason == "")
        #expect(try head(Array("HTTP/1.1 200\r\n\r\n".utf8)).status == 200)
    }
}

@Suite struct HeadWriterTests {
    @Test func writesPiecesInOrderAndGrowsPastItsCapacity() {
        var w = HeadWriter(capacity: 8)
        w.write("HTTP/1.1 ")
        w.write(7)
        w.write(204)
        w.write(-1)
        w.write(0)
        w.write(1_234_567_890)
        w.writeCRLF()
        var h = HTTPHeaders()
        h.add("X-Long", String(repeating: "v", count: 300))
        h.add("Empty", "")
        w.writeFields(h)
        w.writeCRLF()
        let expected = "HTTP/1.1 7204-101234567890\r\nX-Long: " + String(repeating: "v", count: 300) + "\r\nEmpty: \r\n\r\n"
        #expect(w.bytes == Array(expected.utf8))
        #expect(w.count == expected.utf8.count)
        #expect(w.withBytes { Array($0) } == Array(expected.utf8))
    }

    /// Decimals at every number of digits and on both sides of each power of ten, padded or
    /// not, read as `String(n)` does, and through growth.
    @Test func decimalsOfEveryLengthReadAsStringDoes() {
        var values = [0, 1, 9, Int.max, Int.max - 1]
        var p = 10
        for k in 1...18 { values += [p - 1, p, p + 1]; if k < 18 { p *= 10 } }
        var w = ByteWriter(capacity: 64)
        var expected = ""
        for v in values {
            for width in [1, 3, 20] {
                w.appendDecimal(v, width: width)
                let digits = String(v)
                expected += String(repeating: "0", count: max(0, width - digits.count)) + digits + ","
                w.append(UInt8(ascii: ","))
            }
        }
        #expect(String(decoding: w.bytes, as: UTF8.self) == expected)
        // Signed, as String writes them: each value, its negation, and Int.min.
        var signed = ByteWriter(capacity: 16)
        var signedExpected = ""
        for v in values + values.map { -$0 } + [Int.min] {
            signed.appendInteger(v)
            signed.append(UInt8(ascii: ","))
            signedExpected += String(v) + ","
        }
        #expect(String(decoding: signed.bytes, as: UTF8.self) == signedExpected)
    }

    /// Every length a piece may have (the short ones are copied as words): each piece lands
    /// whole, in order, at any offset, through growth, and nothing around it changes.
    @Test func piecesOfEveryLengthLandWhole() {
        var w = ByteWriter(capacity: 64)
        var expected: [UInt8] = []
        for offset in 0..<3 {
            for n in 0...40 {
                let piece = (0..<n).map { UInt8(truncatingIfNeeded: 0x41 + ($0 * 7 + n + offset) % 50) }
                // The piece sits at the end of its own allocation: a read past it would be caught
                // by the address sanitizer, and by chance here.
                let source = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: n)
                _ = source.initialize(from: piece)
                w.append(UnsafeBufferPointer(source))
                source.deallocate()
                expected += piece
                if offset > 0 { w.append(0x2C); expected.append(0x2C) }
            }
        }
        let written = w.bytes
        let firstDifference = (0..<min(written.count, expected.count)).first { written[$0] != expected[$0] }
            ?? min(written.count, expected.count)
        #expect(written.count == expected.count && firstDifference == expected.count, "first difference at \(firstDifference)")
    }
}
