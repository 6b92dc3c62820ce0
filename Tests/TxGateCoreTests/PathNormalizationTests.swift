import Testing
@testable import TxGateCore

/// Issue 11 item 1: policies and the backend see one path, normalized once.
@Suite struct PathNormalizationTests {
    func norm(_ raw: String, _ slash: EncodedSlashAction = .reject) -> NormalizedPath {
        PathNormalizer.normalize(raw[...], encodedSlash: slash)
    }

    @Test(arguments: [
        // Traversal forms from the review.
        ("/pub/../accounts", "/accounts"),
        ("/pub/%2e%2e/accounts", "/accounts"),
        ("/pub/%2E%2e/accounts", "/accounts"),
        ("/pub/.%2E/accounts", "/accounts"),
        ("/pub/%2e/accounts", "/pub/accounts"),
        ("/pub/./accounts", "/pub/accounts"),
        ("/./accounts", "/accounts"),
        // Merged slashes (Envoy's merge_slashes); a trailing slash stays.
        ("//accounts", "/accounts"),
        ("/accounts//transfer", "/accounts/transfer"),
        ("/accounts///", "/accounts/"),
        ("//", "/"),
        ("/", "/"),
        ("/accounts/", "/accounts/"),
        // Trailing dot segments leave a trailing slash (RFC 3986 §5.2.4).
        ("/a/b/.", "/a/b/"),
        ("/a/b/..", "/a/"),
        ("/a/b/%2E%2E", "/a/"),
        ("/a/..", "/"),
        ("/.", "/"),
        ("/a/./b/../c", "/a/c"),
        // Segments that only look like dots stay.
        ("/a/.../b", "/a/.../b"),
        ("/a/..b/.c", "/a/..b/.c"),
        // Unreserved characters decoded; other escapes stay, with upper-case hex.
        ("/%41%62%2D%5f%7E%30", "/Ab-_~0"),
        ("/a%3Fb", "/a%3Fb"),
        ("/a%3fb", "/a%3Fb"),
        ("/caf%c3%a9", "/caf%C3%A9"),
        ("/a%20b", "/a%20b"),
        ("/a%25b", "/a%25b"),
        ("/a%0Ab", "/a%0Ab"),
        // Raw bytes outside the path set are encoded, as a browser would.
        ("/a b|c^", "/a%20b%7Cc%5E"),
        ("/café", "/caf%C3%A9"),
        // Sub-delims, ':' and '@' stay raw.
        ("/a:b@c!$&'()*+,=", "/a:b@c!$&'()*+,="),
        ("/a:b@c!$&'()*+,;=", "/a:b@c!$&'()*+,"),  // ';' starts parameters, stripped by default
    ])
    func normalizes(raw: String, expected: String) {
        #expect(norm(raw) == .path(expected), "\(raw)")
        // Normalizing is idempotent.
        #expect(norm(expected) == .path(expected), "\(expected)")
    }

    @Test(arguments: [
        ("/accounts/..%2ftransfer", PathRejection.encodedSlash),
        ("/accounts/..%2Ftransfer", .encodedSlash),
        ("/a%2fb", .encodedSlash),
        ("/..", .climbsAboveRoot),
        ("/../accounts", .climbsAboveRoot),
        ("/a/../..", .climbsAboveRoot),
        ("/a/../../b", .climbsAboveRoot),
        ("/%2e%2e/etc/passwd", .climbsAboveRoot),
        ("//..", .climbsAboveRoot),
        ("/a%5Cb", .backslash),
        ("/a%5cb", .backslash),
        ("/a\\b", .backslash),
        ("/..\\accounts", .backslash),
        ("/a%00b", .encodedNul),
        ("/a\u{0}b", .controlCharacter),
        ("/a\tb", .controlCharacter),
        ("/a\r\nb", .controlCharacter),
        ("/a\u{7F}", .controlCharacter),
        ("/a%", .malformedEscape),
        ("/a%4", .malformedEscape),
        ("/a%g1", .malformedEscape),
        ("/a%1g", .malformedEscape),
        ("", .notAbsolute),
        ("*", .notAbsolute),
        ("accounts", .notAbsolute),
        ("http://x/accounts", .notAbsolute),
    ])
    func rejects(raw: String, reason: PathRejection) {
        #expect(norm(raw) == .rejected(reason), "\(raw.debugDescription)")
    }

