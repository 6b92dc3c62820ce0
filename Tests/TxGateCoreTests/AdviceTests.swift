import Foundation
import Testing
@testable import TxGateCore

/// The challenge formats, checked the way each real client parses them (WIRE.md §3).
@Suite struct AdviceTests {
    let amURI = "https://gw.example.com/am/"

    /// iOS: split on ",", then on "=", key must be exactly `advices`.
    func iosAdvices(_ header: String) -> String? {
        for part in header.dropFirst("SSOADVICE ".count).split(separator: ",") {
            let kv = part.split(separator: "=", maxSplits: 1)
            if kv.count == 2, kv[0] == "advices" { return String(kv[1].dropFirst().dropLast()) }
        }
        return nil
    }

    /// Android: every ","-segment must be key=value; decodes base64 with the URL-safe alphabet,
    /// silently skipping characters outside it ("+" and "/").
    func androidDecode(_ header: String) throws -> String {
        var advices: String?
        for seg in header.dropFirst("SSOADVICE ".count).split(separator: ",", omittingEmptySubsequences: false) {
            guard let eq = seg.firstIndex(of: "=") else { throw ParseFailure() }
            if seg[..<eq] == "advices" { advices = String(seg[seg.index(after: eq)...].dropFirst().dropLast()) }
        }
        guard let a = advices else { throw ParseFailure() }
        let urlSafe = a.filter { $0 != "+" && $0 != "/" }.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        guard let data = Data(base64Encoded: urlSafe) else { throw ParseFailure() }
        return String(decoding: data, as: UTF8.self)
    }
    struct ParseFailure: Error {}

    /// JS: atob, standard alphabet, padding required.
    func atob(_ s: String) -> String? { Data(base64Encoded: s).map { String(decoding: $0, as: UTF8.self) } }

    func sameAdvices(_ json: String, _ advices: Advices) -> Bool {
        guard let v = JSONValue.parse(Array(json.utf8)), case .object(let o) = v else { return false }
        return o.count == advices.entries.count && advices.entries.allSatisfy { e in
            o[e.name]?.arrayValue?.compactMap(\.stringValue) == e.values
        }
    }

    /// The advices object as clients parse it: entries and values in order, compact, strings
    /// escaped as JSON; the same bytes as text and as bytes; the error body around it.
    @Test func advicesJSONIsCompactOrderedAndEscaped() {
        let a = Advices([("TransactionConditionAdvice", ["t1", "t\"2\\"]), ("AuthenticateToServiceConditionAdvice", ["/:Step\nUp"]),
                         ("Empty", [])])
        let expected = #"{"TransactionConditionAdvice":["t1","t\"2\\"],"AuthenticateToServiceConditionAdvice":["/:Step\nUp"],"Empty":[]}"#
        #expect(a.json == expected)
        #expect(a.jsonBytes == Array(expected.utf8))
        #expect(Advices([]).json == "{}")
        #expect(ErrorBody.text(status: 401, message: "say \"hi\"", members: #""advices":\#(a.json)"#)
                == #"{"code":401,"reason":"Unauthorized","message":"say \"hi\"","advices":"# + expected + "}")
        #expect(ErrorBody.json(status: 404, message: "") == Array(#"{"code":404,"reason":"Not Found","message":""}"#.utf8))
    }

    @Test func headerHasIGsExactShape() {
        let a = Advices([(Advices.transaction, ["58669e19-425a-4333-91d8-70995af06927"])])
        let h = Challenge.ssoAdviceHeader(realm: "/", advices: a, amURI: amURI)
        #expect(h == #"SSOADVICE realm="/",advices="eyJUcmFuc2FjdGlvbkNvbmRpdGlvbkFkdmljZSI6WyI1ODY2OWUxOS00MjVhLTQzMzMtOTFkOC03MDk5NWFmMDY5MjciXX0=",am_uri="https://gw.example.com/am/""#)
        #expect(!h.contains(", "))
    }

    @Test func everyClientDecodesTheSameAdvice() throws {
        let a = Advices([(Advices.transaction, [UUID().uuidString.lowercased()])])
        let h = Challenge.ssoAdviceHeader(realm: "/", advices: a, amURI: amURI)
        let b64 = try #require(iosAdvices(h))
        #expect(sameAdvices(try #require(atob(b64)), a))
        #expect(sameAdvices(try androidDecode(h), a))
    }

    @Test func valuesWhosePlainBase64HasPlusOrSlashAreRealigned() throws {
        // Find tree names whose naive encoding would carry "+" or "/" (Android would corrupt them).
        var found: [Advices] = []
        for i in 0..<2000 where found.count < 25 {
            let a = Advices([(Advices.authenticateToService, ["/:Confirm\(i)?~>"])])
            let naive = Data(a.json.utf8).base64EncodedString()
            if naive.contains("+") || naive.contains("/") { found.append(a) }
        }
        #expect(found.count == 25)
        for a in found {
            let b64 = Challenge.adviceBase64(a)
            #expect(!b64.contains("+") && !b64.contains("/"), "\(a.json) → \(b64)")
            #expect(b64.count % 4 == 0)
            #expect(sameAdvices(try #require(atob(b64)), a))
            let h = Challenge.ssoAdviceHeader(realm: "/", advices: a, amURI: amURI)
            #expect(sameAdvices(try androidDecode(h), a))
        }
    }

