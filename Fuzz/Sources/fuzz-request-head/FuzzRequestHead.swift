// Request head parser: HTTPParser.parseRequestHead and requestFraming.
// Invariants: what is accepted is well-formed (token method, visible-ASCII target, token field
// names, field values without CTLs or surrounding whitespace), and writing the parsed head back
// out and parsing it again gives the same head.
import HTTPCore
import FuzzSupport

func require(_ ok: Bool, _ what: @autoclosure () -> String) { if !ok { fatalError("invariant: " + what()) } }

func isToken(_ c: UInt8) -> Bool {
    switch c {
    case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
    default: return Array("!#$%&'*+-.^_`|~".utf8).contains(c)
    }
}

func checkField(_ f: HTTPHeaders.Field) {
    require(!f.name.isEmpty && f.name.utf8.allSatisfy(isToken), "field name \(f.name.debugDescription)")
    require(f.value.utf8.allSatisfy { ($0 >= 0x20 || $0 == 0x09) && $0 != 0x7F }, "CTL in value \(f.value.debugDescription)")
    require(f.value.utf8.first != 0x20 && f.value.utf8.first != 0x09 && f.value.utf8.last != 0x20 && f.value.utf8.last != 0x09,
            "untrimmed value \(f.value.debugDescription)")
}

/// The previous input's header buffers, as a connection keeps them for its next request.
nonisolated(unsafe) var spare = HeadersSpare()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRequestHead(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = UnsafeRawBufferPointer(start: data, count: size)
    // Parsed into the previous head's buffers, the head is the one parsed into new ones.
    let reused = try? HTTPParser.parseRequestHead(input, reusing: &spare)
    guard let head = try? HTTPParser.parseRequestHead(input) else {
        require(reused == nil, "a head parsed into the spare buffers only")
        return 0
    }
    // Where the head ends: after its empty line; the bytes up to there parse as the same head.
    var length = 0
    var fresh = HeadersSpare()
    let measured = try? HTTPParser.parseRequestHead(input, reusing: &fresh, headLength: &length)
    require(measured != nil && length >= 4 && length <= size && input[length - 4] == 0x0D && input[length - 3] == 0x0A
            && input[length - 2] == 0x0D && input[length - 1] == 0x0A, "head length \(length) of \(size)")
    let prefix = try? HTTPParser.parseRequestHead(UnsafeRawBufferPointer(rebasing: input[..<length]))
    require(prefix != nil && prefix!.target == head.target && prefix!.headers == head.headers, "the head's own bytes parse differently")
    require(reused != nil && reused!.method == head.method && reused!.target == head.target
            && reused!.headers == head.headers && reused!.wantsKeepAlive == head.wantsKeepAlive
            && reused!.headers.connectionNamedHeaders() == head.headers.connectionNamedHeaders()
            && "\(Result { try HTTPParser.requestFraming(reused!) })" == "\(Result { try HTTPParser.requestFraming(head) })",
            "a head parsed into the spare buffers differs")
    // The framing read from the parser's notes is the general path's (fields copied one by one
    // carry no notes).
    var byHand = HTTPHeaders()
    head.headers.forEachRaw { byHand.append($0) }
    let general = RequestHead(method: head.method, target: head.target, versionMinor: head.versionMinor, headers: byHand)
    let noted = Result { try HTTPParser.requestFraming(head) }
    let plain = Result { try HTTPParser.requestFraming(general) }
    require("\(noted)" == "\(plain)", "framing from the notes \(noted) differs from \(plain)")
    // The fields a proxy forwards, read in place, are the ones it would have copied.
    var forwarded = ForwardedFields(head.headers)
    var expected = HTTPHeaders()
    var i = 0
    head.headers.forEachRaw { f in
        if f.name.count % 2 == 0 { forwarded.drop(at: i) } else { expected.append(f) }
        i += 1
    }
    var direct = HeadWriter()
    direct.writeFields(forwarded)
    var copied = HeadWriter()
    copied.writeFields(expected)
    require(direct.bytes == copied.bytes && forwarded.headers == expected, "forwarded fields differ from the copied ones")
    _ = head.path
    _ = head.wantsKeepAlive
    require(!head.method.isEmpty && head.method.utf8.allSatisfy(isToken), "method \(head.method.debugDescription)")
    require(!head.target.isEmpty && head.target.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }, "target \(head.target.debugDescription)")
    require(head.versionMinor == 0 || head.versionMinor == 1, "version \(head.versionMinor)")
    for f in head.headers { checkField(f) }

    var w = HeadWriter()
    w.write(head.method); w.write(" "); w.write(head.target); w.write(" HTTP/1."); w.write(head.versionMinor); w.writeCRLF()
    w.writeFields(head.headers)
    w.writeCRLF()
    let again = w.bytes.withUnsafeBytes { try? HTTPParser.parseRequestHead($0) }
    require(again != nil, "the written head does not parse")
    require(again!.method == head.method && again!.target == head.target && again!.versionMinor == head.versionMinor
            && again!.headers == head.headers, "round trip changed the head")
    return 0
}

@_cdecl("fuzz_request_head_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt { runFuzzer(argc, argv, fuzzRequestHead) }
