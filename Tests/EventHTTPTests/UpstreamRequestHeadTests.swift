import Testing
@testable import EventHTTP

/// The request head the pool writes upstream: which bodiless methods still say
/// `Content-Length: 0` (RFC 9110 §8.6: a request whose method gives content a meaning, as POST,
/// PUT and PATCH do, says its length, even when it is 0).
@Suite struct UpstreamRequestHeadTests {
    @Test(arguments: [("POST", true), ("PUT", true), ("PATCH", true), ("GET", false), ("HEAD", false),
                      ("DELETE", false), ("OPTIONS", false), ("PUX", false), ("POSX", false), ("PATCX", false), ("", false)])
    func aBodilessRequestSaysItsLengthOnlyForMethodsThatCarryABody(method: String, says: Bool) {
        #expect(UpstreamCall.sendsLengthWhenEmpty(method) == says)
    }
}
