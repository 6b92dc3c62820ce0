// Chunked decoder (EventHTTP.ChunkedDecoder, over libevent evbuffers).
// The first input byte seeds how the rest is cut into pieces; the decoder is fed piece by piece
// and, separately, all at once. Invariants: both feedings agree (outcome, decoded bytes, bytes
// left after the last chunk and trailers), and both agree with a strict reference decoder
// written here from RFC 9112 §7.1 (chunk-size = 1*HEXDIG; no control byte but HTAB in a size,
// extension or trailer line, so no bare CR or LF).
import CLibevent
import EventHTTP
import HTTPCore
import FuzzSupport

func require(_ ok: Bool, _ what: @autoclosure () -> String) { if !ok { fatalError("invariant: " + what()) } }

enum Outcome: Equatable { case done, needMore, failed }

struct Result: Equatable {
    var outcome: Outcome
    var output: [UInt8]
    var leftover: [UInt8]   // only compared when done
}

func drain(_ b: OpaquePointer) -> [UInt8] {
    let n = evbuffer_get_length(b)
    var out = [UInt8](repeating: 0, count: n)
    if n > 0 { _ = out.withUnsafeMutableBytes { evbuffer_remove(b, $0.baseAddress, n) } }
    return out
}

func run(_ body: [UInt8], pieces: [Int]) -> Result {
    let input = evbuffer_new()!, output = evbuffer_new()!
    defer { evbuffer_free(input); evbuffer_free(output) }
    var decoder = ChunkedDecoder()
    var offset = 0
    var outcome = Outcome.needMore
    for length in pieces {
        let end = min(body.count, offset + length)
        body[offset..<end].withUnsafeBytes { _ = evbuffer_add(input, $0.baseAddress, $0.count) }
        offset = end
        do {
            if try decoder.decode(from: input, into: output) { outcome = .done; break }
        } catch {
            outcome = .failed; break
        }
    }
    let leftover = outcome == .done ? drain(input) + body[offset...] : []
    return Result(outcome: outcome, output: outcome == .failed ? [] : drain(output), leftover: leftover)
}

/// RFC 9112 §7.1, strictly: chunk-size is 1*HEXDIG (at most 15), then optional BWS and
/// extensions; lines end in CRLF and are at most 4096 bytes before it.
func reference(_ b: [UInt8]) -> Result {
    var i = 0, out: [UInt8] = []
    func line() -> [UInt8]?? {   // nil: incomplete; .some(nil): too long
        var j = i
        while j + 1 < b.count, !(b[j] == 0x0D && b[j + 1] == 0x0A) { j += 1 }
        if j + 1 >= b.count { return b.count - i > 4096 ? .some(nil) : nil }
        if j - i > 4096 { return .some(nil) }
        defer { i = j + 2 }
        return .some(Array(b[i..<j]))
    }
    func hasControl(_ l: [UInt8]) -> Bool { l.contains { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F } }
    while true {
        guard let l = line() else { return Result(outcome: .needMore, output: out, leftover: []) }
        guard var l, !hasControl(l) else { return Result(outcome: .failed, output: [], leftover: []) }
        if let semi = l.firstIndex(of: 0x3B) { l = Array(l[..<semi]) }
        while let f = l.first, f == 0x20 || f == 0x09 { l.removeFirst() }
        while let f = l.last, f == 0x20 || f == 0x09 { l.removeLast() }
        guard !l.isEmpty, l.count <= 15, l.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x66) }),
              let n = Int(String(decoding: l, as: UTF8.self), radix: 16)
        else { return Result(outcome: .failed, output: [], leftover: []) }
        if n == 0 { break }
        let take = min(n, b.count - i)
        out += b[i..<(i + take)]
        i += take
        if take < n || b.count - i < 2 { return Result(outcome: .needMore, output: out, leftover: []) }
        guard b[i] == 0x0D, b[i + 1] == 0x0A else { return Result(outcome: .failed, output: [], leftover: []) }
        i += 2
    }
    while true {
        guard let l = line() else { return Result(outcome: .needMore, output: out, leftover: []) }
        guard let l, !hasControl(l) else { return Result(outcome: .failed, output: [], leftover: []) }
        if l.isEmpty { return Result(outcome: .done, output: out, leftover: Array(b[i...])) }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzChunked(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    var seed = UInt64(data[0]) &* 0x9E37_79B9_7F4A_7C15 | 1
    let body = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    var pieces: [Int] = []
    var total = 0
    while total < body.count {
        seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17
        let n = data[0] < 16 ? 1 : Int(seed % 64) + 1
        pieces.append(n); total += n
    }
    if pieces.isEmpty { pieces = [0] }
    let whole = run(body, pieces: [body.count])
    let split = run(body, pieces: pieces)
    let strict = reference(body)
    require(whole == split, "split feeding differs: \(whole.outcome) vs \(split.outcome)")
    require(whole == strict, "differs from RFC 9112: \(whole.outcome) vs reference \(strict.outcome)")
    return 0
}

@_cdecl("fuzz_chunked_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt { runFuzzer(argc, argv, fuzzChunked) }
