import Testing
import TxGateCrypto
@testable import TxGateCore

private func hex(_ s: String) -> [UInt8] { Crypto.fromHex(s)! }

private func refusal(_ h: String, limits: CBORDecoder.Limits = .init()) -> CBORError? {
    do { _ = try CBORDecoder.decode(hex(h), limits: limits); return nil } catch { return error }
}

/// The strict CBOR decoder WebAuthn's parsing stands on: RFC 8949 Appendix A's examples of the
/// kinds it reads decode (and encode back to the same bytes), everything else is refused with
/// the problem and the byte offset.
@Suite struct CBORTests {
    /// RFC 8949 Appendix A: the examples within the accepted subset.
    static let examples: [(String, CBOR)] = [
        ("00", .unsigned(0)), ("01", .unsigned(1)), ("0a", .unsigned(10)), ("17", .unsigned(23)),
        ("1818", .unsigned(24)), ("1819", .unsigned(25)), ("1864", .unsigned(100)), ("1903e8", .unsigned(1000)),
        ("1a000f4240", .unsigned(1_000_000)), ("1b000000e8d4a51000", .unsigned(1_000_000_000_000)),
        ("1bffffffffffffffff", .unsigned(.max)), ("3bffffffffffffffff", .negative(.max)),
        ("20", .int(-1)), ("29", .int(-10)), ("3863", .int(-100)), ("3903e7", .int(-1000)),
        ("f4", .bool(false)), ("f5", .bool(true)), ("f6", .null),
        ("40", .bytes([])), ("4401020304", .bytes([1, 2, 3, 4])),
        ("60", .text("")), ("6161", .text("a")), ("6449455446", .text("IETF")), ("62225c", .text("\"\\")),
        ("62c3bc", .text("\u{fc}")), ("63e6b0b4", .text("\u{6c34}")), ("64f0908591", .text("\u{10151}")),
        ("80", .array([])), ("83010203", .array([.int(1), .int(2), .int(3)])),
        ("8301820203820405", .array([.int(1), .array([.int(2), .int(3)]), .array([.int(4), .int(5)])])),
        ("98190102030405060708090a0b0c0d0e0f101112131415161718181819",
         .array((1...25).map { .int($0) })),
        ("a0", .map(CBORMap([(CBOR, CBOR)]()))),
        ("a201020304", .map(CBORMap([(.int(1), .int(2)), (.int(3), .int(4))]))),
        ("a26161016162820203", .map(CBORMap([(.text("a"), .int(1)), (.text("b"), .array([.int(2), .int(3)]))]))),
        ("826161a161626163", .array([.text("a"), .map(CBORMap([(.text("b"), .text("c"))]))])),
        ("a56161614161626142616361436164614461656145",
         .map(CBORMap(["a", "b", "c", "d", "e"].map { (CBOR.text($0), CBOR.text($0.uppercased())) }))),
    ]

    @Test func rfc8949ExamplesDecodeAndEncodeBack() throws {
        for (h, expected) in Self.examples {
            let item = try CBORDecoder.decode(hex(h))
            #expect(item == expected, "\(h)")
            #expect(Crypto.hex(item.encoded) == h, "\(h) encodes back")
        }
        #expect(CBOR.negative(.max).intValue == nil)
        #expect(CBOR.int(-257).intValue == -257)
        #expect(CBOR.int(Int.min).intValue == Int.min)
    }

    /// Appendix A's examples outside the subset, and the other refusals, each at its offset.
    @Test(arguments: [
        ("f90000", CBORError(.floatNotAllowed, at: 0)),                     // 0.0, half precision
        ("fb3ff199999999999a", CBORError(.floatNotAllowed, at: 0)),         // 1.1
        ("f7", CBORError(.simpleValueNotAllowed(23), at: 0)),               // undefined
        ("f0", CBORError(.simpleValueNotAllowed(16), at: 0)),
        ("f8ff", CBORError(.simpleValueNotAllowed(255), at: 0)),
        ("c074323031332d30332d32315432303a30343a30305a", CBORError(.tagNotAllowed(0), at: 0)),
        ("d818456449455446", CBORError(.tagNotAllowed(24), at: 0)),          // encoded CBOR data item
        ("8201c11a514b67b0", CBORError(.tagNotAllowed(1), at: 2)),
        ("5f42010243030405ff", CBORError(.indefiniteLength, at: 0)),
        ("9fff", CBORError(.indefiniteLength, at: 0)),
        ("bf6346756ef563416d7421ff", CBORError(.indefiniteLength, at: 0)),
        ("7f657374726561646d696e67ff", CBORError(.indefiniteLength, at: 0)),
        ("ff", CBORError(.unexpectedBreak, at: 0)),
        ("1f", CBORError(.reservedAdditionalInfo(31), at: 0)),
        ("1c", CBORError(.reservedAdditionalInfo(28), at: 0)),
        ("5e", CBORError(.reservedAdditionalInfo(30), at: 0)),
        ("1817", CBORError(.nonMinimalEncoding, at: 0)),                     // 23 in two bytes
        ("190017", CBORError(.nonMinimalEncoding, at: 0)),
        ("1a0000ffff", CBORError(.nonMinimalEncoding, at: 0)),
        ("1b00000000ffffffff", CBORError(.nonMinimalEncoding, at: 0)),
        ("820158010a", CBORError(.nonMinimalEncoding, at: 2)),               // a 1-byte string's length in 2 bytes
        ("3817", CBORError(.nonMinimalEncoding, at: 0)),
        ("1901", CBORError(.truncated(needed: 1), at: 0)),
        ("430102", CBORError(.truncated(needed: 1), at: 0)),
        ("8201", CBORError(.truncated(needed: 1), at: 0)),
        ("a201020304", nil),
        ("a2010203", CBORError(.truncated(needed: 1), at: 0)),
        ("", CBORError(.truncated(needed: 1), at: 0)),
        ("5bffffffffffffffff00", CBORError(.truncated(needed: Int.max), at: 0)),
        ("9bffffffffffffffff00", CBORError(.truncated(needed: Int.max), at: 0)),
        ("bbffffffffffffffff00", CBORError(.truncated(needed: Int.max), at: 0)),
        ("bb7fffffffffffffff00", CBORError(.truncated(needed: Int.max), at: 0)),
        ("62c328", CBORError(.invalidUTF8, at: 0)),                           // bad continuation
        ("63eda080", CBORError(.invalidUTF8, at: 0)),                         // a UTF-16 surrogate
        ("62c080", CBORError(.invalidUTF8, at: 0)),                           // overlong NUL
        ("8261616180", CBORError(.invalidUTF8, at: 3)),
        ("a2010201 03", CBORError(.duplicateMapKey, at: 3)),
        ("a2616101616102", CBORError(.duplicateMapKey, at: 4)),
        ("a2820102f6820102f6", CBORError(.duplicateMapKey, at: 5)),           // equal array keys
        ("0100", CBORError(.trailingBytes(count: 1), at: 1)),
        ("a0a0a0", CBORError(.trailingBytes(count: 2), at: 1)),
    ] as [(String, CBORError?)])
    func refusesWithTheProblemAndItsOffset(_ h: String, _ expected: CBORError?) {
        #expect(refusal(h.replacingOccurrences(of: " ", with: "")) == expected, "\(h)")
    }

