import Testing
import TxGateWire

/// `split(byte:)` searches the contiguous bytes of a native string; it must cut exactly where the
/// standard library's `split` over the UTF-8 view cuts, for every option.
@Suite struct ByteSplitTests {
    static func reference(_ s: Substring, _ b: UInt8, _ maxSplits: Int, _ omitting: Bool) -> [String] {
        s.utf8.split(separator: b, maxSplits: maxSplits, omittingEmptySubsequences: omitting).map { String(Substring($0)) }
    }

    @Test func cutsWhereTheStandardLibraryCuts() {
        var rng = SystemRandomNumberGenerator()
        let pieces = ["a", ".", ".", "é", "\u{301}", "&", "=", "日本", "👍🏽"]
        for _ in 0..<5_000 {
            let s = (0..<Int.random(in: 0...12, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined()
            // A slice in the middle as well as the whole string, so that offsets start past 0.
            let whole = Substring(s)
            // (A line feed is always a Character of its own, so dropping it leaves `s` exactly.)
            let inner = ("\n" + s + "\n").dropFirst().dropLast()
            for sub in [whole, inner] {
                for maxSplits in [0, 1, 2, Int.max] {
                    for omitting in [true, false] {
                        let got = sub.split(byte: UInt8(ascii: "."), maxSplits: maxSplits, omittingEmptySubsequences: omitting).map(String.init)
                        #expect(got == Self.reference(sub, UInt8(ascii: "."), maxSplits, omitting), "\(Array(sub.utf8)) \(maxSplits) \(omitting)")
                    }
                }
            }
            #expect(s.split(byte: UInt8(ascii: "&")).map(String.init) == Self.reference(Substring(s), UInt8(ascii: "&"), .max, true))
        }
    }

    @Test func aJWTSplitsIntoItsThreeParts() {
        let parts = "eyJh.eyJ6.c2ln".split(byte: UInt8(ascii: "."), omittingEmptySubsequences: false)
        #expect(parts == ["eyJh", "eyJ6", "c2ln"])
        #expect("a..b.".split(byte: UInt8(ascii: "."), omittingEmptySubsequences: false) == ["a", "", "b", ""])
        #expect("..".split(byte: UInt8(ascii: ".")) == [])
    }
}
