import Synchronization
import Prometheus
import TxGateCore

/// Counters that one thread writes and any thread may read: each slot is an atomic read and
/// written with relaxed ordering, and its one writer adds with a plain load and store (no
/// locked instruction, no cache line shared with another writer). A scrape on another worker
/// reads whole values, at most a few requests behind. Written here rather than with
/// swift-prometheus' handles because those are shared by every worker: each request paid a
/// contended atomic add, a retain and release of the same handle from every core, and the
/// histogram a mutex (Envoy keeps its hot counters per thread for the same reason).
final class CounterSlots: @unchecked Sendable {
    private let slots: UnsafeMutablePointer<Atomic<UInt64>>
    let count: Int

    init(count: Int) {
        self.count = count
        slots = .allocate(capacity: max(1, count))
        for i in 0..<count { (slots + i).initialize(to: Atomic(0)) }
    }

    deinit {
        slots.deinitialize(count: count)
        slots.deallocate()
    }

    /// Only the owning thread calls this.
    @inline(__always)
    func add(_ i: Int, _ n: UInt64 = 1) {
        precondition(i >= 0 && i < count)
        let p = slots + i
        p.pointee.store(p.pointee.load(ordering: .relaxed) &+ n, ordering: .relaxed)
    }

    func value(_ i: Int) -> UInt64 {
        precondition(i >= 0 && i < count)
        return (slots + i).pointee.load(ordering: .relaxed)
    }
}

/// One worker's share of the families every request touches, whatever the configuration:
/// `txgate_upstream_requests_total`, `txgate_upstream_response_duration_seconds`,
/// `txgate_decisions_total` and `txgate_client_connections`, and the store's operations
/// (`txgate_store_operation_duration_seconds`, `txgate_store_operation_failures_total`: a
/// step-up cycle makes a dozen). `GatewayMetrics` sums the workers' shares when scraped.
/// (`txgate_requests_total`, whose `policy` labels follow the configuration, is counted per
/// pipeline: `RequestMetrics`.)
final class WorkerStats: Sendable {
    /// The key under which a worker's loop holds its `WorkerStats` (`EventLoop.setLocal`), where
    /// `MeasuredStore` finds it when an operation is answered on that loop.
    static let loopKey = ObjectIdentifier(WorkerStats.self)

    /// The upstream latency's buckets (`GatewayMetrics.latencyBuckets`), and their bounds in
    /// nanoseconds.
    private let buckets: [Duration]
    private let bounds: [UInt64]
    private let slots: CounterSlots

    // Layout: reused, new, the latency buckets (each bound, then +Inf; not cumulative), the
    // latency sum in nanoseconds, the decisions (`decisionLabels`), the open connections; then,
    // for each store operation (by `StoreOperation.rawValue`), its buckets, its sum in
    // nanoseconds and its failures.
    private static let reused = 0, new = 1, latency = 2
    private var latencySum: Int { Self.latency + bounds.count + 1 }
    private var decisions: Int { latencySum + 1 }
    private var connections: Int { decisions + Self.decisionLabels.count }
    /// The first slot of `op`'s share.
    private func store(_ op: StoreOperation) -> Int { connections + 1 + op.rawValue * (bounds.count + 3) }

    /// `txgate_decisions_total`'s series: allow, deny, then a challenge by its advice type.
    static let decisionLabels: [(outcome: String, advice: String)] = [("allow", "none"), ("deny", "none")]
        + challengeAdvices.map { ("challenge", $0) }
    /// A challenge whose advice is not in the list counts as "other".
    static let challengeAdvices = [Advices.transaction, Advices.authenticateToService, Advices.authLevel,
                                   Advices.authenticateToRealm, Advices.authScheme, "other"]

    init(latencyBuckets: [Duration]) {
        buckets = latencyBuckets
        bounds = latencyBuckets.map { UInt64($0.components.seconds) * 1_000_000_000 + UInt64($0.components.attoseconds / 1_000_000_000) }
        slots = CounterSlots(count: Self.latency + latencyBuckets.count + 2 + Self.decisionLabels.count + 1
                                 + StoreOperation.allCases.count * (latencyBuckets.count + 3))
    }

    /// A latency's bucket: the first bound it does not exceed, or +Inf (`bounds.count`).
    private func bucket(_ nanos: UInt64) -> Int {
        var i = 0
        while i < bounds.count && nanos > bounds[i] { i += 1 }
        return i
    }

    // MARK: Written by the worker's loop only

    func dispatched(reused: Bool) { slots.add(reused ? Self.reused : Self.new) }

    /// From sending the request upstream to its response head.
    func upstreamResponded(nanos: UInt64) {
        slots.add(Self.latency + bucket(nanos))
        slots.add(latencySum, nanos)
    }

