import Foundation
import Testing
import TxGateCore

/// Issue 11 item 3: bound numbers compare by their exact decimal value and read exactly.
@Suite struct JSONNumberTests {
    func parse(_ text: String) -> JSONValue? { JSONValue.parse(Array(text.utf8)) }

    @Test func integersBeyondDoublePrecisionStayDistinct() {
        #expect(parse("9007199254740992") != parse("9007199254740993"))
        #expect(parse("9007199254740993")?.canonical == "9007199254740993")
        #expect(parse("123456789012345678901234567890")?.displayText == "123456789012345678901234567890")
        #expect(parse("-9223372036854775809")?.canonical == "-9223372036854775809")
    }

    @Test func decimalsBeyondDoublePrecisionStayDistinct() {
        #expect(parse("100") != parse("100.000000000000001"))
        #expect(parse("100.000000000000001")?.displayText == "100.000000000000001")
        #expect(parse("0.1")?.canonical == "0.1")
        #expect(parse("0.30000000000000004") != parse("0.3"))
    }

    @Test(arguments: [
        (["100", "100.0", "1e2", "1E2", "1.00E+2", "10e1", "1000e-1", "0.1e3", "100.000"], "100"),
        (["0", "-0", "0.0", "-0.0", "0e10", "0E-5"], "0"),
        (["12.5", "12.50", "1.25e1", "125e-1", "0.125E2"], "12.5"),
        (["-12.25E-2", "-0.1225"], "-0.1225"),
        (["0.000125", "1.25e-4", "125E-6"], "0.000125"),
        (["1e-7", "0.0000001", "10e-8"], "1e-7"),
        (["1.25e-7"], "1.25e-7"),
        (["1e21", "1000000000000000000000"], "1000000000000000000000"),
        (["1e64"], "1e64"),
        (["1e63"], "1" + String(repeating: "0", count: 63)),
        (["-1.5e100"], "-1.5e100"),
        (["5e-324"], "5e-324"),
        (["1.7976931348623157e308"], "1.7976931348623157e308"),
    ])
    func equalValuesCanonicalizeTheSame(forms: [String], canonical: String) throws {
        for f in forms {
            let v = try #require(parse(f), "rejected \(f)")
            #expect(v.canonical == canonical, "\(f)")
            #expect(v.displayText == canonical, "\(f)")
            #expect(v == .number(try #require(JSONNumber(canonical))))
            // The canonical text reads back as the same value.
            #expect(parse(v.canonical) == v)
        }
    }

    /// A plain integer is read as its own text without the general scan (`isPlainInteger`): the
    /// same value as the general reading of it with ".0" or "e0" appended, whatever its length
    /// (up to the 64 digits where the canonical form takes an exponent), sign and zeros; what
    /// is not plain ("-0", leading zeros, signs, too long) goes the general way.
    @Test func plainIntegersReadAsTheGeneralScanReadsThem() throws {
        var texts = ["0", "1", "-1", "7", "10", "100", "-100", "1900000000", "9007199254740993", "-9223372036854775809"]
        for n in 1...66 {
            texts.append(String(repeating: "9", count: n))
            texts.append("1" + String(repeating: "0", count: n - 1))
            texts.append("-" + String((0..<n).map { i in Character(String((i * 7 + 3) % 10)) }).drop { $0 == "0" })
        }
        for t in texts where t != "-" {
            let plain = JSONNumber(t), general = JSONNumber(t + ".0"), exponent = JSONNumber(t + "e0")
            #expect(plain == general && plain == exponent, "\(t): \(String(describing: plain)) \(String(describing: general))")
        }
        for refused in ["-0", "00", "-01", "012", "+1", "-", "", "1-", "--1"] {
            #expect(JSONNumber(refused)?.text == (refused == "-0" ? "0" : nil), "\(refused)")
        }
    }

    @Test func hostileNumbersAreRefused() {
        #expect(JSONNumber(String(repeating: "9", count: 64)) != nil)
        #expect(JSONNumber(String(repeating: "9", count: 65)) == nil, "too many significant digits")
        #expect(JSONNumber("1" + String(repeating: "0", count: 128)) == nil, "longer than maxLength as written")
        #expect(JSONNumber("1" + String(repeating: "0", count: 127)) != nil, "trailing zeros are not significant")
        #expect(JSONNumber("1e309") == nil)
        #expect(JSONNumber("1.8e308") == nil, "beyond a Double")
        #expect(JSONNumber("1e-999") != nil)
        #expect(JSONNumber("1e-1000") == nil)
        #expect(JSONNumber("1e99999999999999999999999999") == nil)
        #expect(JSONNumber("0e99999999999999999999999999")?.text == "0")
        #expect(parse("[1e400]") == nil)
        #expect(parse(#"{"amount":"# + String(repeating: "1", count: 200) + "}") == nil)
    }

    @Test func onlyJSONNumberGrammar() {
        for bad in ["", "-", "+1", "01", "-01", "1.", ".5", "1e", "1e+", "1.e5", "0x10", "1_000", " 1", "1 ", "NaN", "Infinity", "--1", "1e5.0", "1-2"] {
            #expect(JSONNumber(bad) == nil, "\(bad)")
        }
        #expect(parse("[1-2]") == nil)
        #expect(parse("[1,-2]") == .array([1, -2]))
    }

    @Test func accessorsForExistingCallers() throws {
        #expect(JSONNumber("1e3")?.intValue == 1000)
        #expect(JSONNumber("1.5")?.intValue == nil)
        #expect(JSONNumber("9223372036854775808")?.intValue == nil, "never rounded into an Int")
        #expect(JSONNumber("-12.5")?.doubleValue == -12.5)
        #expect(JSONValue.number(1_800_000_000).canonical == "1800000000")
        #expect(JSONValue.number(12.5).canonical == "12.5")
        #expect(JSONValue.number(0.1).canonical == "0.1")
        #expect(JSONValue.number(Double.nan) == .null)
        #expect(JSONValue.parse(Array("1.0".utf8))?.intValue == 1)
        #expect(JSONValue.parse(Array("1.5".utf8))?.intValue == nil)
    }

    @Test func foundationCodingKeepsTheValueOrRefuses() throws {
        let v: JSONValue = .array([.number(try #require(JSONNumber("9007199254740993"))), .number(try #require(JSONNumber("100.000000000000001")))])
        let encoded = try JSONEncoder().encode(v)
        #expect(JSONValue.parse(Array(encoded)) == v)
        #expect(try JSONDecoder().decode(JSONValue.self, from: encoded) == v)
        // 64 digits: more than Foundation holds, so encoding throws instead of rounding.
        let long = JSONValue.number(try #require(JSONNumber("1." + String(repeating: "1", count: 63))))
        #expect(throws: EncodingError.self) { try JSONEncoder().encode(long) }
    }
}
