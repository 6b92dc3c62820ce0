import Foundation
import HTTPCore
import Testing
import TxGateCore

/// JSONValue.parse (our own parser) must accept and reject exactly what Foundation's
/// JSONDecoder does, and produce the same values: request bodies are bound through it.
@Suite struct JSONParserTests {
    static func foundation(_ text: [UInt8]) -> JSONValue? {
        try? JSONDecoder().decode(JSONValue.self, from: Data(text))
    }

    static let valid = [
        #"{}"#, #"[]"#, #"0"#, #"-0"#, #"1.5e3"#, #"-12.25E-2"#, #"1E+2"#, #"123456789012345678901234567890"#,
        #"true"#, #"false"#, #"null"#, #""""#, #" "x" "#, "\t{\r\n\"a\" : [ 1 , 2 ] }\n",
        #"{"amount":100,"currency":"EUR","payee":"Bob","memo":null,"flags":[true,false],"nested":{"k":[{}]}}"#,
        #""a\"b\\c\/d\b\f\n\r\t""#, #""\u00e9\u20AC\ud83d\ude00""#, #""é€😀""#,
        #"[0.1,0.2,1e-7,5e-324,1.7976931348623157e308]"#, #"{"":""}"#,
    ]

    static let invalid = [
        "", " ", "{", "}", "[1,]", "[,1]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "01", "-", "1.", ".5", "1e", "1e+",
        "+1", "NaN", "Infinity", "tru", "nul", "\"abc", "\"\\x\"", "\"\\u12\"", "\"\\ud83d\"", "\"\\ude00\"",
        "\"\\ud83d\\u0041\"", "\"a\u{01}b\"", "[1] [2]", "{}x", "1e400", "'a'", "[\"a\"\"b\"]",
        // A repeated key: Foundation keeps the first, many backends the last; refused here.
        "{\"amount\":1,\"amount\":1000}", "{\"a\":{\"b\":1,\"b\":1}}",
    ]

    @Test func agreesWithFoundationOnValidDocuments() {
        for text in Self.valid {
            let bytes = Array(text.utf8)
            let ours = JSONValue.parse(bytes)
            #expect(ours != nil, "rejected: \(text)")
            #expect(ours == Self.foundation(bytes), "differs from Foundation: \(text)")
        }
        #expect(JSONValue.parse(Array(#""\ud83d\ude00""#.utf8)) == .string("😀"))
    }

    @Test func rejectsWhatIsNotJSON() {
        for text in Self.invalid {
            #expect(JSONValue.parse(Array(text.utf8)) == nil, "accepted: \(text.debugDescription)")
        }
        // Bytes that are not UTF-8 inside a string.
        #expect(JSONValue.parse([0x22, 0xFF, 0x22]) == nil)
        #expect(JSONValue.parse([0x22, 0xC3, 0x22]) == nil)
        // Nesting is bounded instead of exhausting the stack.
        #expect(JSONValue.parse(Array(String(repeating: "[", count: 100_000).utf8)) == nil)
        #expect(JSONValue.parse(Array((String(repeating: "[", count: 100) + String(repeating: "]", count: 100)).utf8)) != nil)
    }

    /// `forEachMember` reads exactly the objects `parse` reads, to the same members in the order
    /// written, and nothing else; repeated keys are left to its caller.
    @Test func membersOfAnObjectAreReadAsParseReadsThem() {
        for text in Self.valid + Self.invalid {
            let bytes = Array(text.utf8)
            var members: [(String, JSONValue)] = []
            let read = JSONValue.forEachMember(of: bytes) { members.append(($0, $1)); return true }
            guard case .object(let o)? = JSONValue.parse(bytes) else {
                let repeated = text.hasPrefix("{\"amount\":1,")
                #expect(read == repeated, "read: \(text.debugDescription)")
                continue
            }
            #expect(read, "not read: \(text.debugDescription)")
            #expect(Dictionary(members, uniquingKeysWith: { a, _ in a }) == o && members.count == o.count, "\(text)")
        }
        var keys: [String] = []
        #expect(JSONValue.forEachMember(of: Array(#" {"b":1, "a":{"c":[2]}, "\u00e9":null} "#.utf8)) { k, _ in keys.append(k); return true })
        #expect(keys == ["b", "a", "é"])
        #expect(!JSONValue.forEachMember(of: Array(#"{"a":1,"b":2}"#.utf8)) { k, _ in k != "b" }, "stopped by its caller")
        #expect(!JSONValue.forEachMember(of: Array(#"{"a":1} {}"#.utf8)) { _, _ in true })
        #expect(!JSONValue.forEachMember(of: Array(#"{"a":1"#.utf8)) { _, _ in true })
        #expect(!JSONValue.forEachMember(of: Array(#"{"a":1;"b":2}"#.utf8)) { _, _ in true })
    }

