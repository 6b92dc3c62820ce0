#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A parsed request line and header block.
public struct RequestHead: Sendable {
    public var method: String
    /// The request-target exactly as received (origin-form: path and query).
    public var target: String
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    public var versionMinor: Int
    public var headers: HTTPHeaders

    public init(method: String, target: String, versionMinor: Int = 1, headers: HTTPHeaders = HTTPHeaders()) {
        self.method = method
        self.target = target
        self.versionMinor = versionMinor
        self.headers = headers
    }

    /// The path part of the target, without the query.
    public var path: Substring {
        if let q = target.utf8.firstIndex(of: UInt8(ascii: "?")) { return target[..<q] }
        return target[...]
    }

    /// Whether the client asked to keep the connection open after this exchange.
    public var wantsKeepAlive: Bool {
        versionMinor >= 1 ? !headers.connectionClose : headers.connectionKeepAlive
    }
}

/// A parsed status line and header block.
public struct ResponseHead: Sendable {
    public var status: Int
    public var reason: String
    public var versionMinor: Int
    public var headers: HTTPHeaders

    public init(status: Int, reason: String = "", versionMinor: Int = 1, headers: HTTPHeaders = HTTPHeaders()) {
        self.status = status
        self.reason = reason
        self.versionMinor = versionMinor
        self.headers = headers
    }

    public var allowsKeepAlive: Bool {
        versionMinor >= 1 ? !headers.connectionClose : headers.connectionKeepAlive
    }
}

/// How a message body is delimited on the wire.
public enum BodyFraming: Equatable, Sendable {
    case none
    case contentLength(Int)
    case chunked
    /// Only for responses: the body ends when the peer closes.
    case untilClose
}

public struct HTTPParseError: Error, Equatable, CustomStringConvertible, Sendable {
    /// The status a server should answer with (400, 501, 505).
    public var status: Int
    public var message: String
    public init(_ status: Int, _ message: String) { self.status = status; self.message = message }
    public var description: String { message }
}

public enum HTTPParser {
    /// How many empty lines (CRLF) a server skips before a request line (RFC 9112 §2.2: "SHOULD
    /// ignore at least one"; old clients send one after a POST body). More is a 400: an endless
    /// stream of them would otherwise hold a connection open as a head that never comes.
    public static let maxEmptyLinesBeforeRequest = 16

    /// The number of bytes of empty lines (CRLF pairs) that start `bytes`. A lone CR at the end
    /// is not counted: its LF may still come.
    public static func emptyLinesPrefix(_ bytes: UnsafeRawBufferPointer) -> Int {
        var i = 0
        while i + 1 < bytes.count, bytes[i] == 0x0D, bytes[i + 1] == 0x0A { i += 2 }
        return i
    }

    /// Parses a request head. `bytes` holds the request line and the header lines, each ending
    /// in CRLF, followed by the empty line.
    public static func parseRequestHead(_ bytes: UnsafeRawBufferPointer) throws(HTTPParseError) -> RequestHead {
        var spare = HeadersSpare()
        return try parseRequestHead(bytes, reusing: &spare)
    }

    /// `parseRequestHead(_:)`, its headers made in `spare`'s buffers when nothing else holds
    /// them; `spare` then keeps the new headers' buffers for the connection's next message.
    public static func parseRequestHead(_ bytes: UnsafeRawBufferPointer,
                                        reusing spare: inout HeadersSpare) throws(HTTPParseError) -> RequestHead {
        var length = 0
        return try parseRequestHead(bytes, reusing: &spare, headLength: &length)
    }

