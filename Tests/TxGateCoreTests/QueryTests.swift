import Foundation
import Testing
@testable import TxGateCore

@Suite struct QueryTests {
    /// What Foundation's replacingOccurrences + removingPercentEncoding gave, which the
    /// byte-level decoder replaced.
    static func reference(_ s: String) -> String {
        let plus = s.replacingOccurrences(of: "+", with: " ")
        return plus.removingPercentEncoding ?? plus
    }

    @Test func decodesLikeFoundation() {
        let cases = ["", "plain", "a+b", "a%20b", "%3CAdvices%3E%3CValue%3Ex%3C%2FValue%3E", "caf%C3%A9", "%e2%82%ac+x",
                     "100%", "%2", "%zz", "a%2Bb+c", "😀", "%F0%9F%98%80", "+%+", "a=b"]
        for c in cases {
            #expect(Query.decode(Substring(c)) == Self.reference(c), "\(c)")
        }
        let tokens = ["a", "z", "+", "é", "€", "%41", "%C3%A9", "%zz", "%2F", "%2b"]
        for _ in 0..<300 {
            let s = (0..<Int.random(in: 0...8)).map { _ in tokens.randomElement()! }.joined()
            #expect(Query.decode(Substring(s)) == Self.reference(s), "\(s)")
        }
        // Escapes that do not make UTF-8 stay as written (Foundation is inconsistent here: nil
        // for some strings, U+FFFD for others).
        #expect(Query.decode("%C3+x") == "%C3 x")
        #expect(Query.decode("€%a9") == "€%a9")
        let q = Query(target: "/am/json/authenticate?authIndexType=composite_advice&authIndexValue=%3CA%3E+1&empty&x=")
        #expect(q["authIndexType"] == "composite_advice" && q["authIndexValue"] == "<A> 1" && q["empty"] == "" && q["x"] == "")
    }

    @Test func xmlEscapingRoundTrips() {
        #expect(MarkupText.escape(#"<a href="x">&amp;</a>"#) == "&lt;a href=&quot;x&quot;&gt;&amp;amp;&lt;/a&gt;")
        #expect(xmlUnescape("&lt;a href=&quot;x&quot;&gt;&amp;amp;&lt;/a&gt;") == #"<a href="x">&amp;</a>"#)
        #expect(xmlUnescape("a & b &unknown; &amp") == "a & b &unknown; &amp")
        for s in ["", "plain", "&&&", "<<>>\"\"", "€ & 😀", "&amp;lt;"] {
            #expect(xmlUnescape(MarkupText.escape(s)) == s, "\(s)")
        }
    }
}
