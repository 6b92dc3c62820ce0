import Glibc
import Synchronization

/// Builds `JSONLogHandler`'s lines by hand, into a byte buffer: the same JSON (`ts`, `level`,
/// `label`, `msg`, then the metadata keys in sorted order), without swift-log's metadata
/// dictionary, sorting or `String` concatenation. The access log writes one per request.
/// The caller appends the fields in sorted key order.
public struct LogLine {
    public var bytes: [UInt8] = []
    /// The formatted `YYYY-MM-DDTHH:MM:SS` of `cachedSecond`, reused within a second.
    private var cachedSecond = -1
    private var secondText: [UInt8] = []

    public init(capacity: Int = 0) { bytes.reserveCapacity(capacity) }

    /// `{"ts":"...","level":"...","label":"...","msg":"..."`: the start of a line, now.
    public mutating func begin(level: String, label: String, message: String) {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        begin(level: level, label: label, message: message, seconds: ts.tv_sec, millis: Int(ts.tv_nsec / 1_000_000))
    }

    public mutating func begin(level: String, label: String, message: String, seconds: Int, millis: Int) {
        if seconds != cachedSecond {
            cachedSecond = seconds
            var t = seconds
            var tmv = tm()
            gmtime_r(&t, &tmv)
            secondText.removeAll(keepingCapacity: true)
            Self.digits(&secondText, Int(tmv.tm_year) + 1900, 4); secondText.append(UInt8(ascii: "-"))
            Self.digits(&secondText, Int(tmv.tm_mon) + 1, 2); secondText.append(UInt8(ascii: "-"))
            Self.digits(&secondText, Int(tmv.tm_mday), 2); secondText.append(UInt8(ascii: "T"))
            Self.digits(&secondText, Int(tmv.tm_hour), 2); secondText.append(UInt8(ascii: ":"))
            Self.digits(&secondText, Int(tmv.tm_min), 2); secondText.append(UInt8(ascii: ":"))
            Self.digits(&secondText, Int(tmv.tm_sec), 2)
        }
        raw(#"{"ts":""#)
        bytes.append(contentsOf: secondText)
        bytes.append(UInt8(ascii: "."))
        Self.digits(&bytes, millis, 3)
        raw(#"Z","level":""#)
        escaped(level)
        raw(#"","label":""#)
        escaped(label)
        raw(#"","msg":""#)
        escaped(message)
        bytes.append(UInt8(ascii: "\""))
    }

    public mutating func field(_ key: StaticString, _ value: String) {
        writeKey(key)
        bytes.append(UInt8(ascii: "\""))
        escaped(value)
        bytes.append(UInt8(ascii: "\""))
    }

    public mutating func field(_ key: StaticString, _ value: Int) {
        writeKey(key)
        Self.integer(&bytes, value)
    }

    /// Nanoseconds as milliseconds rounded to the microsecond, written as Swift writes that
    /// `Double` (`1.0`, `0.25`, `12.345`), which is what the swift-log handler wrote.
    public mutating func field(_ key: StaticString, millisFromNanos nanos: UInt64) {
        writeKey(key)
        let micros = Int((nanos + 500) / 1_000)
        Self.integer(&bytes, micros / 1_000)
        bytes.append(UInt8(ascii: "."))
        var frac = micros % 1_000
        guard frac != 0 else { bytes.append(UInt8(ascii: "0")); return }
        var width = 3
        while frac % 10 == 0 { frac /= 10; width -= 1 }
        Self.digits(&bytes, frac, width)
    }

    /// A field already encoded as JSON (`value` is written as given).
    public mutating func field(_ key: String, json value: String) {
        bytes.append(UInt8(ascii: ","))
        bytes.append(UInt8(ascii: "\""))
        escaped(key)
        raw(#"":"#)
        raw(value)
    }

    public mutating func end() { raw("}\n") }

    private mutating func writeKey(_ key: StaticString) {
        bytes.append(UInt8(ascii: ","))
        bytes.append(UInt8(ascii: "\""))
        key.withUTF8Buffer { bytes.append(contentsOf: $0) }
        raw(#"":"#)
    }

    private mutating func raw(_ s: String) {
        var s = s
        s.withUTF8 { bytes.append(contentsOf: $0) }
    }

    /// JSON string escaping, as `JSONText.escape`: `"`, `\`, and the control characters.
    private mutating func escaped(_ s: String) {
        var s = s
        s.withUTF8 { src in
            var start = 0
            for (i, b) in src.enumerated() where b < 0x20 || b == 0x22 || b == 0x5C {
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: src[start..<i]))
                start = i + 1
                switch b {
                case 0x22: raw(#"\""#)
                case 0x5C: raw(#"\\"#)
                case 0x0A: raw(#"\n"#)
                case 0x0D: raw(#"\r"#)
                case 0x09: raw(#"\t"#)
                default:
                    raw(#"\u00"#)
                    bytes.append(Self.hex[Int(b >> 4)])
                    bytes.append(Self.hex[Int(b & 0xF)])
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: src[start...]))
        }
    }

    private static let hex = Array("0123456789abcdef".utf8)

    static func integer(_ out: inout [UInt8], _ v: Int) {
        if v < 0 { out.append(UInt8(ascii: "-")) }
        let m = v.magnitude
        var width = 1
        var p: UInt = 10
        while width < 20 && m >= p { width += 1; p = p.multipliedReportingOverflow(by: 10).partialValue }
        digits(&out, Int(m), width)
    }

    /// `v` (non-negative) in exactly `width` decimal digits, zero-padded.
    static func digits(_ out: inout [UInt8], _ v: Int, _ width: Int) {
        var v = v
        let start = out.count
        for _ in 0..<width { out.append(UInt8(ascii: "0")) }
        var i = out.count - 1
        while i >= start && v > 0 {
            out[i] = UInt8(ascii: "0") + UInt8(v % 10)
            v /= 10
            i -= 1
        }
    }
}

/// Every log write to a file descriptor goes through here: a line, or a buffer of whole lines,
/// is written in full under one process-wide lock, so that lines from different threads never
/// interleave, even when a buffer is larger than what a pipe writes atomically.
public enum LogOutput {
    private static let lock = Mutex(())

    public static func write(_ fd: Int32, _ buf: UnsafeRawBufferPointer) {
        guard let base = buf.baseAddress, buf.count > 0 else { return }
        lock.withLock { _ in
            var off = 0
            while off < buf.count {
                let n = Glibc.write(fd, base + off, buf.count - off)
                if n <= 0 { if errno == EINTR { continue } else { break } }
                off += n
            }
        }
    }
}
