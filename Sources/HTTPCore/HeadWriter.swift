/// Builds a message head as bytes, to hand to the socket layer in one piece. The bytes go into
/// one buffer of its own (grown if `capacity` was too small), a copy of each piece with no
/// per-piece bookkeeping: a head is a few dozen pieces, written for every request and response.
public struct HeadWriter: ~Copyable {
    private var base: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    public private(set) var count = 0

    public init(capacity: Int = 512) {
        self.capacity = max(capacity, 64)
        base = .allocate(capacity: self.capacity)
    }

    deinit { base.deallocate() }

    /// A copy of the bytes written.
    public var bytes: [UInt8] { Array(UnsafeBufferPointer(start: base, count: count)) }

    /// Calls `body` with the bytes written (valid only during the call).
    public func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    @inline(__always)
    private mutating func append(_ p: UnsafeBufferPointer<UInt8>) {
        guard let src = p.baseAddress, p.count > 0 else { return }
        if count + p.count > capacity { grow(p.count) }
        (base + count).update(from: src, count: p.count)
        count += p.count
    }

    @inline(__always)
    private mutating func append(_ a: UInt8, _ b: UInt8) {
        if count + 2 > capacity { grow(2) }
        base[count] = a
        base[count + 1] = b
        count += 2
    }

    private mutating func grow(_ needed: Int) {
        let newCapacity = max(capacity * 2, count + needed)
        let newBase = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        newBase.update(from: base, count: count)
        base.deallocate()
        base = newBase
        capacity = newCapacity
    }

    @inline(__always)
    public mutating func write(_ s: String) {
        var s = s
        s.withUTF8 { append($0) }
    }

    /// `n` in decimal, its digits written in place.
    public mutating func write(_ n: Int) {
        if n < 0 { write(String(n)); return }
        var digits = 1
        var rest = n / 10
        while rest > 0 { digits += 1; rest /= 10 }
        if count + digits > capacity { grow(digits) }
        var v = n
        for i in stride(from: count + digits - 1, through: count, by: -1) {
            base[i] = UInt8(0x30 + v % 10)
            v /= 10
        }
        count += digits
    }

    public mutating func writeField(_ name: String, _ value: String) {
        write(name)
        append(0x3A, 0x20)
        write(value)
        append(0x0D, 0x0A)
    }

    public mutating func writeCRLF() { append(0x0D, 0x0A) }

    public mutating func writeFields(_ headers: HTTPHeaders) {
        for f in headers.fields { writeField(f.name, f.value) }
    }
}
