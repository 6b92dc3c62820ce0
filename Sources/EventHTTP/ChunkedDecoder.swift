import CLibevent
import HTTPCore

/// Incremental decoder for `Transfer-Encoding: chunked`. It moves chunk data from the input
/// evbuffer to the output evbuffer without copying, and drops extensions and trailers.
/// Public only for the fuzz target (Fuzz/Sources/fuzz-chunked).
public struct ChunkedDecoder {
    private enum State { case size, data(Int), dataEnd, trailer, done }
    private var state = State.size
    static let maxLine = 4096

    public init() {}

    public var isDone: Bool { if case .done = state { return true } else { return false } }

    /// Consumes what it can. Returns true when the terminating chunk and trailers are read.
    public mutating func decode(from input: OpaquePointer, into output: OpaquePointer) throws(HTTPParseError) -> Bool {
        while true {
            switch state {
            case .size:
                guard let line = try frontLine(input) else { return false }
                // chunk-size = 1*HEXDIG (RFC 9112 §7.1), read as bytes. Found by fuzzing (Fuzz/README.md):
                // the Character-wise split read `;5` as size 5 and missed a `;` followed by a combining
                // mark, and Int(_:radix:) took `+5` and `-0`.
                var n = 0, digits = 0, afterDigits = false
                for c in line {
                    if c == UInt8(ascii: ";") { break }
                    if c == 0x20 || c == 0x09 { afterDigits = digits > 0; continue }
                    guard !afterDigits, digits < 15, let d = hexValue(c) else { throw HTTPParseError(400, "malformed chunk size") }
                    n = n << 4 | d
                    digits += 1
                }
                guard digits > 0 else { throw HTTPParseError(400, "malformed chunk size") }
                let length = line.count
                evbuffer_drain(input, length + 2)
                state = n == 0 ? .trailer : .data(n)
            case .data(let remaining):
                let available = evbuffer_get_length(input)
                if available == 0 { return false }
                let n = min(remaining, available)
                evbuffer_remove_buffer(input, output, n)
                state = n == remaining ? .dataEnd : .data(remaining - n)
            case .dataEnd:
                guard evbuffer_get_length(input) >= 2, let crlf = evbuffer_pullup(input, 2) else { return false }
                guard crlf[0] == 0x0D, crlf[1] == 0x0A else { throw HTTPParseError(400, "malformed chunk: missing CRLF after data") }
                evbuffer_drain(input, 2)
                state = .size
            case .trailer:
                guard let line = try frontLine(input) else { return false }
                let length = line.count
                evbuffer_drain(input, length + 2)
                if length == 0 { state = .done }
            case .done:
                return true
            }
        }
    }

    /// The CRLF-terminated line at the front of `input`, without its CRLF, where it lies
    /// (`evbuffer_pullup` copies only a line that straddles two chains), or nil if it has not
    /// fully arrived yet. Valid until `input` changes; the caller drains it and its CRLF. A
    /// control byte other than HTAB in it is refused, as in the head: a bare CR or LF inside a
    /// chunk extension or a trailer is a line end to a lenient parser behind or in front of the
    /// gateway, and so a smuggling vector (`5;a\nb`, a trailer `X: y\n`).
    private func frontLine(_ input: OpaquePointer) throws(HTTPParseError) -> UnsafeRawBufferPointer? {
        guard let eol = EvBuffer.search(input, "\r\n") else {
            if evbuffer_get_length(input) > Self.maxLine { throw HTTPParseError(400, "chunk line too long") }
            return nil
        }
        guard eol <= Self.maxLine else { throw HTTPParseError(400, "chunk line too long") }
        // Nil for an empty line; for another, only when a copy across chains finds no memory.
        let start = evbuffer_pullup(input, eol)
        if start == nil && eol > 0 { fatalError("evbuffer_pullup failed: out of memory") }
        let line = UnsafeRawBufferPointer(start: start, count: eol)
        if let bad = line.first(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }) {
            throw HTTPParseError(400, bad == 0x0A || bad == 0x0D
                ? "bare \(bad == 0x0A ? "LF" : "CR") in a chunk line (size, extension or trailer); lines end in CRLF"
                : "control character in a chunk line (size, extension or trailer)")
        }
        return line
    }
}

private func hexValue(_ c: UInt8) -> Int? {
    switch c {
    case 0x30...0x39: return Int(c - 0x30)
    case 0x41...0x46: return Int(c - 0x41 + 10)
    case 0x61...0x66: return Int(c - 0x61 + 10)
    default: return nil
    }
}

/// Writes `Transfer-Encoding: chunked` framing around data moved from `data` into `output`.
enum ChunkedEncoder {
    static func writeChunk(_ data: Body, to output: OpaquePointer) {
        let n = data.count
        guard n > 0 else { return }
        EvBuffer.append(output, String(n, radix: 16) + "\r\n")
        data.moveAll(to: output)
        EvBuffer.append(output, "\r\n")
    }

    static func writeLast(to output: OpaquePointer) {
        EvBuffer.append(output, "0\r\n\r\n")
    }
}
