/// What to do with `%2F` (an encoded `/`) in a request path: `paths.encodedSlash` in gateway.json.
/// Envoy's `path_with_escaped_slashes_action` is the model.
public enum EncodedSlashAction: String, Sendable, CaseIterable {
    /// 400: a backend that decodes `%2F` into a separator would see another path than the one
    /// policy decided on.
    case reject
    /// `%2F` stays as it is (upper-cased `%2F`, never decoded), an opaque part of its segment.
    /// Safe only when the backend does not decode `%2F` into a separator either.
    case keep
}

/// What `;` (path parameters, RFC 3986 §3.3) means in a request path: `paths.semicolon` in
/// gateway.json. Tomcat, Jetty and Spring drop `;params` from each segment before they resolve a
/// path, so `/public/..;/secret` is `/secret` to them while a `;`-blind proxy sees a segment
/// named `..;` under `/public`: the gateway decides once what `;` means, and in every mode a
/// segment whose part before its first `;` (or `%3B`) is `.` or `..` is refused.
public enum SemicolonAction: String, Sendable, CaseIterable {
    /// The default: each segment loses its parameters (`/a;v=1/b` → `/a/b`), for policies and
    /// for the backend alike, as a parameter-stripping server would resolve it.
    case strip
    /// 400 for any raw `;` in the path.
    case reject
    /// `;` stays an ordinary character of its segment: policies match `a;v=1` as it is. For
    /// backends that treat `;` as data and never strip parameters.
    case keep
}

/// The one path everything after parsing uses: policies match it and the upstream receives it,
/// so the backend can never be asked for another path than the one decided on.
public enum NormalizedPath: Equatable, Sendable {
    case path(String)
    /// Answer 400 with `reason.description`.
    case rejected(PathRejection)
}

public enum PathRejection: Equatable, Sendable, CustomStringConvertible {
    /// The path does not start with `/` (empty, `*`, or an absolute URL that was not split).
    case notAbsolute
    /// A `%` not followed by two hex digits.
    case malformedEscape
    /// A raw control byte (0x00-0x1F, 0x7F).
    case controlCharacter
    /// `%00`.
    case encodedNul
    /// `%2F`, when `encodedSlash` is `reject`.
    case encodedSlash
    /// `\` or `%5C`: some servers take it for `/`.
    case backslash
    /// A `..` segment with nothing left to remove.
    case climbsAboveRoot
    /// A `;`, when `semicolon` is `reject`.
    case semicolon
    /// A segment that is `.` or `..` before its parameters (`..;`, `..;x`, `..%3B`): a
    /// parameter-stripping backend would climb with it.
    case dotSegmentWithParameters

    public var description: String {
        switch self {
        case .notAbsolute: return "the request path must start with '/'"
        case .malformedEscape: return "the request path has a '%' that is not followed by two hex digits"
        case .controlCharacter: return "the request path contains a control character"
        case .encodedNul: return "the request path contains an encoded NUL (%00)"
        case .encodedSlash: return "the request path contains an encoded '/' (%2F)"
        case .backslash: return "the request path contains a backslash ('\\' or %5C)"
        case .climbsAboveRoot: return "the request path climbs above the root with '..'"
        case .semicolon: return "the request path contains ';' (paths.semicolon is reject)"
        case .dotSegmentWithParameters:
            return "the request path has a '.' or '..' segment with parameters (';' or %3B), which servers that strip them would climb with"
        }
    }
}