    @Test func equalTextComparesAsBytesNotByCanonicalEquivalence() throws {
        // {"é" (U+00E9): 1, "é" (e + U+0301): 2}: two keys for CBOR, one String for Swift's ==.
        let item = try CBORDecoder.decode(hex("a262c3a9016365cc8102"))
        #expect(item.mapValue?.count == 2)
        #expect(item.mapValue?[text: "\u{e9}"] == .int(1))
        #expect(Crypto.hex(item.encoded) == "a262c3a9016365cc8102")
    }

    @Test func nestingIsBoundedAtSixteenLevels() throws {
        // Sixteen arrays, the innermost empty: depth 16.
        let sixteen = [UInt8](repeating: 0x81, count: 15) + [0x80]
        #expect(try CBORDecoder.decode(sixteen).encoded == sixteen)
        // Seventeen: the innermost array, at offset 16, is one level too deep.
        #expect(throws: CBORError(.tooDeep(limit: 16), at: 16)) { try CBORDecoder.decode([0x81] + sixteen) }
        // A scalar counts as a level too.
        #expect(throws: CBORError(.tooDeep(limit: 16), at: 16)) {
            try CBORDecoder.decode([UInt8](repeating: 0x81, count: 16) + [0x01])
        }
        // Deep input far past the limit fails at the limit, without recursing further.
        #expect(throws: CBORError(.tooDeep(limit: 4), at: 4)) {
            try CBORDecoder.decode([UInt8](repeating: 0x81, count: 100_000) + [0x01], limits: .init(maxDepth: 4))
        }
    }

    @Test func sizeIsBounded() throws {
        let five = hex("450102030405")
        #expect(try CBORDecoder.decode(five, limits: .init(maxSize: 6)) == .bytes([1, 2, 3, 4, 5]))
        #expect(throws: CBORError(.tooLarge(limit: 5), at: 0)) { try CBORDecoder.decode(five, limits: .init(maxSize: 5)) }
        // The limit is per item: decodePrefix after other bytes counts from the item's start.
        #expect(try CBORDecoder.decodePrefix([0xff, 0xff] + five, at: 2, limits: .init(maxSize: 6)).end == 8)
        // 64 KiB by default.
        let big = [0x5a, 0x00, 0x01, 0x00, 0x00] + [UInt8](repeating: 7, count: 65_536)
        #expect(throws: CBORError(.tooLarge(limit: 65_536), at: 0)) { try CBORDecoder.decode(big) }
    }

    @Test func decodePrefixSaysWhereTheItemEndedAndCountsOffsetsFromTheBufferStart() throws {
        let bytes = hex("ff8201024401020304aa")
        let (item, end) = try CBORDecoder.decodePrefix(bytes, at: 1)
        #expect(item == .array([.int(1), .int(2)]))
        #expect(end == 4)
        #expect(try CBORDecoder.decodePrefix(bytes, at: end).end == 9)
        #expect(throws: CBORError(.truncated(needed: 1), at: 1)) { try CBORDecoder.decodePrefix(hex("ff1900"), at: 1) }
        #expect(throws: CBORError(.duplicateMapKey, at: 5)) { try CBORDecoder.decodePrefix(hex("0000a201020103"), at: 2) }
        #expect(throws: CBORError(.truncated(needed: 1), at: 3)) { try CBORDecoder.decodePrefix(hex("000000"), at: 3) }
    }

    @Test func errorsNameTheProblemAndTheByte() {
        #expect(refusal("a2616101616102")?.description == "CBOR: duplicate map key at byte 4")
        #expect(refusal("8201c11a514b67b0")?.description == "CBOR: tag 1 (no tag is accepted) at byte 2")
        #expect(refusal("430102")?.description == "CBOR: input ends inside an item (1 more byte needed) at byte 0")
    }
}
