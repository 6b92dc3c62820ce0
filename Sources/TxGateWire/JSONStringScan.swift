/// Where a JSON string's plain run ends, eight bytes at a time.
///
/// Writing a string into JSON and reading one back both walk its bytes looking for the few
/// that matter: `"`, `\` and control characters (and, when reading, whether any byte is not
/// ASCII, which decides whether the run must be checked as UTF-8). Records, journey states and
/// log lines are mostly long runs of plain ASCII (digests, TxIds, session keys), so the scan
/// tests a whole 64-bit word per step with the classic bit tricks ("SWAR") and looks at single
/// bytes only in the word that holds one that matters.
enum JSONStringScan {
    private static let ones: UInt64 = 0x0101_0101_0101_0101
    private static let highs: UInt64 = 0x8080_8080_8080_8080

    /// Whether any byte of `w` is zero (exact: any false positives lie above a true one).
    @inline(__always)
    private static func hasZeroByte(_ w: UInt64) -> Bool { (w &- ones) & ~w & highs != 0 }

    /// Whether any byte of `w` is `"`, `\` or below 0x20.
    @inline(__always)
    static func hasSpecial(_ w: UInt64) -> Bool {
        // A byte below 0x20: (w - 0x20 per byte) & ~w keeps the high bit of exactly such
        // bytes (existence is exact for a bound up to 0x80).
        (w &- ones &* 0x20) & ~w & highs != 0 || hasZeroByte(w ^ (ones &* 0x22)) || hasZeroByte(w ^ (ones &* 0x5C))
    }

    @inline(__always)
    static func isSpecial(_ b: UInt8) -> Bool { b < 0x20 || b == 0x22 || b == 0x5C }

    /// Whether no byte of `bytes` is `"`, `\` or a control character. Whole words only, for a
    /// string of four bytes or more: the last word overlaps the one before it (four-byte halves
    /// for a string shorter than a word), so a short field (an address, a method, a request id)
    /// is one or two word tests rather than a byte loop.
    @inline(__always)
    static func isPlain(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        let raw = UnsafeRawPointer(base)
        let n = bytes.count
        if n >= 8 {
            var i = 0
            while i + 8 < n {
                if hasSpecial(raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)) { return false }
                i += 8
            }
            return !hasSpecial(raw.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self))
        }
        if n >= 4 {
            let first = UInt64(raw.loadUnaligned(as: UInt32.self))
            let last = UInt64(raw.loadUnaligned(fromByteOffset: n - 4, as: UInt32.self))
            return !hasSpecial(first | last << 32)
        }
        for b in bytes where isSpecial(b) { return false }
        return true
    }

    /// The index of the first `"`, `\` or control byte in `bytes[from...]` (or `bytes.count`),
    /// and whether a byte of 0x80 or more came before it.
    @inline(__always)
    static func plainRun(_ bytes: UnsafeBufferPointer<UInt8>, from: Int) -> (end: Int, nonASCII: Bool) {
        guard let base = bytes.baseAddress else { return (from, false) }
        let raw = UnsafeRawPointer(base)
        var i = from
        var high: UInt64 = 0
        while i + 8 <= bytes.count {
            let w = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: i, as: UInt64.self))
            if hasSpecial(w) { break }
            high |= w
            i += 8
        }
        var nonASCII = high & highs != 0
        while i < bytes.count {
            let b = base[i]
            if isSpecial(b) { break }
            if b >= 0x80 { nonASCII = true }
            i += 1
        }
        return (i, nonASCII)
    }
}