/// Normalizes a request path (RFC 3986 §6.2.2) before any policy sees it.
public enum PathNormalizer {
    /// Normalizes `raw`, the path of the request target without its query.
    ///
    /// - Percent-encoded unreserved characters (`ALPHA DIGIT - . _ ~`) are decoded; every other
    ///   escape stays encoded, with upper-case hex (`%3f` → `%3F`). A raw byte that may not appear
    ///   in a path (space, `"`, `<`, `|`, non-ASCII ...) is percent-encoded, as a browser would.
    /// - Dot segments are removed (RFC 3986 §5.2.4), also when written `%2e`/`%2E`, after the
    ///   decoding above. A final `.` or `..` leaves a trailing `/` (`/a/b/..` → `/a/`).
    /// - Empty segments are merged, as Envoy's `merge_slashes` does: `//a///b/` → `/a/b/`. So `//`
    ///   never names a different resource than `/`, for policies or for the backend. A trailing
    ///   `/` is kept (`/a/` stays `/a/`, distinct from `/a`).
    /// - Rejected: a path not starting with `/`, a malformed escape, a raw control byte, `%00`,
    ///   `\` or `%5C` (always), `%2F` (unless `encodedSlash` is `keep`), and a `..` that would
    ///   climb above the root (instead of silently stopping at the root, as RFC 3986 would).
    /// - Path parameters (`semicolon`): a segment that is `.` or `..` before its first `;` or
    ///   `%3B` is refused; then each segment loses its parameters (`strip`, the default), any
    ///   `;` is refused (`reject`), or `;` stays (`keep`). An encoded `%3B` is data, never a
    ///   parameter delimiter, and stays.
    ///
    /// One pass over the bytes; the result is itself normalized (normalizing it again gives it back).
    public static func normalize(_ raw: Substring, encodedSlash: EncodedSlashAction = .reject,
                                 semicolon: SemicolonAction = .strip) -> NormalizedPath {
        let bytes = raw.utf8
        guard bytes.first == UInt8(ascii: "/") else { return .rejected(.notAbsolute) }
        if isAlreadyNormal(bytes) { return .path(String(raw)) }
        var segments: [[UInt8]] = []
        var segment: [UInt8] = []
        // Whether the output ends with `/`: the last segment was empty, `.` or `..`.
        var trailingSlash = false
        // Where the segment's parameters start: its first raw `;` (stripped in `strip` mode),
        // and its first `;` raw or `%3B` (what comes before it must not be a dot segment).
        var parameters: Int?
        var semicolonLike: Int?

        func close(_ segment: inout [UInt8]) -> PathRejection? {
            if let at = semicolonLike {
                let name = segment[..<at]
                if name.elementsEqual([0x2E]) || name.elementsEqual([0x2E, 0x2E]) { return .dotSegmentWithParameters }
            }
            if let at = parameters, semicolon == .strip { segment.removeSubrange(at...) }
            parameters = nil
            semicolonLike = nil
            if segment.isEmpty || segment == [0x2E] {
                trailingSlash = true
            } else if segment == [0x2E, 0x2E] {
                guard !segments.isEmpty else { return .climbsAboveRoot }
                segments.removeLast()
                trailingSlash = true
            } else {
                segments.append(segment)
                trailingSlash = false
            }
            return nil
        }

        var i = bytes.index(after: bytes.startIndex)
        while i != bytes.endIndex {
            let b = bytes[i]
            i = bytes.index(after: i)
            switch b {
            case UInt8(ascii: "/"):
                if let rejection = close(&segment) { return .rejected(rejection) }
                segment.removeAll(keepingCapacity: true)
            case UInt8(ascii: ";"):
                guard semicolon != .reject else { return .rejected(.semicolon) }
                if parameters == nil { parameters = segment.count }
                if semicolonLike == nil { semicolonLike = segment.count }
                segment.append(b)
            case UInt8(ascii: "%"):
                let at = segment.count
                if let rejection = unescape(bytes, &i, into: &segment, encodedSlash: encodedSlash) { return .rejected(rejection) }
                if semicolonLike == nil, segment.count == at + 3, segment[at + 1] == UInt8(ascii: "3"), segment[at + 2] == UInt8(ascii: "B") {
                    semicolonLike = at
                }
            case UInt8(ascii: "\\"):
                return .rejected(.backslash)
            case 0..<0x20, 0x7F:
                return .rejected(.controlCharacter)
            default:
                if isPathCharacter(b) { segment.append(b) } else { appendEscape(b, to: &segment) }
            }
        }
        if let rejection = close(&segment) { return .rejected(rejection) }

        return .path(join(segments, trailingSlash: trailingSlash, capacity: bytes.count))
    }