    /// A store operation answered on this worker's loop: from its call to its answer.
    func storeOperation(_ op: StoreOperation, nanos: UInt64, failed: Bool) {
        let base = store(op)
        slots.add(base + bucket(nanos))
        slots.add(base + bounds.count + 1, nanos)
        if failed { slots.add(base + bounds.count + 2) }
    }

    /// A decision as the metrics count it: the name of its first advice (a challenge), else
    /// whether it allowed the method.
    struct DecisionCount {
        let advice: String?
        let allowed: Bool

        init(_ d: Decision, method: String) {
            if let first = d.advices.entries.first {
                (advice, allowed) = (first.name, false)
            } else {
                (advice, allowed) = (nil, d.allows(method))
            }
        }
    }

    func decided(_ count: DecisionCount) {
        if let advice = count.advice {
            let i = Self.challengeAdvices.firstIndex(of: advice) ?? Self.challengeAdvices.count - 1
            slots.add(decisions + 2 + i)
        } else {
            slots.add(decisions + (count.allowed ? 0 : 1))
        }
    }

    /// Client connections opened (+1) or closed (-1) on this worker.
    func connectionsChanged(by change: Int) {
        slots.add(connections, UInt64(bitPattern: Int64(change)))
    }

    // MARK: Read by a scrape, on any thread

    /// The workers' shares summed, in the Prometheus text format.
    static func emit(_ all: [WorkerStats], into out: inout [UInt8]) {
        guard let first = all.first else { return }
        func sum(_ i: Int) -> UInt64 { all.reduce(0) { $0 &+ $1.slots.value(i) } }

        out.typeLine("txgate_upstream_requests_total", "counter")
        out.sample("txgate_upstream_requests_total", labels: #"connection="new""#, sum(new))
        out.sample("txgate_upstream_requests_total", labels: #"connection="reused""#, sum(reused))

        // A histogram's series from its slots from `base` on: the buckets, then the sum.
        func histogram(_ name: String, labels: String, base: Int) {
            let prefix = labels.isEmpty ? "" : labels + ","
            var cumulative: UInt64 = 0
            for (i, bound) in first.buckets.enumerated() {
                cumulative &+= sum(base + i)
                out.sample(name + "_bucket", labels: prefix + #"le=""# + bound.bucketRepresentation + #"""#, cumulative)
            }
            cumulative &+= sum(base + first.buckets.count)
            out.sample(name + "_bucket", labels: prefix + #"le="+Inf""#, cumulative)
            let nanos = Int64(truncatingIfNeeded: sum(base + first.buckets.count + 1))
            out.sample(name + "_sum", labels: labels, Duration.nanoseconds(nanos).bucketRepresentation)
            out.sample(name + "_count", labels: labels, cumulative)
        }

        out.typeLine("txgate_upstream_response_duration_seconds", "histogram")
        histogram("txgate_upstream_response_duration_seconds", labels: "", base: latency)

        out.typeLine("txgate_decisions_total", "counter")
        for (i, l) in decisionLabels.enumerated() {
            out.sample("txgate_decisions_total", labels: #"outcome="\#(l.outcome)",advice="\#(l.advice)""#, sum(first.decisions + i))
        }

        out.typeLine("txgate_client_connections", "gauge")
        out.sample("txgate_client_connections", Double(Int64(bitPattern: sum(first.connections))).description)

        out.typeLine("txgate_store_operation_duration_seconds", "histogram")
        for op in StoreOperation.allCases {
            histogram("txgate_store_operation_duration_seconds", labels: #"operation=""# + op.label + #"""#, base: first.store(op))
        }
        out.typeLine("txgate_store_operation_failures_total", "counter")
        for op in StoreOperation.allCases {
            out.sample("txgate_store_operation_failures_total", labels: #"operation=""# + op.label + #"""#,
                       sum(first.store(op) + first.bounds.count + 2))
        }
    }
}

extension [UInt8] {
    mutating func typeLine(_ name: String, _ type: String) {
        append(contentsOf: "# TYPE \(name) \(type)\n".utf8)
    }

    mutating func sample(_ name: String, labels: String = "", _ value: UInt64) {
        sample(name, labels: labels, value.description)
    }

    mutating func sample(_ name: String, labels: String = "", _ value: String) {
        append(contentsOf: name.utf8)
        if !labels.isEmpty {
            append(UInt8(ascii: "{"))
            append(contentsOf: labels.utf8)
            append(UInt8(ascii: "}"))
        }
        append(UInt8(ascii: " "))
        append(contentsOf: value.utf8)
        append(UInt8(ascii: "\n"))
    }

    /// A label value in the text format: backslash, double quote and line feed escaped.
    mutating func labelValue(_ s: String) {
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "\\"): append(contentsOf: #"\\"#.utf8)
            case UInt8(ascii: "\""): append(contentsOf: #"\""#.utf8)
            case UInt8(ascii: "\n"): append(contentsOf: #"\n"#.utf8)
            default: append(b)
            }
        }
    }
}