    /// `parseRequestHead(_:reusing:)` that also says where the head ends in `bytes` (after its
    /// empty line): what follows is not part of it (a body, a next request).
    public static func parseRequestHead(_ bytes: UnsafeRawBufferPointer, reusing spare: inout HeadersSpare,
                                        headLength: inout Int) throws(HTTPParseError) -> RequestHead {
        var lines = LineReader(bytes)
        guard var line = lines.next() else { throw HTTPParseError(400, "empty request") }
        // RFC 9112 §2.2: ignore at least one empty line before the request-line.
        while line.isEmpty, let l = lines.next() { line = l }
        // method SP target SP version: exactly two spaces, found in place (a `split` built an
        // array of three slices for every request).
        let l = UnsafeRawBufferPointer(rebasing: line)
        guard let sp1 = l.firstIndex(of: 0x20),
              let sp2 = l[(sp1 + 1)...].firstIndex(of: 0x20),
              !l[(sp2 + 1)...].contains(0x20), sp1 > 0, sp2 > sp1 + 1 else {
            throw HTTPParseError(400, "malformed request line")
        }
        let method = l[..<sp1], target = l[(sp1 + 1)..<sp2]
        guard method.allSatisfy(isTokenChar) else { throw HTTPParseError(400, "malformed method") }
        guard target.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw HTTPParseError(400, "malformed request target")
        }
        let minor = try parseVersion(l[(sp2 + 1)...])
        let headers = try parseFields(&lines, reusing: &spare)
        headLength = lines.index
        return RequestHead(method: methodString(UnsafeRawBufferPointer(rebasing: method)),
                           target: String(decoding: target, as: UTF8.self),
                           versionMinor: minor, headers: headers)
    }

    /// Parses a response head (status line and headers, ending in the empty line).
    public static func parseResponseHead(_ bytes: UnsafeRawBufferPointer) throws(HTTPParseError) -> ResponseHead {
        var spare = HeadersSpare()
        return try parseResponseHead(bytes, reusing: &spare)
    }

    /// `parseResponseHead(_:)` with its headers made in `spare`'s buffers (`parseRequestHead(_:reusing:)`).
    public static func parseResponseHead(_ bytes: UnsafeRawBufferPointer,
                                         reusing spare: inout HeadersSpare) throws(HTTPParseError) -> ResponseHead {
        var length = 0
        return try parseResponseHead(bytes, reusing: &spare, headLength: &length)
    }

    /// `parseResponseHead(_:reusing:)` that also says where the head ends in `bytes`.
    public static func parseResponseHead(_ bytes: UnsafeRawBufferPointer, reusing spare: inout HeadersSpare,
                                         headLength: inout Int) throws(HTTPParseError) -> ResponseHead {
        var lines = LineReader(bytes)
        guard let line = lines.next(), line.count >= 12 else { throw HTTPParseError(502, "malformed status line") }
        let minor = try parseVersion(line[line.startIndex..<line.startIndex + 8])
        let codeBytes = line[line.startIndex + 9..<line.startIndex + 12]
        // SP after the code when anything follows it, and a reason phrase of HTAB, SP, VCHAR and
        // obs-text only (RFC 9112 §4): it is forwarded to the client. Found by fuzzing (Fuzz/README.md):
        // a bare CR or LF in the reason reached the client's status line.
        guard line[line.startIndex + 8] == 0x20, codeBytes.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              line.count == 12 || line[line.startIndex + 12] == 0x20 else {
            throw HTTPParseError(502, "malformed status line")
        }
        let status = codeBytes.reduce(0) { $0 * 10 + Int($1 - 0x30) }
        let reasonBytes = line[(line.startIndex + min(13, line.count))...]
        guard reasonBytes.allSatisfy({ ($0 >= 0x20 || $0 == 0x09) && $0 != 0x7F }) else {
            throw HTTPParseError(502, "invalid character in reason phrase")
        }
        // "OK" (nearly every response) without making a String.
        let reason = status == 200 && reasonBytes.count == 2 && reasonBytes.first == 0x4F && reasonBytes.last == 0x4B
            ? "OK" : String(decoding: reasonBytes, as: UTF8.self)
        let headers = try parseFields(&lines, reusing: &spare)
        headLength = lines.index
        return ResponseHead(status: status, reason: reason, versionMinor: minor, headers: headers)
    }

    /// The framing of a request body (RFC 9112 §6.3). Messages that are ambiguous, the
    /// raw material of request smuggling, are refused rather than guessed.
    public static func requestFraming(_ head: RequestHead) throws(HTTPParseError) -> BodyFraming {
        switch head.headers.notedFraming() {
        case .none: return .none
        case .length(let n): return n == 0 ? .none : .contentLength(n)
        case .unknown: break
        }
        let (te, cl) = head.headers.framingFields()
        if let te {
            guard cl == nil else { throw HTTPParseError(400, "both Transfer-Encoding and Content-Length") }
            guard head.versionMinor >= 1 else { throw HTTPParseError(400, "Transfer-Encoding in an HTTP/1.0 request") }
            let codings = te.split(separator: ",").map { $0.trimmingOWS().lowercasedASCII() }
            guard codings == ["chunked"] else { throw HTTPParseError(501, "unsupported Transfer-Encoding '\(te)'") }
            return .chunked
        }
        guard let cl else { return .none }
        let n = try contentLength(cl, status: 400)
        return n == 0 ? .none : .contentLength(n)
    }

    /// The framing of a response body, given the request method (RFC 9112 §6.3).
    public static func responseFraming(_ head: ResponseHead, requestMethod: String) throws(HTTPParseError) -> BodyFraming {
        try responseFraming(head, answersHEAD: requestMethod == "HEAD")
    }

    /// `responseFraming(_:requestMethod:)` for a caller that knows whether the request was a
    /// HEAD, and keeps no method string for it.
    public static func responseFraming(_ head: ResponseHead, answersHEAD: Bool) throws(HTTPParseError) -> BodyFraming {
        if answersHEAD || head.status / 100 == 1 || head.status == 204 || head.status == 304 {
            return .none
        }
        switch head.headers.notedFraming() {
        case .none: return .untilClose
        case .length(let n): return .contentLength(n)
        case .unknown: break
        }
        let (te, cl) = head.headers.framingFields()
        if let te {
            let last = te.split(separator: ",").last.map { $0.trimmingOWS().lowercasedASCII() }
            return last == "chunked" ? .chunked : .untilClose
        }
        guard let cl else { return .untilClose }
        return .contentLength(try contentLength(cl, status: 502))
    }

    /// A Content-Length value; repeated values (joined with commas) must all agree.
    static func contentLength(_ value: String, status: Int) throws(HTTPParseError) -> Int {
        // The common case: plain digits.
        if let n = value.withUTF8Bytes(plainDecimal) { return n }
        var result: Int?
        for part in value.split(separator: ",", omittingEmptySubsequences: false) {
            let t = part.trimmingOWS()
            guard !t.isEmpty, t.utf8.count <= 18, t.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let n = Int(t) else {
                throw HTTPParseError(status, "invalid Content-Length '\(value)'")
            }
            if let r = result, r != n { throw HTTPParseError(status, "conflicting Content-Length values") }
            result = n
        }
        return result ?? 0
    }

    /// The common methods as the literals they are (no String made per request).
    static func methodString(_ m: UnsafeRawBufferPointer) -> String {
        switch m.count {
        case 3 where startsWith(m, "GET"): return "GET"
        case 3 where startsWith(m, "PUT"): return "PUT"
        case 4 where startsWith(m, "POST"): return "POST"
        case 4 where startsWith(m, "HEAD"): return "HEAD"
        case 5 where startsWith(m, "PATCH"): return "PATCH"
        case 6 where startsWith(m, "DELETE"): return "DELETE"
        case 7 where startsWith(m, "OPTIONS"): return "OPTIONS"
        default: return String(decoding: m, as: UTF8.self)
        }
    }

    static func parseVersion(_ v: Slice<UnsafeRawBufferPointer>) throws(HTTPParseError) -> Int {
        let bytes = UnsafeRawBufferPointer(rebasing: v)
        guard bytes.count == 8, startsWith(bytes, "HTTP/1.") else {
            if bytes.count == 8, startsWith(bytes, "HTTP/") { throw HTTPParseError(505, "HTTP version not supported") }
            throw HTTPParseError(400, "malformed HTTP version")
        }
        switch v.last! {
        case 0x30: return 0
        case 0x31: return 1
        default: throw HTTPParseError(505, "HTTP version not supported")
        }
    }

    /// The header fields up to the empty line. The block is copied once into the headers'
    /// buffer (`spare`'s when free); each field is a pair of ranges into it.
    ///
    /// One pass over the bytes for the fields as nearly every message sends them: the name's
    /// token characters, the colon, the value's bytes checked up to the CR LF that ends it (no
    /// separate search for each line's end). At the first line that is anything else (folded,
    /// a bad name, a bare CR or LF, a control character, the block's end), the rest is read line
    /// by line (`parseFieldLines`), which decides and names what is wrong exactly as it always
    /// has.
    static func parseFields(_ lines: inout LineReader, reusing spare: inout HeadersSpare) throws(HTTPParseError) -> HTTPHeaders {
        guard let base = lines.bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
            throw HTTPParseError(400, "header block not terminated")
        }
        let blockStart = lines.index, n = lines.bytes.count
        // Taken, not copied: the spare holds no reference while the block is parsed into it.
        var headers = spare.headers.take() ?? HTTPHeaders()
        headers.reset(block: UnsafeBufferPointer(start: base + blockStart, count: n - blockStart))
        var p = blockStart
        let tokenChars = tokenCharTable
        while p + 1 < n {
            if base[p] == 0x0D {
                guard base[p + 1] == 0x0A else { break }
                lines.index = p + 2
                spare.keep(headers)
                return headers
            }
            var colon = p
            while colon < n && tokenChars[Int(base[colon])] { colon += 1 }
            guard colon < n, base[colon] == 0x3A, colon > p else { break }
            var vs = colon + 1
            while vs < n, base[vs] == 0x20 || base[vs] == 0x09 { vs += 1 }
            let (i, high) = scanFieldValue(base, vs, n)
            guard i + 1 < n, base[i] == 0x0D, base[i + 1] == 0x0A else { break }
            var ve = i
            while ve > vs, base[ve - 1] == 0x20 || base[ve - 1] == 0x09 { ve -= 1 }
            appendField(&headers, base, blockStart, name: p, colon, value: vs, ve, high: high)
            p = i + 2
        }
        lines.index = p
        try parseFieldLines(&lines, into: &headers, base, blockStart)
        spare.keep(headers)
        return headers
    }

    /// The fields from `lines.index` to the empty line, line by line: each line found by its
    /// CR LF, then its name's token characters, the colon, the value trimmed and checked.
    static func parseFieldLines(_ lines: inout LineReader, into headers: inout HTTPHeaders,
                                _ base: UnsafePointer<UInt8>, _ blockStart: Int) throws(HTTPParseError) {
        while let line = lines.nextRange() {
            if line.isEmpty { return }
            let start = line.lowerBound, end = line.upperBound
            if base[start] == 0x20 || base[start] == 0x09 { throw HTTPParseError(400, "obsolete line folding in headers") }
            var colon = start
            while colon < end && isTokenChar(base[colon]) { colon += 1 }
            guard colon < end, base[colon] == 0x3A, colon > start else {
                // No whitespace between name and colon (RFC 9112 §5.1): a smuggling vector.
                let hasColon = UnsafeBufferPointer(start: base + start, count: end - start).contains(0x3A)
                throw HTTPParseError(400, hasColon && base[start] != 0x3A ? "malformed header name" : "malformed header line")
            }
            var vs = colon + 1, ve = end
            while vs < ve, base[vs] == 0x20 || base[vs] == 0x09 { vs += 1 }
            while ve > vs, base[ve - 1] == 0x20 || base[ve - 1] == 0x09 { ve -= 1 }
            let (i, high) = scanFieldValue(base, vs, ve)
            guard i == ve else {
                let name = String(decoding: UnsafeBufferPointer(start: base + start, count: colon - start), as: UTF8.self)
                throw HTTPParseError(400, "invalid character in header '\(name)'")
            }
            appendField(&headers, base, blockStart, name: start, colon, value: vs, ve, high: high)
        }
        throw HTTPParseError(400, "header block not terminated")
    }

    /// Where the field-value bytes from `i` stop (before `end`, or at the first byte a value may
    /// not hold: a control character other than HTAB, or DEL), and the OR of the bytes passed
    /// (its high bit: obs-text seen). Eight bytes at a time while they are all printable ASCII
    /// (0x20-0x7E: nearly every value), then byte by byte.
    @inline(__always)
    static func scanFieldValue(_ base: UnsafePointer<UInt8>, _ from: Int, _ end: Int) -> (Int, UInt8) {
        var i = from
        while i + 8 <= end {
            let w = UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self)
            let below = (w &- 0x2020_2020_2020_2020) & ~w & 0x8080_8080_8080_8080
            let above = ((w &+ 0x0101_0101_0101_0101) | w) & 0x8080_8080_8080_8080
            let flagged = below | above
            // The lowest flagged byte is the first that is not printable ASCII (a borrow or a
            // carry only flags bytes above one that is flagged itself): the byte loop starts there.
            guard flagged == 0 else { i += flagged.trailingZeroBitCount >> 3; break }
            i += 8
        }
        var high: UInt8 = 0
        while i < end, base[i] >= 0x20 && base[i] != 0x7F || base[i] == 0x09 {
            high |= base[i]
            i += 1
        }
        return (i, high)
    }

    /// Adds the field whose name is `base[name..<colon]` and value `base[vs..<ve]`. An ASCII
    /// value (`high` below 0x80, seen in the scan) is valid UTF-8 as it is; only a value with a
    /// byte >= 0x80 is validated (`String(validating:)` is generic and unspecialized in the
    /// standard library, about 1,000 instructions a field).
    @inline(__always)
    static func appendField(_ headers: inout HTTPHeaders, _ base: UnsafePointer<UInt8>, _ blockStart: Int,
                            name start: Int, _ colon: Int, value vs: Int, _ ve: Int, high: UInt8) {
        let isUTF8 = high < 0x80
            || String(validating: UnsafeBufferPointer(start: base + vs, count: ve - vs), as: UTF8.self) != nil
        headers.appendParsed(name: (start - blockStart)..<(colon - blockStart),
                             value: (vs - blockStart)..<(ve - blockStart), isUTF8: isUTF8,
                             UnsafeBufferPointer(start: base + start, count: colon - start),
                             UnsafeBufferPointer(start: base + vs, count: ve - vs))
    }
}

