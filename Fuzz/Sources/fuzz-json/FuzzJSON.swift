// JSON parser (JSONValue.parse). Invariants: a parsed value's canonical text parses back to an
// equal value, canonical text is a fixed point, every JSON Pointer the value has resolves, and
// `forEachMember` reads exactly the objects `parse` reads (or one with a repeated key), to the
// same members.
import TxGateCore
import FuzzSupport

func require(_ ok: Bool, _ what: @autoclosure () -> String) { if !ok { fatalError("invariant: " + what()) } }

func pointers(_ v: JSONValue, _ prefix: String, _ out: inout [(String, JSONValue)], budget: inout Int) {
    guard budget > 0 else { return }
    budget -= 1
    out.append((prefix, v))
    switch v {
    case .array(let a): for (i, e) in a.enumerated() { pointers(e, prefix + "/\(i)", &out, budget: &budget) }
    case .object(let o):
        for (k, e) in o {
            let token = k.replacingOccurrencesOfTilde()
            pointers(e, prefix + "/" + token, &out, budget: &budget)
        }
    default: break
    }
}

extension String {
    func replacingOccurrencesOfTilde() -> String {
        var s = ""
        for ch in self.unicodeScalars {
            if ch == "~" { s += "~0" } else if ch == "/" { s += "~1" } else { s.unicodeScalars.append(ch) }
        }
        return s
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSON(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    var members: [String: JSONValue] = [:]
    var repeated = false
    let read = JSONValue.forEachMember(of: bytes) { k, v in
        repeated = repeated || members.updateValue(v, forKey: k) != nil
        return true
    }
    guard let value = JSONValue.parse(bytes) else {
        require(!read || repeated, "forEachMember read what parse refuses")
        return 0
    }
    if case .object(let o) = value { require(read && members == o, "forEachMember read other members than parse") }
    else { require(!read, "forEachMember read a value that is not an object") }
    let canonical = value.canonical
    guard let again = JSONValue.parse(Array(canonical.utf8)) else {
        fatalError("invariant: canonical text does not parse: \(canonical.debugDescription)")
    }
    require(again == value, "canonical text parses to another value: \(canonical.debugDescription)")
    require(again.canonical == canonical, "canonical text is not a fixed point")
    var all: [(String, JSONValue)] = []
    var budget = 256
    pointers(value, "", &all, budget: &budget)
    for (p, v) in all { require(value.at(pointer: p) == v, "pointer \(p.debugDescription) does not resolve") }
    return 0
}

@_cdecl("fuzz_json_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt { runFuzzer(argc, argv, fuzzJSON) }