    @Test func keepLeavesAnEncodedSlashOpaque() {
        // Never decoded, never a separator: `..%2F` is not a dot segment.
        #expect(norm("/accounts/..%2ftransfer", .keep) == .path("/accounts/..%2Ftransfer"))
        #expect(norm("/files/a%2Fb/../c", .keep) == .path("/files/c"))
        #expect(norm("/files/a%2Fb/%2e", .keep) == .path("/files/a%2Fb/"))
        // Backslash, NUL and climbs stay refused under `keep`.
        #expect(norm("/a%5Cb", .keep) == .rejected(.backslash))
        #expect(norm("/a%00", .keep) == .rejected(.encodedNul))
        #expect(norm("/a/%2e%2e/%2E%2E", .keep) == .rejected(.climbsAboveRoot))
    }

    // MARK: path parameters (issue 23 item 4)

    func norm(_ raw: String, semicolon: SemicolonAction) -> NormalizedPath {
        PathNormalizer.normalize(raw[...], semicolon: semicolon)
    }

    /// Tomcat, Jetty and Spring read `/public/..;/secret` as `/secret`: refused in every mode.
    @Test(arguments: ["/public/..;/secret/x", "/public/a/..;/..;/secret/x", "/public/..;x/secret", "/public/..%3B/secret",
                      "/public/..%3b/secret", "/public/%2e%2e;/secret", "/public/.%2E%3Bx/secret", "/public/.;x", "/..;",
                      "/a/..;"])
    func dotSegmentsWithParametersAreRefused(_ raw: String) {
        for mode in SemicolonAction.allCases where mode != .reject || !raw.contains(";") {
            #expect(norm(raw, semicolon: mode) == .rejected(.dotSegmentWithParameters), "\(raw) \(mode)")
        }
        if raw.contains(";") { #expect(norm(raw, semicolon: .reject) == .rejected(.semicolon), "\(raw)") }
    }

    @Test func stripDropsEachSegmentsParameters() {
        #expect(norm("/public/a;v=1/b", semicolon: .strip) == .path("/public/a/b"))
        #expect(norm("/public;x/file;jsessionid=1", semicolon: .strip) == .path("/public/file"))
        #expect(norm("/a;x=1;y=2", semicolon: .strip) == .path("/a"))
        #expect(norm("/a/;x/b", semicolon: .strip) == .path("/a/b"), "a segment of parameters only is empty, and merged")
        #expect(norm("/a/;x", semicolon: .strip) == .path("/a/"))
        #expect(norm("/a;x/../b", semicolon: .strip) == .path("/b"), "a segment with parameters is still a segment for '..'")
        #expect(norm("/a/b;x/..", semicolon: .strip) == .path("/a/"))
        // An encoded ';' is data, never a delimiter, and it stays.
        #expect(norm("/a%3Bb", semicolon: .strip) == .path("/a%3Bb"))
        #expect(norm("/a%3bb;x", semicolon: .strip) == .path("/a%3Bb"))
        // Names that merely contain dots are not dot segments.
        #expect(norm("/a/...;x/b", semicolon: .strip) == .path("/a/.../b"))
        #expect(norm("/a/..x;y", semicolon: .strip) == .path("/a/..x"))
        // The rest of the rules still apply inside parameters.
        #expect(norm("/a;x%2Fy", semicolon: .strip) == .rejected(.encodedSlash))
        #expect(norm("/a;x\\y", semicolon: .strip) == .rejected(.backslash))
        #expect(norm("/a;%zz", semicolon: .strip) == .rejected(.malformedEscape))
    }

    @Test func rejectRefusesAnySemicolonAndKeepKeepsIt() {
        #expect(norm("/a;v=1", semicolon: .reject) == .rejected(.semicolon))
        #expect(norm("/a%3Bv=1", semicolon: .reject) == .path("/a%3Bv=1"))
        #expect(norm("/a;v=1/b", semicolon: .keep) == .path("/a;v=1/b"))
        #expect(norm("/a;v=1/../b", semicolon: .keep) == .path("/b"))
        #expect(norm("/a/;v", semicolon: .keep) == .path("/a/;v"))
        // The default is strip.
        #expect(PathNormalizer.normalize("/a;v=1/b") == .path("/a/b"))
    }

    @Test func aSemicolonNeverTakesTheFastPath() {
        #expect(!PathNormalizer.isAlreadyNormal("/a;b".utf8[...]))
        #expect(PathNormalizer.isAlreadyNormal("/a/b:c@d".utf8[...]))
    }

    /// The request phase's fast path (`normalPathLength(ofTarget:)`): a target it takes has a
    /// path that `normalize` leaves as it is, in every mode; what it leaves, `normalize` decides.
    @Test func theNormalTargetFastPathAgreesWithNormalize() {
        let paths = ["/", "/accounts", "/accounts/", "/a/b:c@d", "/a/.../b", "/a/..b/.c", "/x-y_z~0!$&'()*+,=",
                     "//", "/a//b", "/a/./b", "/a/..", "/.", "/a;v=1", "/a%2Fb", "/a%41", "/a b", "/café", "/a/b/.", ""]
        var fast = 0
        for path in paths {
            for query in ["", "?", "?x=1&y=/../", "?a?b"] {
                let target = path + query
                guard let n = PathNormalizer.normalPathLength(ofTarget: target) else { continue }
                fast += 1
                let head = String(decoding: target.utf8.prefix(n), as: UTF8.self)
                #expect(head == path, "\(target)")
                for slash in EncodedSlashAction.allCases {
                    for semicolon in SemicolonAction.allCases {
                        #expect(PathNormalizer.normalize(target[..<(target.firstIndex(of: "?") ?? target.endIndex)],
                                                         encodedSlash: slash, semicolon: semicolon) == .path(head), "\(target)")
                    }
                }
            }
        }
        #expect(fast == 7 * 4, "the plain paths, with and without a query, take the fast path")
        for target in ["*", "http://h/a", "a/b", "?x", "/a/../b?x", "/a%7E", "/a;b"] {
            #expect(PathNormalizer.normalPathLength(ofTarget: target) == nil, "\(target)")
        }
    }

    @Test func rejectionsSayWhatIsWrong() {
        #expect(PathRejection.semicolon.description.contains("';'"))
        #expect(PathRejection.dotSegmentWithParameters.description.contains("parameters"))
        #expect(PathRejection.encodedSlash.description == "the request path contains an encoded '/' (%2F)")
        #expect(PathRejection.climbsAboveRoot.description.contains(".."))
    }

    /// The review's bypass: `/pub/**` for anyone must not open `/pub/../accounts`.
    @Test func publicPatternNoLongerOpensAProtectedPath() throws {
        let pub = try #require(ResourcePattern("/pub/**"))
        guard case .path(let p) = norm("/pub/../accounts") else { Issue.record("rejected"); return }
        #expect(!pub.matches(p[...]))
        #expect(ResourcePattern("/accounts")!.matches(p[...]))
    }

    /// Defence in depth: even an unnormalized path with dot segments matches no wildcard.
    @Test func wildcardsNeverMatchDotSegments() throws {
        let pub = try #require(ResourcePattern("/pub/**"))
        let one = try #require(ResourcePattern("/accounts/*"))
        let mid = try #require(ResourcePattern("/a/*/c"))
        #expect(pub.matches("/pub/x/y"))
        #expect(!pub.matches("/pub/../accounts"))
        #expect(!pub.matches("/pub/x/../../accounts"))
        #expect(!pub.matches("/pub/./x"))
        #expect(!pub.matches("/pub/.."))
        #expect(one.matches("/accounts/42"))
        #expect(!one.matches("/accounts/.."))
        #expect(!one.matches("/accounts/."))
        #expect(!mid.matches("/a/../c"))
        #expect(one.matches("/accounts/..x"), "only whole dot segments are steps")
        // A pattern may not name a dot segment.
        #expect(ResourcePattern("/a/../b") == nil)
        #expect(ResourcePattern("/a/./b") == nil)
        #expect(ResourcePattern("/a/..") == nil)
    }

    /// Random paths: whatever is accepted is normalized for good (idempotent, no dot or empty
    /// segment, no escape of an unreserved character, upper-case hex only).
    @Test func randomPathsNormalizeForGood() {
        let pieces = ["/", "/", "a", "B", ".", "..", "%2e", "%2E", "%2f", "%41", "%7e", "%3f", "%c3%a9", "~", "%", "%5c", "-", " ", "é"]
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<3000 {
            let raw = "/" + (0..<Int.random(in: 0...10, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined()
            for slash in EncodedSlashAction.allCases {
                guard case .path(let p) = norm(raw, slash) else { continue }
                #expect(norm(p, slash) == .path(p), "\(raw) -> \(p)")
                let segments = p.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
                #expect(!segments.dropLast().contains(""), "\(raw) -> \(p)")
                #expect(!segments.contains(".") && !segments.contains(".."), "\(raw) -> \(p)")
                #expect(!p.contains("%2E") && !p.contains("%41") && !p.contains("%7E"), "\(raw) -> \(p)")
                #expect(!p.contains("%c3") && !p.contains("%a9") && !p.contains("%2f") && !p.contains("%3f"), "\(raw) -> \(p)")
                #expect(slash == .keep || !p.contains("%2F"), "\(raw) -> \(p)")
            }
        }
    }
}
