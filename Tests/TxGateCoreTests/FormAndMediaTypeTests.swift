import Testing
import TxGateCore

@Suite struct FormBodyTests {
    func parse(_ s: String) -> [FormField]? { FormBody.parse(Array(s.utf8)) }
    func pairs(_ s: String) -> [String]? { parse(s)?.map { "\($0.name)=\($0.value)" } }

    @Test func decodesPairsInOrder() {
        #expect(pairs("amount=100&payee=Bob") == ["amount=100", "payee=Bob"])
        #expect(pairs("a+b=c%20d+e") == ["a b=c d e"])
        #expect(pairs("%26=%3D&x=1%2B1") == ["&==", "x=1+1"])
        #expect(pairs("a=1=2") == ["a=1=2"])
        #expect(pairs("payee=J%C3%A9r%C3%B4me") == ["payee=Jérôme"])
        #expect(pairs("payee=%e2%82%ac") == ["payee=€"])
        // Empty pairs are skipped; a bare name has an empty value.
        #expect(pairs("a=1&&b=2&") == ["a=1", "b=2"])
        #expect(pairs("flag&=x") == ["flag=", "=x"])
        #expect(pairs("") == [])
        // Repeats are kept, for the caller to judge.
        #expect(pairs("a=1&a=2") == ["a=1", "a=2"])
    }

    @Test func refusesWhatALenientParserWouldReadAnotherWay() {
        for bad in ["a=%", "a=%4", "a=%ZZ", "a=%4g", "%=1", "a=100%", "a=%E9", "a=%C3"] {
            #expect(parse(bad) == nil, "\(bad)")
        }
        #expect(FormBody.parse([UInt8(ascii: "a"), UInt8(ascii: "="), 0xFF]) == nil, "raw bytes that are not UTF-8")
    }
}

@Suite struct MediaTypeTests {
    @Test func parsesTypeSubtypeAndParameters() throws {
        let t = try #require(MediaType("Application/JSON; Charset=\"UTF-8\""))
        #expect(t.essence == "application/json")
        #expect(t.parameters == ["charset": "utf-8"])
        #expect(t.isJSON && !t.isForm)
        #expect(MediaType("application/merge-patch+json")?.isJSON == true)
        #expect(MediaType("application/vnd.api+json;v=2")?.isJSON == true)
        #expect(MediaType("application/jsonx")?.isJSON == false)
        #expect(MediaType("text/json")?.isJSON == false)
        #expect(MediaType("application/x-www-form-urlencoded")?.isForm == true)
        #expect(MediaType(" text/plain ;  a=1 ;b=\"x;\\\"y\" ; ")?.parameters == ["a": "1", "b": "x;\"y"])
    }

    @Test func normalizedIsOneTextPerMeaning() {
        #expect(MediaType("text/plain; b=1; a=2")?.normalized == "text/plain;a=2;b=1")
        #expect(MediaType("TEXT/Plain;a=\"2\";B=1")?.normalized == "text/plain;a=2;b=1")
        #expect(MediaType("text/plain;a=\"x y\"")?.normalized == "text/plain;a=\"x y\"")
        #expect(MediaType("text/plain;a=\"\"")?.normalized == "text/plain;a=\"\"")
    }

    @Test func refusesWhatIsNotOneMediaType() {
        for bad in ["", "json", "application/", "/json", "application/json, text/plain", "application/json;charset",
                    "application/json;charset=", "application/json;charset=utf-8;charset=latin1", "application /json",
                    "application/json;a=\"open", "application/json x", "application/json;a=\"\u{1}\""] {
            #expect(MediaType(bad) == nil, "\(bad.debugDescription)")
        }
    }
}
