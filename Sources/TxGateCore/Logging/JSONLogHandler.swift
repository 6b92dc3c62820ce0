import Foundation
import Logging

/// Writes one JSON object per line to stderr: `{"ts":"...","level":"info","label":"txgate","msg":"...",<metadata>}`.
/// Each line is one write(2) under `LogOutput`'s lock, so lines from different worker threads
/// never interleave (the access log's buffers go through the same lock).
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    public let label: String
    public let fd: Int32

    public init(label: String, fd: Int32 = 2) {
        self.label = label
        self.fd = fd
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var extra = event.metadata ?? [:]
        if let error = event.error { extra["error"] = .string("\(error)") }
        emit(level: event.level, message: event.message, metadata: extra.isEmpty ? nil : extra)
    }

    private func emit(level: Logger.Level, message: Logger.Message, metadata explicit: Logger.Metadata?) {
        var s = "{\"ts\":\"\(Self.timestamp())\",\"level\":\"\(level.rawValue)\",\"label\":\"\(label)\",\"msg\":\"\(JSONText.escape(message.description))\""
        let merged = explicit.map { metadata.merging($0) { _, new in new } } ?? metadata
        for key in merged.keys.sorted() {
            s += ",\"\(JSONText.escape(key))\":" + Self.encode(merged[key]!)
        }
        s += "}\n"
        s.withUTF8 { LogOutput.write(fd, UnsafeRawBufferPointer($0)) }
    }

    public static func encode(_ v: Logger.Metadata.Value) -> String {
        switch v {
        case .string(let s):
            return "\"\(JSONText.escape(s))\""
        case .stringConvertible(let c):
            // Numbers and booleans stay JSON numbers and booleans.
            switch c {
            case let d as Double where d.isFinite: return c.description
            case is Int, is Int64, is UInt64, is Int32, is Bool: return c.description
            default: return encode(.string(c.description))
            }
        case .array(let a): return "[" + a.map(encode).joined(separator: ",") + "]"
        case .dictionary(let d):
            return "{" + d.keys.sorted().map { "\"\(JSONText.escape($0))\":" + encode(d[$0]!) }.joined(separator: ",") + "}"
        }
    }

    /// RFC 3339 UTC with milliseconds, without Foundation's formatter cost.
    static func timestamp() -> String {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        var t = ts.tv_sec
        var tmv = tm()
        gmtime_r(&t, &tmv)
        func p(_ v: Int32, _ w: Int = 2) -> String { String(v).leftPadded(to: w) }
        return "\(p(tmv.tm_year + 1900, 4))-\(p(tmv.tm_mon + 1))-\(p(tmv.tm_mday))T\(p(tmv.tm_hour)):\(p(tmv.tm_min)):\(p(tmv.tm_sec)).\(p(Int32(ts.tv_nsec / 1_000_000), 3))Z"
    }
}