    @Test func randomAdvicesNeverEncodeToPlusOrSlash() throws {
        var rng = SystemRandomNumberGenerator()
        let alphabet = Array("abcXYZ019/:?~>_-. ü")
        for _ in 0..<500 {
            let name = String((0..<Int.random(in: 1...30, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! })
            let a = Advices([(Advices.authenticateToService, ["/:" + name]), (Advices.transaction, [UUID().uuidString])])
            let b64 = Challenge.adviceBase64(a)
            #expect(!b64.contains("+") && !b64.contains("/"), "\(a.json)")
            #expect(sameAdvices(try #require(atob(b64)), a))
        }
    }

    @Test func adviceXMLRoundTripsInBothInputForms() throws {
        let a = Advices([(Advices.transaction, ["7b8bfd4c-60fe-4271-928d-d09b94496f84"])])
        #expect(a.xml == #"<Advices><AttributeValuePair><Attribute name="TransactionConditionAdvice"/><Value>7b8bfd4c-60fe-4271-928d-d09b94496f84</Value></AttributeValuePair></Advices>"#)
        #expect(Advices.parse(xmlOrBase64: a.xml) == a)
        let b64url = Data(a.xml.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        #expect(Advices.parse(xmlOrBase64: b64url) == a)
        #expect(Advices.parse(xmlOrBase64: "<nope/>") == nil)
    }

    @Test func browserRedirectCarriesGotoWithTxidAndTheXML() throws {
        let txid = "58669e19-425a-4333-91d8-70995af06927"
        let a = Advices([(Advices.transaction, [txid])])
        let goto = Challenge.addingQuery("https://gw.example.com/transfer?x=1", "_txid", txid)
        #expect(goto == "https://gw.example.com/transfer?x=1&_txid=\(txid)")
        let loc = Challenge.loginRedirect(loginPage: amURI + "XUI/", goto: goto, realm: "/", advices: a)
        let c = try #require(URLComponents(string: loc))
        #expect(c.path == "/am/XUI/")
        let items = Dictionary(uniqueKeysWithValues: (c.queryItems ?? []).map { ($0.name, $0.value ?? "") })
        #expect(items["goto"] == goto)
        #expect(items["realm"] == "/")
        #expect(items["authIndexType"] == "composite_advice")
        #expect(items["authIndexValue"] == a.xml)
    }

    @Test func rfc9470Challenge() {
        #expect(Challenge.bearerStepUp(acr: "ConfirmTransaction", txid: "t-1") ==
                #"Bearer error="insufficient_user_authentication", error_description="A different authentication level is required", acr_values="ConfirmTransaction", txid="t-1""#)
    }

    @Test func retryParametersAreStripped() {
        #expect(RetryParameters.strip("/transfer?_txid=abc").target == "/transfer")
        #expect(RetryParameters.strip("/transfer?_txid=abc").txid == "abc")
        #expect(RetryParameters.strip("/a?x=1&_txid=abc&_idtoken=zz&y=2") == ("/a?x=1&y=2", "abc"))
        #expect(RetryParameters.strip("/a?x=1").target == "/a?x=1")
        #expect(RetryParameters.strip("/a").txid == nil)
        // The TxId is percent-decoded, `+` is not a space, and a malformed escape is kept as sent.
        #expect(RetryParameters.strip("/a?_txid=a%2Db+c").txid == "a-b+c")
        #expect(RetryParameters.strip("/a?_txid=a%2").txid == "a%2")
        #expect(RetryParameters.strip("/a?_txid=%FF").txid == "%FF")
        #expect(RetryParameters.strip("/a?_txid=").txid == "")
    }

    /// Regression (Fuzz/README.md, fuzz-advice): names and values that start with a combining mark
    /// (or hold invalid UTF-8) merged with the `"` or `>` before them in Character-wise searches, so
    /// the advices' own XML did not parse back to them.
    @Test func xmlRoundTripsNamesAndValuesStartingWithACombiningMark() throws {
        let a = Advices([("\u{301}name", ["\u{301}v", "&\u{301}", "<\u{301}", "x\u{5B0}"]), ("\u{5B0}", [])])
        #expect(Advices.parse(xmlOrBase64: a.xml) == a)
        #expect(Advices.parse(xmlOrBase64: Data(a.xml.utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")) == a)

        // The input the fuzzer saved: after its mode byte, NUL-separated name and values, 0x01 between entries.
        let found = try #require(Data(base64Encoded: "AlRyYW5zgwIAAAAAAABhY25Db25kaXRpb5ZBZHZpY2UAdIPSzv6+0IvW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1trW1tbW1tbW1tbX1tbW1tbW1tbW1tbW1tbW1ouLi4uLi4uLi4uLi4uLi4uLi4uLi4uLi4uLi4uLi4sBAAAti4uLi4uLi4uLi4uLi4uLi4uLi4uLi4uLi4uLi4uLi4sui4uLi4uLi4uLi4uLi4uLi4uLi4uLi4uLi4uLi4uLi4uL1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbWPSJBdXRoU2NrPtaXTL8cLK1ofAAAaXRgaW9uQWR2gWljZQAwACsvKy/DqQ=="))
        let entries = Array(found.dropFirst()).split(separator: 0x01, omittingEmptySubsequences: false).map { group in
            let parts = group.split(separator: 0x00, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
            return (parts[0], Array(parts.dropFirst()))
        }
        let fromFuzzer = Advices(entries)
        #expect(Advices.parse(xmlOrBase64: fromFuzzer.xml) == fromFuzzer)
    }
}
