import EventHTTP
import TxGateCore

/// One worker's request metrics for one configuration: `txgate_requests_total` by policy,
/// method and status class (labelled with this configuration's policy names, so that a reload
/// that adds, removes or reorders policies counts each under its own name), and the worker's
/// share of the other per-request families (`WorkerStats`). Confined to the worker's loop; a
/// request costs an index and two plain stores, and touches nothing another worker writes.
final class RequestMetrics {
    let metrics: GatewayMetrics
    let stats: WorkerStats
    let counts: RequestCounts

    init(_ metrics: GatewayMetrics, worker: Int, policyNames: [String]) {
        self.metrics = metrics
        stats = metrics.workers[worker]
        counts = RequestCounts(policyNames: policyNames)
        metrics.register(counts)
    }

    /// The pipeline is gone (a reload replaced it and its last request ended): its counts stay
    /// in the totals.
    deinit { metrics.retire(counts) }

    /// The request is over: count it (called once, from `Pipeline.log`).
    func finished(_ r: RequestSummary) {
        let statusClass = min(4, max(0, r.status / 100 - 1))
        counts.count(policy: r.policyIndex, method: Self.methodIndex(r.method), statusClass: statusClass)
        // Every decision a request got (from the cache or the PDP), by what it said.
        if let d = r.decisionCount { stats.decided(d) }
        if let u = r.upstreamNanos { stats.upstreamResponded(nanos: u) }
    }

    static func methodIndex(_ m: String) -> Int {
        switch m {
        case "GET": return 0
        case "HEAD": return 1
        case "POST": return 2
        case "PUT": return 3
        case "DELETE": return 4
        case "PATCH": return 5
        case "OPTIONS": return 6
        default: return 7
        }
    }
}

/// `txgate_requests_total` for one configuration's policies, on one worker.
final class RequestCounts: Sendable {
    static let methods = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "other"]
    static let statusClasses = ["1xx", "2xx", "3xx", "4xx", "5xx"]

    /// The configuration's policy names, then "none" (no policy applied).
    let policyNames: [String]
    private let slots: CounterSlots

    init(policyNames: [String]) {
        self.policyNames = policyNames + ["none"]
        slots = CounterSlots(count: self.policyNames.count * Self.methods.count * Self.statusClasses.count)
    }

    /// `policy`: the index of the policy that applied in the configuration's list (nil: none).
    func count(policy: Int?, method: Int, statusClass: Int) {
        let p = policy.map { min($0, policyNames.count - 1) } ?? policyNames.count - 1
        slots.add((p * Self.methods.count + method) * Self.statusClasses.count + statusClass)
    }

    /// Each series counted at least once: its labels in the text format, and its count.
    func forEachSeries(_ body: (String, UInt64) -> Void) {
        for (p, policy) in policyNames.enumerated() {
            var prefix: [UInt8] = Array(#"policy=""#.utf8)
            prefix.labelValue(policy)
            for (m, method) in Self.methods.enumerated() {
                for (c, status) in Self.statusClasses.enumerated() {
                    let n = slots.value((p * Self.methods.count + m) * Self.statusClasses.count + c)
                    if n > 0 { body(String(decoding: prefix, as: UTF8.self) + #"",method="\#(method)",status="\#(status)""#, n) }
                }
            }
        }
    }
}
