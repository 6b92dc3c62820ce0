/// A growable byte buffer of its own, written piece by piece for every request: message heads
/// (`HeadWriter`) and access-log lines (`LogLine`). Each piece is one copy, with none of an
/// Array's per-append bookkeeping (uniqueness and capacity checks through generic code).
/// Noncopyable: it owns its memory.
public struct ByteWriter: ~Copyable {
    // Internal to the module but visible to the inlined code of the methods below: the writers
    // are called from other modules (the access log's lines, the heads EventHTTP writes), where
    // a call per piece cost more than the piece.
    @usableFromInline var base: UnsafeMutablePointer<UInt8>
    @usableFromInline var capacity: Int
    @usableFromInline var used = 0

    @inlinable
    public var count: Int { used }

    @inlinable
    public init(capacity: Int = 512) {
        self.capacity = max(capacity, 64)
        base = .allocate(capacity: self.capacity)
    }

    deinit { base.deallocate() }

    @inlinable
    public var isEmpty: Bool { used == 0 }

    /// A copy of the bytes written.
    public var bytes: [UInt8] { Array(UnsafeBufferPointer(start: base, count: used)) }

    /// The bytes written as a string (UTF-8; one copy, with no array between).
    public var string: String { String(decoding: UnsafeBufferPointer(start: base, count: used), as: UTF8.self) }

    /// Calls `body` with the bytes written (valid only during the call).
    public func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: base, count: used))
    }

    /// Forgets the bytes, keeping the memory.
    @inlinable
    public mutating func removeAll() { used = 0 }

    @inlinable @inline(__always)
    public mutating func append(_ p: UnsafeBufferPointer<UInt8>) {
        guard let src = p.baseAddress, p.count > 0 else { return }
        let n = p.count
        if used + n > capacity { grow(n) }
        Self.copy(src, n, to: base + used)
        used += n
    }

    /// `s` between two pairs of bytes (`,"key":` in a JSON line) with one check for room;
    /// inlined with a literal, its copy is a word or two.
    @inlinable @inline(__always)
    public mutating func append(_ s: StaticString, between open: (UInt8, UInt8), and close: (UInt8, UInt8)) {
        let n = s.utf8CodeUnitCount
        if used + n + 4 > capacity { grow(n + 4) }
        let p = base + used
        p[0] = open.0
        p[1] = open.1
        s.withUTF8Buffer { b in if let src = b.baseAddress { Self.copy(src, n, to: p + 2) } }
        p[n + 2] = close.0
        p[n + 3] = close.1
        used += n + 4
    }

    /// Copies `n` bytes. Header names and values are short: up to 16 bytes as two overlapping
    /// words (no call to memcpy, and nothing read or written outside either range), longer ones
    /// with memcpy.
    @inlinable @inline(__always)
    static func copy(_ src: UnsafePointer<UInt8>, _ n: Int, to dst: UnsafeMutablePointer<UInt8>) {
        let d = UnsafeMutableRawPointer(dst)
        if n >= 8 && n <= 16 {
            let first = UnsafeRawPointer(src).loadUnaligned(as: UInt64.self)
            let last = UnsafeRawPointer(src + n - 8).loadUnaligned(as: UInt64.self)
            d.storeBytes(of: first, as: UInt64.self)
            (d + n - 8).storeBytes(of: last, as: UInt64.self)
        } else if n >= 4 && n < 8 {
            let first = UnsafeRawPointer(src).loadUnaligned(as: UInt32.self)
            let last = UnsafeRawPointer(src + n - 4).loadUnaligned(as: UInt32.self)
            d.storeBytes(of: first, as: UInt32.self)
            (d + n - 4).storeBytes(of: last, as: UInt32.self)
        } else {
            dst.initialize(from: src, count: n)
        }
    }

    @inlinable @inline(__always)
    public mutating func append(_ b: UInt8) {
        if used == capacity { grow(1) }
        base[used] = b
        used += 1
    }

    @inlinable @inline(__always)
    public mutating func append(_ a: UInt8, _ b: UInt8) {
        if used + 2 > capacity { grow(2) }
        base[used] = a
        base[used + 1] = b
        used += 2
    }

    @inlinable @inline(__always)
    public mutating func append(_ s: String) {
        s.withUTF8Bytes { append($0) }
    }

    @inlinable @inline(__always)
    public mutating func append(_ s: StaticString) {
        s.withUTF8Buffer { append($0) }
    }

    /// `n` (not negative) in decimal, zero-padded to at least `width` digits, written in place:
    /// the digits counted by comparison, then written from the last, one division each.
    @inlinable
    public mutating func appendDecimal(_ n: Int, width: Int = 1) {
        precondition(n >= 0, "appendDecimal: negative")
        var digits = 1
        var bound = 10
        while digits < 19 && n >= bound { digits += 1; bound &*= 10 }
        digits = max(digits, width)
        if used + digits > capacity { grow(digits) }
        // Unsigned: a division by 10 is a multiplication and a shift, with no sign to correct.
        var v = UInt(bitPattern: n)
        let start = base + used
        var i = digits
        while i > 0 {
            i &-= 1
            let q = v / 10
            start[i] = UInt8(truncatingIfNeeded: 0x30 &+ (v &- q &* 10))
            v = q
        }
        used += digits
    }

    /// `n` in decimal, with a minus sign when negative.
    @inlinable
    public mutating func appendInteger(_ n: Int) {
        if n >= 0 { appendDecimal(n); return }
        append(UInt8(ascii: "-"))
        // -Int.min does not fit an Int.
        if n == Int.min { append("9223372036854775808" as StaticString) } else { appendDecimal(-n) }
    }

    @usableFromInline
    mutating func grow(_ needed: Int) {
        let newCapacity = max(capacity * 2, used + needed)
        let newBase = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        newBase.initialize(from: base, count: used)
        base.deallocate()
        base = newBase
        capacity = newCapacity
    }
}

extension String {
    /// Calls `body` with the string's UTF-8 bytes, read in place when the string is stored as
    /// UTF-8 (native strings, small or not: always, on Linux). `withUTF8` is mutating, so
    /// calling it on a `let` copied the string first: a retain and a release, atomic, for every
    /// header name and value written or looked up.
    @inlinable
    public func withUTF8Bytes<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        if let r = try utf8.withContiguousStorageIfAvailable(body) { return r }
        var s = self
        return try s.withUTF8(body)
    }
}
