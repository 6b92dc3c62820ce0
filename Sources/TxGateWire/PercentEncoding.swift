/// `%XX` decoding, shared by query strings and URLs.
public enum PercentEncoding {
    /// Decodes `%XX` escapes (and `+` as a space when `plusIsSpace`, as in a query string).
    /// Nil if an escape is malformed or the decoded bytes are not UTF-8.
    public static func decode(_ text: Substring, plusIsSpace: Bool) -> String? {
        decode(utf8: text.utf8, plusIsSpace: plusIsSpace)
    }

    /// `decode(_:plusIsSpace:)` over raw bytes: bytes that are not UTF-8 are refused too, never
    /// replaced.
    public static func decode<Bytes: Collection<UInt8>>(utf8 raw: Bytes, plusIsSpace: Bool) -> String? {
        // A string's own bytes, read in place by offset (a composite advice's query is a
        // kilobyte of escapes; indexes into a substring's UTF-8 view cost far more per byte).
        if let decoded = raw.withContiguousStorageIfAvailable({ decodeBytes($0, plusIsSpace: plusIsSpace) }) { return decoded }
        return decodeBytes(raw, plusIsSpace: plusIsSpace)
    }

    private static func decodeBytes<Bytes: Collection<UInt8>>(_ raw: Bytes, plusIsSpace: Bool) -> String? {
        // Decoded into scratch memory (never longer than the input), then validated into the
        // string: one allocation, the string's.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Swift.max(raw.count, 1)) { out -> String? in
            var n = 0
            var i = raw.startIndex
            while i != raw.endIndex {
                let b = raw[i]
                if b == UInt8(ascii: "%") {
                    let h = raw.index(after: i)
                    guard h != raw.endIndex, raw.index(after: h) != raw.endIndex,
                          let hi = hexDigitValue(raw[h]), let lo = hexDigitValue(raw[raw.index(after: h)]) else { return nil }
                    out[n] = hi << 4 | lo
                    n += 1
                    i = raw.index(h, offsetBy: 2)
                    continue
                }
                out[n] = plusIsSpace && b == UInt8(ascii: "+") ? 0x20 : b
                n += 1
                i = raw.index(after: i)
            }
            return String(validating: UnsafeBufferPointer(rebasing: out[..<n]), as: UTF8.self)
        }
    }
}

/// The value of one ASCII hex digit, either case.
package func hexDigitValue(_ b: UInt8) -> UInt8? {
    switch b {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return b - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return b - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): return b - UInt8(ascii: "A") + 10
    default: return nil
    }
}
