import CLibevent
import EventHTTP
import HTTPCore
import Testing

/// Chunked framing over evbuffers: what is decoded and what is refused (issue 23 item 8).
@Suite struct ChunkedDecoderTests {
    /// The decoded body, or the error message.
    func decode(_ wire: String) -> Result<[UInt8], HTTPParseError> {
        let input = evbuffer_new()!, output = evbuffer_new()!
        defer { evbuffer_free(input); evbuffer_free(output) }
        var bytes = Array(wire.utf8)
        _ = evbuffer_add(input, &bytes, bytes.count)
        var decoder = ChunkedDecoder()
        do {
            guard try decoder.decode(from: input, into: output) else { return .failure(HTTPParseError(0, "incomplete")) }
        } catch {
            return .failure(error)
        }
        var out = [UInt8](repeating: 0, count: evbuffer_get_length(output))
        _ = evbuffer_remove(output, &out, out.count)
        return .success(out)
    }

    /// The same wire in two evbuffer chains, split at every offset: a chunk-size line, a
    /// chunk's CRLF or the final empty line that straddles the two chains is found as when the
    /// wire is in one (the line search looks in the first chain first, then across chains).
    @Test(arguments: ["5;a=b\r\nhello\r\n10\r\n0123456789abcdef\r\n0\r\nX-T: y\r\n\r\n", "0\r\n\r\n"])
    func linesSplitAcrossChainsAreFound(_ wire: String) {
        let bytes = Array(wire.utf8)
        let whole = decode(wire)
        for k in 1..<bytes.count {
            let input = evbuffer_new()!, output = evbuffer_new()!
            defer { evbuffer_free(input); evbuffer_free(output) }
            for part in [Array(bytes[..<k]), Array(bytes[k...])] {
                let piece = evbuffer_new()!
                _ = part.withUnsafeBytes { evbuffer_add(piece, $0.baseAddress, $0.count) }
                evbuffer_add_buffer(input, piece)
                evbuffer_free(piece)
            }
            #expect(evbuffer_peek(input, -1, nil, nil, 0) == 2, "two chains")
            var decoder = ChunkedDecoder()
            let got: Result<[UInt8], HTTPParseError>
            do {
                if try decoder.decode(from: input, into: output) {
                    var out = [UInt8](repeating: 0, count: evbuffer_get_length(output))
                    _ = evbuffer_remove(output, &out, out.count)
                    got = .success(out)
                } else {
                    got = .failure(HTTPParseError(0, "incomplete"))
                }
            } catch {
                got = .failure(error)
            }
            #expect(got == whole, "split at \(k)")
        }
    }

    @Test func wellFormedExtensionsAndTrailersAreDropped() {
        #expect(decode("5;a=b;c=\"d\te\"\r\nhello\r\n0\r\nX-Trailer: y\r\nZ:\tz\r\n\r\n") == .success(Array("hello".utf8)))
    }

    @Test(arguments: ["5;a\nb\r\nhello\r\n0\r\n\r\n", "5;a\rb\r\nhello\r\n0\r\n\r\n", "5\r\nhello\r\n0;x\n\r\n\r\n",
                      "5\r\nhello\r\n0\r\nX: y\n\r\n\r\n", "5\r\nhello\r\n0\r\nX: y\rZ: z\r\n\r\n"])
    func bareLineEndsAreRefused(_ wire: String) {
        guard case .failure(let e) = decode(wire) else { Issue.record("accepted \(wire.debugDescription)"); return }
        #expect(e.status == 400)
        #expect(e.message.hasPrefix("bare"), "\(e.message)")
    }

    @Test func otherControlBytesAreRefused() {
        guard case .failure(let e) = decode("5;a\u{0}\r\nhello\r\n0\r\n\r\n") else { Issue.record("accepted NUL"); return }
        #expect(e.status == 400)
        #expect(e.message.contains("control character"))
        guard case .failure = decode("5\r\nhello\r\n0\r\nX: \u{7f}\r\n\r\n") else { Issue.record("accepted DEL"); return }
    }
}