/// The header buffers of a connection's previous message, kept to parse its next one into
/// (`HTTPParser.parseRequestHead(_:reusing:)`): once that message is done with them, the next
/// one's headers cost no allocation. Whatever still holds the previous headers keeps them as
/// they are (the buffers are copy-on-write); the next headers are then made in new buffers.
public struct HeadersSpare {
    // Spelled out, with no default, and taken from the argument: so written, the lending
    // initializer moves the headers in. As `HTTPHeaders?` (nil first) set with `= headers`, it
    // copied them in and released the argument: two retains and two releases a request.
    var headers: Optional<HTTPHeaders>
    /// Whether the parser keeps the new headers' buffers here for the next message.
    let keepsParsed: Bool

    /// A connection's spare: empty at first, then the buffers of each head parsed with it.
    public init() {
        headers = nil
        keepsParsed = true
    }

    /// Lends `headers`' buffers (from a pool of finished messages' headers) to one parse, and
    /// keeps nothing afterwards.
    public init(lending headers: consuming HTTPHeaders?) {
        self.headers = headers.take()
        keepsParsed = false
    }

    /// After a parse: a connection's spare keeps the new headers' buffers, unless they are too
    /// large to hold on to.
    @inline(__always)
    mutating func keep(_ parsed: HTTPHeaders) {
        if keepsParsed && parsed.isWorthKeeping { headers = parsed }
    }
}