    /// Strings are scanned eight bytes at a time: every byte that matters (a quote, a backslash,
    /// a control character, a byte that is not ASCII), next to its neighbours on both sides of
    /// the word test (0x1F/0x20, 0x21/0x22/0x23, 0x5B/0x5C/0x5D, 0x7F/0x80, 0xFF), at every
    /// position of strings up to three words long, is found where a byte-by-byte scan finds it,
    /// by the escape, by the writer (whose test reads whole words, the last overlapping) and by
    /// the parser.
    @Test func stringsAreScannedAsByteByByteWouldScanThem() {
        func reference(_ bytes: [UInt8]) -> [UInt8] {
            var out: [UInt8] = []
            for b in bytes {
                switch b {
                case 0x22: out += Array(#"\""#.utf8)
                case 0x5C: out += Array(#"\\"#.utf8)
                case 0x0A: out += Array(#"\n"#.utf8)
                case 0x0D: out += Array(#"\r"#.utf8)
                case 0x09: out += Array(#"\t"#.utf8)
                case ..<0x20: out += Array(String(format: "\\u%04x", b).utf8)
                default: out.append(b)
                }
            }
            return out
        }
        let probes: [UInt8] = [0x00, 0x01, 0x09, 0x0A, 0x1F, 0x20, 0x21, 0x22, 0x23, 0x5B, 0x5C, 0x5D, 0x7F, 0x80, 0xC3, 0xFF]
        for length in 1...24 {
            for position in 0..<length {
                for probe in probes {
                    var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: length)
                    bytes[position] = probe
                    if probe == 0xC3, position + 1 < length { bytes[position + 1] = 0xA9 }  // é: valid UTF-8
                    let valid = String(validating: bytes, as: UTF8.self)
                    if let text = valid {
                        #expect(Array(JSONText.escape(text).utf8) == reference(bytes), "\(bytes)")
                        var written = ByteWriter(capacity: 8)
                        JSONText.write(text, into: &written)
                        #expect(written.bytes == [0x22] + reference(bytes) + [0x22], "\(bytes)")
                        #expect(JSONValue.parse(Array("\"".utf8) + reference(bytes) + Array("\"".utf8)) == .string(text), "\(bytes)")
                    }
                    // Raw, unescaped: a control byte or a quote ends or breaks the document, and
                    // bytes that are not UTF-8 are refused, as byte by byte.
                    let raw = JSONValue.parse(Array("\"".utf8) + bytes + Array("\"".utf8))
                    let accepted = valid != nil && !bytes.contains(where: { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C })
                    #expect((raw != nil) == accepted, "\(bytes)")
                }
            }
        }
    }

    /// Random documents, written by Foundation's encoder and by `canonical`, parse back to the
    /// same value both ways.
    @Test func randomDocumentsRoundTrip() throws {
        var rng = SystemRandomNumberGenerator()
        func random(_ depth: Int) -> JSONValue {
            switch Int.random(in: 0..<(depth > 3 ? 4 : 6), using: &rng) {
            case 0: return .null
            case 1: return .bool(Bool.random(using: &rng))
            case 2: return .number(Bool.random() ? Double(Int.random(in: -1_000_000...1_000_000)) : Double.random(in: -1e9...1e9))
            case 3:
                let pool: [Character] = ["a", "é", "€", "😀", "\"", "\\", "/", "\n", "\u{01}", " ", "<", "\u{2028}"]
                return .string(String((0..<Int.random(in: 0...8)).map { _ in pool.randomElement()! }))
            case 4: return .array((0..<Int.random(in: 0...4)).map { _ in random(depth + 1) })
            default:
                var o: [String: JSONValue] = [:]
                for k in 0..<Int.random(in: 0...4) { o["k\(k)\(["", "é", "\""].randomElement()!)"] = random(depth + 1) }
                return .object(o)
            }
        }
        for _ in 0..<500 {
            let v = random(0)
            let encoded = Array(try JSONEncoder().encode(v))
            #expect(JSONValue.parse(encoded) == v, "\(String(decoding: encoded, as: UTF8.self))")
            #expect(JSONValue.parse(Array(v.canonical.utf8)) == v, "\(v.canonical)")
        }
    }

    /// Regression (Fuzz/README.md, fuzz-json): a JSON Pointer was split and unescaped by Character,
    /// so `~0` or `/` followed by a combining mark (U+0FAE, U+0301) was not seen.
    @Test func pointersWithCombiningMarks() throws {
        // The input the fuzzer saved.
        let v = try #require(JSONValue.parse(Array(#" {"e~\u0fae~": {"": 3}} "#.utf8)))
        #expect(v.at(pointer: "/e~0\u{FAE}~0") == JSONValue.parse(Array(#"{"": 3}"#.utf8)))
        #expect(v.at(pointer: "/e~0\u{FAE}~0/")?.intValue == 3)
        let w = try #require(JSONValue.parse(Array(#"{"\u0301a": {"\u0301": [1, 2]}, "~1": 4, "/": 5}"#.utf8)))
        #expect(w.at(pointer: "/\u{301}a/\u{301}/1")?.intValue == 2)
        #expect(w.at(pointer: "/~01")?.intValue == 4)
        #expect(w.at(pointer: "/~1")?.intValue == 5)
        #expect(w.at(pointer: "") == w)
        #expect(w.at(pointer: "x") == nil)
        // One token (the short path), on an object and on an array.
        #expect(w.at(pointer: "/\u{301}a") == JSONValue.parse(Array(#"{"\u0301": [1, 2]}"#.utf8)))
        #expect(w.at(pointer: "/\u{301}") == nil && w.at(pointer: "/") == nil)
        #expect(JSONValue.parse(Array(#"{"": 7}"#.utf8))?.at(pointer: "/")?.intValue == 7)
        #expect(JSONValue.parse(Array("[4, 5]".utf8))?.at(pointer: "/1")?.intValue == 5)
        #expect(JSONValue.parse(Array("[4, 5]".utf8))?.at(pointer: "/2") == nil)
    }

    /// `canonical` is what signatures and digests are computed over: its exact bytes. Keys in
    /// String order, strings escaped as `JSONText.escape` does (quote, backslash, \n \r \t, other
    /// controls as lowercase \u00XX), everything else as it is (non-ASCII unescaped).
    @Test func canonicalBytesAreExactlyTheEscapedSortedForm() {
        let tricky = "q\"b\\n\nr\rt\tc\u{01}\u{1F}é😀\u{7F}"
        let v = JSONValue.object(["b": .array([.string(tricky), .number(JSONNumber("1.5")!), .bool(true), .null]),
                                  "a": .object(["é": .string(""), "Z": .bool(false)]), tricky: .string("k")])
        let escaped = #"q\"b\\n\nr\rt\tc\u0001\u001fé😀\#u{7F}"#
        #expect(JSONText.escape(tricky) == escaped)
        #expect(v.canonical == #"{"a":{"Z":false,"é":""},"b":["\#(escaped)",1.5,true,null],"\#(escaped)":"k"}"#)
        #expect(v.canonicalBytes == Array(v.canonical.utf8))
        var out = ByteWriter()
        JSONText.write(tricky, into: &out)
        JSONText.write("plain é", into: &out)
        JSONText.write("", into: &out)
        #expect(out.bytes == Array(("\"" + escaped + "\"" + "\"plain é\"\"\"").utf8))
    }
}
