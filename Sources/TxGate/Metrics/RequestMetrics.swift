import CoreMetrics
import EventHTTP
import TxGateCore

/// One worker's request counters: `txgate_requests_total` by policy, method and status
/// class, plus the upstream's latency. Confined to the worker's loop, so the handle cache
/// needs no lock: each label combination is resolved once, then a request costs an array
/// index and an atomic add (the plain proxy's budget is a few percent of its CPU).
final class RequestMetrics {
    let metrics: GatewayMetrics
    private var counters: [Counter?]
    private let methodCount = GatewayMetrics.methods.count
    private let classCount = GatewayMetrics.statusClasses.count

    init(_ metrics: GatewayMetrics) {
        self.metrics = metrics
        counters = Array(repeating: nil, count: metrics.policyNames.count * methodCount * classCount)
    }

    /// The request is over: count it (called once, from `Pipeline.log`).
    func finished(_ r: RequestSummary) {
        let method = Self.methodIndex(r.method)
        let statusClass = min(4, max(0, r.status / 100 - 1))
        let policy = policyIndex(r)
        let i = (policy * methodCount + method) * classCount + statusClass
        if let c = counters[i] {
            c.increment()
        } else {
            let c = metrics.requestCounter(policy: policy, method: method, statusClass: statusClass)
            counters[i] = c
            c.increment()
        }
        // Every decision a request got (from the cache or the PDP), by what it said.
        if let d = r.decision { metrics.decided(d, method: r.decidedMethod) }
        if let u = r.upstreamNanos { metrics.upstreamLatency.recordNanoseconds(Int64(truncatingIfNeeded: u)) }
    }

    /// The policy that applied (the last index, "none", when none did or there are no policies).
    private func policyIndex(_ r: RequestSummary) -> Int {
        let none = metrics.policyNames.count - 1
        guard none > 0 else { return none }
        return r.policyIndex ?? none
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
