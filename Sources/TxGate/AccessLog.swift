import EventHTTP
import Logging
import TxGateCore

/// One access-log line per request, written when the response ends or the client leaves:
/// the JSON line `JSONLogHandler` writes (`"msg":"access"`, `"log":"access"`, the fields
/// below in sorted order), formatted by hand into the worker's `AccessLogBuffer`.
struct AccessLog {
    let label: String
    let fd: Int32
    /// What follows each line's time: its level, label and message, encoded once.
    private let opening: [UInt8]
    /// The logger's own metadata (`log: access` among it), encoded once: `fixed[i]` holds, in
    /// key order, the fields that sort before request field `i` (the last, after all of them).
    private let fixed: [[UInt8]]
    /// The request fields, in the order they are written.
    static let fields = ["approval", "bytes", "client", "decision", "details", "duration_ms", "method", "original", "path", "peer", "policy",
                         "request_id", "status", "upstream_ms", "user", "user_agent"]

    init(logger: Logger) {
        let handler = logger.handler as? JSONLogHandler
        label = handler?.label ?? logger.label
        fd = handler?.fd ?? 2
        opening = LogLine.opening(level: "info", label: label, message: "access")
        var md = logger.handler.metadata
        md["log"] = "access"
        var fixed = [[UInt8]](repeating: [], count: Self.fields.count + 1)
        for key in md.keys.sorted() where !Self.fields.contains(key) {
            fixed[Self.fields.firstIndex { $0 > key } ?? Self.fields.count] += LogLine.encodedField(key, json: JSONLogHandler.encode(md[key]!))
        }
        self.fixed = fixed
    }

    func format(_ r: RequestSummary, into out: inout LogLine) {
        func fixedBefore(_ slot: Int) {
            if !fixed[slot].isEmpty { out.append(encoded: fixed[slot]) }
        }
        out.begin(opening: opening)
        fixedBefore(0); if let a = r.approval { out.field("approval", a) }
        fixedBefore(1); out.field("bytes", r.bytesSent)
        fixedBefore(2); out.field("client", r.client)
        fixedBefore(3); if let d = r.decision { out.field("decision", d.outcome(for: r.decidedMethod).rawValue) }
        fixedBefore(4); out.field("details", r.details)
        fixedBefore(5); out.field("duration_ms", millisFromNanos: r.durationNanos)
        fixedBefore(6); out.field("method", r.method)
        // On `/-/authz`: the original request the proxy asks about.
        fixedBefore(7); if let o = r.original { out.field("original", o) }
        fixedBefore(8); out.field("path", r.target, before: UInt8(ascii: "?"))
        fixedBefore(9); if let p = r.peer { out.field("peer", p) }
        fixedBefore(10); if let p = r.policyName { out.field("policy", p) }
        fixedBefore(11); out.field("request_id", r.requestId)
        fixedBefore(12); out.field("status", r.status)
        fixedBefore(13); if let u = r.upstreamNanos { out.field("upstream_ms", millisFromNanos: u) }
        fixedBefore(14); if let u = r.user { out.field("user", u) }
        fixedBefore(15); if let ua = r.userAgent { out.field("user_agent", ua) }
        fixedBefore(16)
        out.end()
    }
}

/// One worker's access-log lines, used on its loop only. Lines collect in a buffer that is
/// written out (one write(2)) when it passes `flushBytes`, `flushDelayMs` after the first
/// line it took, and when the worker stops (drain, SIGTERM, forced close): a line waits at
/// most 100 ms, and none is lost on a graceful or forced stop.
final class AccessLogBuffer {
    static let flushBytes = 32 * 1024
    static let flushDelayMs = 100
    private let loop: EventLoop
    private var line = LogLine(capacity: flushBytes + 4096)
    private var fd: Int32 = 2
    private var timer: LoopTimer?
    private var timerArmed = false

    init(loop: EventLoop) { self.loop = loop }

    func append(_ log: AccessLog, _ summary: RequestSummary) {
        if fd != log.fd { flush(); fd = log.fd }
        log.format(summary, into: &line)
        if line.count >= Self.flushBytes {
            flush()
        } else if !timerArmed {
            timerArmed = true
            if timer == nil { timer = LoopTimer(loop: loop) { [unowned self] in timerArmed = false; flush() } }
            timer?.schedule(afterMs: Self.flushDelayMs)
        }
    }

    /// Writes out every line held (a pending timer then finds nothing to write).
    func flush() {
        guard !line.isEmpty else { return }
        line.withBytes { LogOutput.write(fd, $0) }
        line.removeAll()
    }
}