    /// Reads the `%XY` escape whose hex digits start at `i` into `segment`: decoded if it is
    /// an unreserved character, kept (upper-cased) otherwise; or why it is refused.
    private static func unescape(_ bytes: Substring.UTF8View, _ i: inout Substring.UTF8View.Index, into segment: inout [UInt8],
                                 encodedSlash: EncodedSlashAction) -> PathRejection? {
        guard i != bytes.endIndex, let hi = hexDigitValue(bytes[i]) else { return .malformedEscape }
        let j = bytes.index(after: i)
        guard j != bytes.endIndex, let lo = hexDigitValue(bytes[j]) else { return .malformedEscape }
        i = bytes.index(after: j)
        let decoded = hi << 4 | lo
        switch decoded {
        case 0: return .encodedNul
        case UInt8(ascii: "\\"): return .backslash
        case UInt8(ascii: "/"):
            guard encodedSlash == .keep else { return .encodedSlash }
            appendEscape(decoded, to: &segment)
        default:
            if isUnreserved(decoded) { segment.append(decoded) } else { appendEscape(decoded, to: &segment) }
        }
        return nil
    }

    private static func join(_ segments: [[UInt8]], trailingSlash: Bool, capacity: Int) -> String {
        var out: [UInt8] = [UInt8(ascii: "/")]
        out.reserveCapacity(capacity)
        for (k, s) in segments.enumerated() {
            if k > 0 { out.append(UInt8(ascii: "/")) }
            out.append(contentsOf: s)
        }
        if trailingSlash && !segments.isEmpty { out.append(UInt8(ascii: "/")) }
        return String(decoding: out, as: UTF8.self)
    }

    /// RFC 3986 unreserved: ALPHA / DIGIT / "-" / "." / "_" / "~".
    static func isUnreserved(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    /// pchar without the escapes: unreserved / sub-delims / ":" / "@".
    static func isPathCharacter(_ b: UInt8) -> Bool {
        if isUnreserved(b) { return true }
        switch b {
        case UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"),
             UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="),
             UInt8(ascii: ":"), UInt8(ascii: "@"):
            return true
        default:
            return false
        }
    }

    private static let hexDigits: [UInt8] = Array("0123456789ABCDEF".utf8)

    private static func appendEscape(_ b: UInt8, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "%"))
        out.append(hexDigits[Int(b >> 4)])
        out.append(hexDigits[Int(b & 0x0F)])
    }

    /// For an origin-form request target (`/path?query`) whose path is already normal
    /// (`isAlreadyNormal`), the path's length in bytes; nil for any other target, which
    /// `normalize` decides on. Read in place: nearly every request's target, no String made.
    public static func normalPathLength(ofTarget target: String) -> Int? {
        target.withUTF8Bytes { b in
            guard b.first == UInt8(ascii: "/") else { return nil }
            let end = b.firstIndex(of: UInt8(ascii: "?")) ?? b.count
            return isAlreadyNormal(UnsafeBufferPointer(rebasing: b[..<end])) ? end : nil
        }
    }

    /// The common case, in one pass and no allocation: only plain path characters (RFC 3986
    /// pchar without `%` and `;`, and `/`), no empty segment inside (`//`), no `.` or `..` segment.
    @inline(__always)
    static func isAlreadyNormal<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> Bool {
        var segmentLength = 0
        var dots = 0
        var first = true
        for b in bytes {
            if b == UInt8(ascii: "/") {
                if !first && (segmentLength == 0 || dots == segmentLength && dots <= 2) { return false }
                first = false
                segmentLength = 0
                dots = 0
                continue
            }
            guard plain[Int(b)] else { return false }
            segmentLength += 1
            if b == UInt8(ascii: ".") { dots += 1 }
        }
        // The last segment: empty is a trailing slash (kept); `.` or `..` is not normal.
        return !(segmentLength > 0 && dots == segmentLength && dots <= 2)
    }

    private static let plain: [Bool] = {
        var t = [Bool](repeating: false, count: 256)
        for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,=:@".utf8 { t[Int(c)] = true }
        return t
    }()
}
