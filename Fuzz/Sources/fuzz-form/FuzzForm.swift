// Form parser (FormBody.parse). Invariants: encoding the parsed fields again (every byte but the
// unreserved ones escaped, space as `+`) parses back to the same fields; and the parser agrees
// with PercentEncoding on each name and value.
import TxGateCore
import FuzzSupport

func require(_ ok: Bool, _ what: @autoclosure () -> String) { if !ok { fatalError("invariant: " + what()) } }

func encode(_ s: String) -> [UInt8] {
    var out: [UInt8] = []
    let hex = Array("0123456789ABCDEF".utf8)
    for c in s.utf8 {
        switch c {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, 0x2D, 0x2E, 0x5F, 0x2A: out.append(c)
        case 0x20: out.append(0x2B)
        default: out += [0x25, hex[Int(c >> 4)], hex[Int(c & 15)]]
        }
    }
    return out
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzForm(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let fields = FormBody.parse(bytes) else { return 0 }
    var body: [UInt8] = []
    for (i, f) in fields.enumerated() {
        if i > 0 { body.append(0x26) }
        body += encode(f.name) + [0x3D] + encode(f.value)
    }
    guard let again = FormBody.parse(body) else {
        fatalError("invariant: re-encoded form does not parse: \(String(decoding: body, as: UTF8.self))")
    }
    // Pairs that decode to an empty name and value are still pairs (`=` alone), so counts match.
    require(again == fields, "re-encoded form parses to other fields")
    for f in fields {
        require(PercentEncoding.decode(Substring(String(decoding: encode(f.name), as: UTF8.self)), plusIsSpace: true) == f.name,
                "PercentEncoding disagrees on \(f.name.debugDescription)")
    }
    return 0
}

@_cdecl("fuzz_form_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt { runFuzzer(argc, argv, fuzzForm) }