/// Splits a buffer into CRLF-terminated lines (without the CRLF). A bare LF stays in the
/// line, where the field-value check rejects it.
struct LineReader {
    let bytes: UnsafeRawBufferPointer
    var index: Int = 0
    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    mutating func next() -> Slice<UnsafeRawBufferPointer>? {
        nextRange().map { bytes[$0] }
    }

    /// The next line's byte range, found with memchr for its LF.
    mutating func nextRange() -> Range<Int>? {
        guard let base = bytes.baseAddress else { return nil }
        var from = index + 1  // a CR must come before the LF
        while from < bytes.count {
            guard let lf = memchr(base + from, 0x0A, bytes.count - from) else { return nil }
            let i = base.distance(to: UnsafeRawPointer(lf))
            if base.load(fromByteOffset: i - 1, as: UInt8.self) == 0x0D {
                let line = index..<(i - 1)
                index = i + 1
                return line
            }
            from = i + 1
        }
        return nil
    }
}

@inline(__always)
func startsWith(_ bytes: UnsafeRawBufferPointer, _ prefix: StaticString) -> Bool {
    bytes.count >= prefix.utf8CodeUnitCount && memcmp(bytes.baseAddress!, prefix.utf8Start, prefix.utf8CodeUnitCount) == 0
}

