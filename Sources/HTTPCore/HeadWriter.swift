/// Builds a message head as bytes, to hand to the socket layer in one piece (`ByteWriter`).
public struct HeadWriter: ~Copyable {
    @usableFromInline var out: ByteWriter

    @inlinable
    public init(capacity: Int = 512) { out = ByteWriter(capacity: capacity) }

    @inlinable
    public var count: Int { out.count }

    /// A copy of the bytes written.
    public var bytes: [UInt8] { out.bytes }

    /// Calls `body` with the bytes written (valid only during the call).
    public func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { try out.withBytes(body) }

    /// Forgets what was written, keeping the memory (a writer reused for many heads).
    @inlinable
    public mutating func removeAll() { out.removeAll() }

    @inlinable
    public mutating func write(_ s: String) { out.append(s) }

    /// `n` in decimal, its digits written in place.
    @inlinable
    public mutating func write(_ n: Int) {
        out.appendInteger(n)
    }

    @inlinable
    public mutating func writeField(_ name: String, _ value: String) {
        out.append(name)
        out.append(0x3A, 0x20)
        out.append(value)
        out.append(0x0D, 0x0A)
    }

    @inlinable
    public mutating func writeCRLF() { out.append(0x0D, 0x0A) }

    /// Each field as received, from the headers' bytes (a value that was not UTF-8 goes out
    /// as its original bytes).
    public mutating func writeFields(_ headers: HTTPHeaders) {
        headers.forEachRaw { writeField($0) }
    }

    /// One field as its bytes.
    @inlinable
    public mutating func writeField(_ f: HTTPHeaders.RawField) {
        out.append(f.name)
        out.append(0x3A, 0x20)
        out.append(f.value)
        out.append(0x0D, 0x0A)
    }
}
