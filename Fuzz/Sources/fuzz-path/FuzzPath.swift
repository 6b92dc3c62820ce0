// Path normalization (PathNormalizer.normalize), under every encodedSlash × semicolon mode.
// Invariants: a normalized path is a fixed point, starts with `/`, has no empty, `.` or `..`
// segment, and no segment that is `.` or `..` before its first `;` or `%3B`; no raw byte outside
// the path characters; every `%` starts an upper-case escape that is not an unreserved
// character; no raw `;` unless semicolon is `keep`. `keep` agrees with `reject` whenever
// `reject` accepts (for either option), and `strip` with `keep` on a path without a raw `;`.
// A target `normalPathLength(ofTarget:)` takes has a path that every mode leaves as it is.
import TxGateCore
import FuzzSupport

func require(_ ok: Bool, _ what: @autoclosure () -> String) { if !ok { fatalError("invariant: " + what()) } }

func isUnreserved(_ c: UInt8) -> Bool {
    (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2D || c == 0x2E || c == 0x5F || c == 0x7E
}

func check(_ p: String, _ action: EncodedSlashAction, _ semicolon: SemicolonAction, input: String) {
    let b = Array(p.utf8)
    require(b.first == 0x2F, "not absolute: \(p.debugDescription)")
    require(PathNormalizer.normalize(Substring(p), encodedSlash: action, semicolon: semicolon) == .path(p),
            "not a fixed point (\(semicolon)): \(input.debugDescription) -> \(p.debugDescription)")
    require(semicolon == .keep || !b.contains(0x3B), "';' left by \(semicolon) in \(p.debugDescription)")
    let segments = p.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
    for (i, s) in segments.enumerated() {
        require(s != "." && s != "..", "dot segment in \(p.debugDescription)")
        require(!s.isEmpty || i == segments.count - 1, "empty segment in \(p.debugDescription)")
        // What a parameter-stripping server (Tomcat, Spring) would resolve: never a dot segment.
        let name = s.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false)[0]
        let beforeEncoded = name.range(of: "%3B").map { name[..<$0.lowerBound] } ?? name
        require(beforeEncoded != "." && beforeEncoded != "..", "dot segment with parameters in \(p.debugDescription)")
    }
    var i = 0
    while i < b.count {
        let c = b[i]
        require(c > 0x20 && c < 0x7F && c != 0x5C, "raw byte \(c) in \(p.debugDescription)")
        if c == 0x25 {
            require(i + 2 < b.count, "short escape in \(p.debugDescription)")
            let hex = Array("0123456789ABCDEF".utf8)
            guard let hi = hex.firstIndex(of: b[i + 1]), let lo = hex.firstIndex(of: b[i + 2]) else {
                fatalError("invariant: escape not upper-case hex in \(p.debugDescription)")
            }
            let decoded = UInt8(hi << 4 | lo)
            require(!isUnreserved(decoded), "escaped unreserved character in \(p.debugDescription)")
            require(decoded != 0 && decoded != 0x5C && (decoded != 0x2F || action == .keep), "forbidden escape in \(p.debugDescription)")
            i += 3
        } else {
            i += 1
        }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPath(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    // The request phase's fast path: a target it takes has a path `normalize` leaves as it is.
    if let n = PathNormalizer.normalPathLength(ofTarget: input) {
        let path = String(decoding: input.utf8.prefix(n), as: UTF8.self)
        require(!path.utf8.contains(0x3F), "the fast path's path has a query: \(input.debugDescription)")
        for semicolon in SemicolonAction.allCases {
            for slash in EncodedSlashAction.allCases {
                require(PathNormalizer.normalize(Substring(path), encodedSlash: slash, semicolon: semicolon) == .path(path),
                        "the fast path took \(input.debugDescription), which normalize changes")
            }
        }
    }
    var results: [SemicolonAction: (reject: NormalizedPath, keep: NormalizedPath)] = [:]
    for semicolon in SemicolonAction.allCases {
        let rejecting = PathNormalizer.normalize(Substring(input), encodedSlash: .reject, semicolon: semicolon)
        let keeping = PathNormalizer.normalize(Substring(input), encodedSlash: .keep, semicolon: semicolon)
        results[semicolon] = (rejecting, keeping)
        if case .path(let p) = rejecting {
            check(p, .reject, semicolon, input: input)
            require(keeping == rejecting, "encodedSlash keep and reject disagree on \(input.debugDescription)")
        }
        if case .path(let p) = keeping { check(p, .keep, semicolon, input: input) }
        if case .rejected(let r) = keeping { _ = r.description; require(r != .encodedSlash, "keep rejected %2F") }
        if case .rejected(.semicolon) = rejecting { require(semicolon == .reject, "\(semicolon) rejected ';'") }
    }
    for slash in [\(reject: NormalizedPath, keep: NormalizedPath).reject, \.keep] {
        let strip = results[.strip]![keyPath: slash], reject = results[.reject]![keyPath: slash], keep = results[.keep]![keyPath: slash]
        if case .path = reject { require(strip == reject && keep == reject, "semicolon modes disagree on \(input.debugDescription)") }
        if !input.utf8.contains(0x3B) { require(strip == keep, "strip and keep disagree without ';' on \(input.debugDescription)") }
    }
    return 0
}

@_cdecl("fuzz_path_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt { runFuzzer(argc, argv, fuzzPath) }
