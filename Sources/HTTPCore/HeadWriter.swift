/// Builds a message head as bytes, to hand to the socket layer in one piece.
public struct HeadWriter {
    public private(set) var bytes: [UInt8] = []

    public init(capacity: Int = 512) { bytes.reserveCapacity(capacity) }

    @inline(__always)
    public mutating func write(_ s: String) {
        if s.utf8.withContiguousStorageIfAvailable({ bytes.append(contentsOf: $0) }) == nil {
            bytes.append(contentsOf: s.utf8)
        }
    }

    public mutating func write(_ n: Int) {
        if n < 10 { bytes.append(UInt8(0x30 + n)); return }
        write(String(n))
    }

    public mutating func writeField(_ name: String, _ value: String) {
        write(name)
        bytes.append(0x3A)
        bytes.append(0x20)
        write(value)
        bytes.append(0x0D)
        bytes.append(0x0A)
    }

    public mutating func writeCRLF() {
        bytes.append(0x0D)
        bytes.append(0x0A)
    }

    public mutating func writeFields(_ headers: HTTPHeaders) {
        for f in headers { writeField(f.name, f.value) }
    }
}