/// RFC 9110 `tchar` as a table indexed by byte, made once: the header parser's name loop
/// reads it for every byte of every name (the two masks of `isTokenChar` cost about three
/// times as many instructions per byte there). Written once, then only read.
nonisolated(unsafe) let tokenCharTable: UnsafePointer<Bool> = {
    let table = UnsafeMutablePointer<Bool>.allocate(capacity: 256)
    for c in 0..<256 { (table + c).initialize(to: isTokenChar(UInt8(c))) }
    return UnsafePointer(table)
}()

/// RFC 9110 `tchar`, as two bit masks (bit n of the first: byte n; of the second: byte 64 + n).
@inline(__always)
func isTokenChar(_ c: UInt8) -> Bool {
    c < 64 ? (0x03FF_6CFA_0000_0000 as UInt64) >> c & 1 != 0
           : c < 128 && (0x57FF_FFFF_C7FF_FFFE as UInt64) >> (c - 64) & 1 != 0
}

public enum HTTPStatus {
    /// The reason phrase of every status RFC 9110 (and RFC 6585's 428/429/431, RFC 7725's 451)
    /// defines, for the status lines the gateway writes and `txgate request -i` prints.
    public static func reason(_ code: Int) -> String {
        reasons[code] ?? "Status \(code)"
    }

