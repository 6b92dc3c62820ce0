// Response head parser: HTTPParser.parseResponseHead and responseFraming.
// Invariants: status is three digits, the status line has SP after the code when longer than
// `HTTP/1.x NNN`, the reason phrase has no CTL but HTAB (RFC 9112 §4: it is forwarded to the
// client), fields are well-formed, and writing the head back out parses to the same head.
import HTTPCore
import FuzzSupport

func require(_ ok: Bool, _ what: @autoclosure () -> String) { if !ok { fatalError("invariant: " + what()) } }

func isToken(_ c: UInt8) -> Bool {
    switch c {
    case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
    default: return Array("!#$%&'*+-.^_`|~".utf8).contains(c)
    }
}

/// The previous input's header buffers, as a connection keeps them for its next response.
nonisolated(unsafe) var spare = HeadersSpare()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzResponseHead(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = UnsafeRawBufferPointer(start: data, count: size)
    // Parsed into the previous head's buffers, the head is the one parsed into new ones.
    let reused = try? HTTPParser.parseResponseHead(input, reusing: &spare)
    guard let head = try? HTTPParser.parseResponseHead(input) else {
        require(reused == nil, "a head parsed into the spare buffers only")
        return 0
    }
    // Where the head ends: after its empty line; the bytes up to there parse as the same head.
    var length = 0
    var fresh = HeadersSpare()
    let measured = try? HTTPParser.parseResponseHead(input, reusing: &fresh, headLength: &length)
    require(measured != nil && length >= 4 && length <= size && input[length - 4] == 0x0D && input[length - 3] == 0x0A
            && input[length - 2] == 0x0D && input[length - 1] == 0x0A, "head length \(length) of \(size)")
    let prefix = try? HTTPParser.parseResponseHead(UnsafeRawBufferPointer(rebasing: input[..<length]))
    require(prefix != nil && prefix!.status == head.status && prefix!.headers == head.headers, "the head's own bytes parse differently")
    require(reused != nil && reused!.status == head.status && reused!.reason == head.reason
            && reused!.headers == head.headers && reused!.allowsKeepAlive == head.allowsKeepAlive
            && reused!.headers.connectionNamedHeaders() == head.headers.connectionNamedHeaders()
            && "\(Result { try HTTPParser.responseFraming(reused!, requestMethod: "GET") })"
               == "\(Result { try HTTPParser.responseFraming(head, requestMethod: "GET") })",
            "a head parsed into the spare buffers differs")
    // The framing read from the parser's notes is the general path's (fields copied one by one
    // carry no notes).
    var byHand = HTTPHeaders()
    head.headers.forEachRaw { byHand.append($0) }
    let general = ResponseHead(status: head.status, reason: head.reason, versionMinor: head.versionMinor, headers: byHand)
    for m in ["GET", "HEAD", "POST"] {
        let noted = Result { try HTTPParser.responseFraming(head, requestMethod: m) }
        let plain = Result { try HTTPParser.responseFraming(general, requestMethod: m) }
        require("\(noted)" == "\(plain)", "framing from the notes \(noted) differs from \(plain)")
    }
    _ = head.allowsKeepAlive
    require((0...999).contains(head.status), "status \(head.status)")
    require(head.versionMinor == 0 || head.versionMinor == 1, "version \(head.versionMinor)")
    var lineLength = 0
    while lineLength + 1 < size, !(input[lineLength] == 0x0D && input[lineLength + 1] == 0x0A) { lineLength += 1 }
    if lineLength > 12 { require(input[12] == 0x20, "no SP after the status code") }
    require(head.reason.utf8.allSatisfy { ($0 >= 0x20 || $0 == 0x09) && $0 != 0x7F }, "CTL in reason \(head.reason.debugDescription)")
    for f in head.headers {
        require(!f.name.isEmpty && f.name.utf8.allSatisfy(isToken), "field name \(f.name.debugDescription)")
        require(f.value.utf8.allSatisfy { ($0 >= 0x20 || $0 == 0x09) && $0 != 0x7F }, "CTL in value \(f.value.debugDescription)")
    }

    var w = HeadWriter()
    w.write("HTTP/1."); w.write(head.versionMinor); w.write(" ")
    let code = String(head.status)
    w.write(String(repeating: "0", count: 3 - code.count) + code)
    if !head.reason.isEmpty { w.write(" "); w.write(head.reason) }
    w.writeCRLF()
    w.writeFields(head.headers)
    w.writeCRLF()
    let again = w.bytes.withUnsafeBytes { try? HTTPParser.parseResponseHead($0) }
    require(again != nil, "the written head does not parse")
    require(again!.status == head.status && again!.reason == head.reason && again!.versionMinor == head.versionMinor
            && again!.headers == head.headers, "round trip changed the head")
    return 0
}

@_cdecl("fuzz_response_head_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt { runFuzzer(argc, argv, fuzzResponseHead) }
