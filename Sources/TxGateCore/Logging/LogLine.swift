import Glibc
import HTTPCore
import TxGateWire
import Synchronization

/// Builds `JSONLogHandler`'s lines by hand, into a byte buffer (`ByteWriter`): the same JSON
/// (`ts`, `level`, `label`, `msg`, then the metadata keys in sorted order), without swift-log's
/// metadata dictionary, sorting or `String` concatenation. The access log writes one per
/// request. The caller appends the fields in sorted key order.
///
/// The field writers are inlinable: the access log, in another module, calls a dozen a line, and
/// compiled there with the writer's code they cost about 110 instructions a line fewer than calls
/// into this module (callgrind, `bench/callgrind.sh --log`).
public struct LogLine: ~Copyable {
    @usableFromInline var out: ByteWriter
    /// `{"ts":"YYYY-MM-DDTHH:MM:SS.` for `cachedSecond`, reused within a second.
    private var cachedSecond = Int.min
    private var secondText: [UInt8] = []

    public init(capacity: Int = 256) { out = ByteWriter(capacity: capacity) }

    /// A copy of the lines written.
    public var bytes: [UInt8] { out.bytes }
    public var count: Int { out.count }
    public var isEmpty: Bool { out.isEmpty }

    /// Calls `body` with the lines written (valid only during the call).
    public func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { try out.withBytes(body) }

    /// Forgets the lines written, keeping the memory.
    public mutating func removeAll() { out.removeAll() }

    /// What follows a line's time, the same for every line of one logger, level and message
    /// (`Z","level":"...","label":"...","msg":"..."`), escaped once for `begin(opening:)`.
    public static func opening(level: String, label: String, message: String) -> [UInt8] {
        Array(#"Z","level":""#.utf8) + Array(JSONText.escape(level).utf8) + Array(#"","label":""#.utf8)
            + Array(JSONText.escape(label).utf8) + Array(#"","msg":""#.utf8) + Array(JSONText.escape(message).utf8) + [UInt8(ascii: "\"")]
    }

    /// `{"ts":"...","level":"...","label":"...","msg":"..."`: the start of a line, now: its
    /// time, then `opening`.
    public mutating func begin(opening: [UInt8]) {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        begin(opening: opening, seconds: ts.tv_sec, millis: Int(ts.tv_nsec / 1_000_000))
    }

    public mutating func begin(opening: [UInt8], seconds: Int, millis: Int) {
        if seconds != cachedSecond {
            cachedSecond = seconds
            secondText = Self.secondText(seconds)
        }
        secondText.withUnsafeBufferPointer { out.append($0) }
        out.appendDecimal(millis, width: 3)
        opening.withUnsafeBufferPointer { out.append($0) }
    }

    /// `{"ts":"YYYY-MM-DDTHH:MM:SS.` (UTC) of a second since the epoch.
    private static func secondText(_ seconds: Int) -> [UInt8] {
        var t = seconds
        var tmv = tm()
        gmtime_r(&t, &tmv)
        var text = ByteWriter(capacity: 32)
        text.append(#"{"ts":""#)
        text.appendDecimal(Int(tmv.tm_year) + 1900, width: 4); text.append(UInt8(ascii: "-"))
        text.appendDecimal(Int(tmv.tm_mon) + 1, width: 2); text.append(UInt8(ascii: "-"))
        text.appendDecimal(Int(tmv.tm_mday), width: 2); text.append(UInt8(ascii: "T"))
        text.appendDecimal(Int(tmv.tm_hour), width: 2); text.append(UInt8(ascii: ":"))
        text.appendDecimal(Int(tmv.tm_min), width: 2); text.append(UInt8(ascii: ":"))
        text.appendDecimal(Int(tmv.tm_sec), width: 2); text.append(UInt8(ascii: "."))
        return text.bytes
    }

    @inlinable
    public mutating func field(_ key: StaticString, _ value: String) {
        writeKey(key)
        JSONText.write(value, into: &out)
    }

    /// A string field from the part of `value` before its first `separator` byte (all of it if
    /// there is none): a request's path from its target, read in place.
    @inlinable
    public mutating func field(_ key: StaticString, _ value: String, before separator: UInt8) {
        writeKey(key)
        value.withUTF8Bytes { b in
            JSONText.write(bytes: UnsafeBufferPointer(rebasing: b[..<(b.firstIndex(of: separator) ?? b.count)]), into: &out)
        }
    }

    @inlinable
    public mutating func field(_ key: StaticString, _ value: Int) {
        writeKey(key)
        out.appendInteger(value)
    }

    /// Nanoseconds as milliseconds rounded to the microsecond, written as Swift writes that
    /// `Double` (`1.0`, `0.25`, `12.345`), which is what the swift-log handler wrote.
    @inlinable
    public mutating func field(_ key: StaticString, millisFromNanos nanos: UInt64) {
        writeKey(key)
        let micros = Int((nanos + 500) / 1_000)
        out.appendDecimal(micros / 1_000)
        out.append(UInt8(ascii: "."))
        var frac = micros % 1_000
        guard frac != 0 else { out.append(UInt8(ascii: "0")); return }
        var width = 3
        while frac % 10 == 0 { frac /= 10; width -= 1 }
        out.appendDecimal(frac, width: width)
    }

    /// `,"key":value`, `value` already JSON: a field the same in every line, encoded once for
    /// `append(encoded:)`.
    public static func encodedField(_ key: String, json value: String) -> [UInt8] {
        Array(#",""#.utf8) + Array(JSONText.escape(key).utf8) + Array(#"":"#.utf8) + Array(value.utf8)
    }

    /// Bytes encoded once, as `encodedField` gives them.
    @inlinable
    public mutating func append(encoded bytes: [UInt8]) {
        bytes.withUnsafeBufferPointer { out.append($0) }
    }

    @inlinable
    public mutating func end() { out.append(UInt8(ascii: "}"), UInt8(ascii: "\n")) }

    /// `,"key":`
    @inlinable @inline(__always)
    mutating func writeKey(_ key: StaticString) {
        out.append(key, between: (UInt8(ascii: ","), UInt8(ascii: "\"")), and: (UInt8(ascii: "\""), UInt8(ascii: ":")))
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