    /// Whether `code` has a registered reason phrase (not the "Status N" fallback).
    public static func isRegistered(_ code: Int) -> Bool { reasons[code] != nil }

    static let reasons: [Int: String] = [
        100: "Continue", 101: "Switching Protocols",
        200: "OK", 201: "Created", 202: "Accepted", 203: "Non-Authoritative Information", 204: "No Content",
        205: "Reset Content", 206: "Partial Content",
        300: "Multiple Choices", 301: "Moved Permanently", 302: "Found", 303: "See Other", 304: "Not Modified",
        305: "Use Proxy", 307: "Temporary Redirect", 308: "Permanent Redirect",
        400: "Bad Request", 401: "Unauthorized", 402: "Payment Required", 403: "Forbidden", 404: "Not Found",
        405: "Method Not Allowed", 406: "Not Acceptable", 407: "Proxy Authentication Required", 408: "Request Timeout",
        409: "Conflict", 410: "Gone", 411: "Length Required", 412: "Precondition Failed", 413: "Content Too Large",
        414: "URI Too Long", 415: "Unsupported Media Type", 416: "Range Not Satisfiable", 417: "Expectation Failed",
        421: "Misdirected Request", 422: "Unprocessable Content", 425: "Too Early", 426: "Upgrade Required",
        428: "Precondition Required", 429: "Too Many Requests", 431: "Request Header Fields Too Large",
        451: "Unavailable For Legal Reasons",
        500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable",
        504: "Gateway Timeout", 505: "HTTP Version Not Supported",
    ]
}
