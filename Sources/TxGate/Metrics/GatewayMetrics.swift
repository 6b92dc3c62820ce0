import CoreMetrics
import EventHTTP
import Synchronization
import class Prometheus.PrometheusCollectorRegistry
import struct Prometheus.PrometheusMetricsFactory
import TxGateCore

/// The gateway's metrics: swift-metrics handles over one Prometheus registry, served at
/// `/-/metrics`. Every handle whose labels are known at start-up is made here, once; label
/// values come only from fixed sets or from the configuration (policy and journey names),
/// never from a request (no users, tokens or TxIds), so the series stay bounded.
///
/// The families every request touches are kept per worker and summed when scraped
/// (`WorkerStats`, `RequestCounts`); the rest are swift-metrics handles over the registry.
// @unchecked Sendable: every stored property is immutable or a mutex; swift-metrics' handles
// over the Prometheus backend are thread-safe (atomics and locks inside), and `WorkerStats` is
// read through atomics.
final class GatewayMetrics: @unchecked Sendable {
    let registry: PrometheusCollectorRegistry
    let allowFrom: [CIDR]

    /// Latencies from a fraction of a millisecond (SQLite, a local upstream) to seconds.
    static let latencyBuckets: [Duration] = [
        .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10),
        .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
        .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10),
    ]

    /// Each worker's share of the per-request families, by worker index.
    let workers: [WorkerStats]
    /// `txgate_requests_total`: the counts of each worker's current pipelines, and the totals
    /// of those a reload replaced.
    private let requestCounts = Mutex<(live: [RequestCounts], retired: [String: UInt64], retiredOrder: [String])>(([], [:], []))

    let transactionsCreated: Counter
    /// The same request challenged again while its transaction waits: its TxId handed out again.
    let transactionsReused: Counter
    let transactionsCompleted: Counter
    /// Transactions the user declined on the approval page ("this wasn't me").
    let transactionsDeclined: Counter
    let transactionsConsumed: Counter
    /// Audit records written (`txgate_audit_events_total{event}`), by their event.
    private let auditEvents: [AuditEvent.Kind: Counter]
    private let transactionsRefused: [RetryRefusal: Counter]

    private let journeys: [String: (started: Counter, succeeded: Counter, failed: Counter)]
    let lockouts: Counter
    let emailsSent: Counter
    let emailsFailed: Counter
    /// Approval requests (`ApproveElsewhere`): created and how each ended; deliveries by channel.
    private let approvalOutcomes: [ApprovalOutcome: Counter]
    private let approvalDeliveries: [String: Counter]

    /// The store operations answered off the workers' loops (at start-up, on another executor):
    /// kept as a worker's share is, but written under `offLoopLock`.
    private let offLoop = WorkerStats(latencyBuckets: GatewayMetrics.latencyBuckets)
    private let offLoopLock = Mutex(())
    /// 1 while the store cannot evict keys (SQLite; Redis with `maxmemory-policy noeviction`),
    /// 0 once a Redis connection found another policy (allowed only by `store.allowEviction`).
    let storeEvictionPolicyOK: Gauge

    let upstreamConnectFailures: Counter
    /// Requests sent a second time after a kept-alive connection failed before any response byte.
    let upstreamResends: Counter
    /// Upstream failures after the request may have been processed (the client is told `"outcome":"unknown"`).
    let upstreamOutcomeUnknown: Counter

    init(config: GatewayConfig) {
        registry = PrometheusCollectorRegistry()
        var f = PrometheusMetricsFactory(registry: registry)
        f.defaultDurationHistogramBuckets = Self.latencyBuckets
        allowFrom = config.metrics.allowFrom
        workers = (0..<config.workers).map { _ in WorkerStats(latencyBuckets: Self.latencyBuckets) }

        func counter(_ name: String, _ dims: [(String, String)] = []) -> Counter {
            Counter(label: name, dimensions: dims, factory: f)
        }
        transactionsCreated = counter("txgate_transactions_created_total")
        transactionsReused = counter("txgate_transactions_reused_total")
        transactionsCompleted = counter("txgate_transactions_completed_total")
        transactionsDeclined = counter("txgate_transactions_declined_total")
        transactionsConsumed = counter("txgate_transactions_consumed_total")
        auditEvents = Dictionary(uniqueKeysWithValues: AuditEvent.Kind.allCases.map {
            ($0, counter("txgate_audit_events_total", [("event", $0.rawValue)]))
        })
        transactionsRefused = Dictionary(uniqueKeysWithValues: RetryRefusal.allCases.map {
            ($0, counter("txgate_transactions_refused_total", [("reason", $0.metricLabel)]))
        })

        journeys = Dictionary(uniqueKeysWithValues: config.journeys.keys.map { name in
            (name, (counter("txgate_journeys_started_total", [("journey", name)]),
                    counter("txgate_journeys_succeeded_total", [("journey", name)]),
                    counter("txgate_journeys_failed_total", [("journey", name)])))
        })
        lockouts = counter("txgate_lockouts_total")
        emailsSent = counter("txgate_emails_sent_total")
        emailsFailed = counter("txgate_emails_failed_total")
        approvalOutcomes = Dictionary(uniqueKeysWithValues: ApprovalOutcome.allCases.map {
            ($0, counter("txgate_approval_requests_total", [("outcome", $0.rawValue)]))
        })
        approvalDeliveries = Dictionary(uniqueKeysWithValues: ApprovalChannelKind.allCases.flatMap { c in
            ["sent", "failed"].map { ("\(c.rawValue)/\($0)", counter("txgate_approval_deliveries_total", [("channel", c.rawValue), ("outcome", $0)])) }
        })

        storeEvictionPolicyOK = Gauge(label: "txgate_store_eviction_policy_ok", dimensions: [], factory: f)
        storeEvictionPolicyOK.record(1)

        upstreamConnectFailures = counter("txgate_upstream_connect_failures_total")
        upstreamResends = counter("txgate_upstream_resends_total")
        upstreamOutcomeUnknown = counter("txgate_upstream_outcome_unknown_total")
    }

    /// A worker's new pipeline counts its requests here from now on.
    func register(_ counts: RequestCounts) {
        requestCounts.withLock { $0.live.append(counts) }
    }

    /// A pipeline is gone: its counts move to the retired totals, by series.
    func retire(_ counts: RequestCounts) {
        requestCounts.withLock { r in
            r.live.removeAll { $0 === counts }
            counts.forEachSeries { series, n in
                if r.retired[series] == nil { r.retiredOrder.append(series) }
                r.retired[series, default: 0] += n
            }
        }
    }

    /// An audit record the store wrote (with the state change it records).
    func audited(_ kind: AuditEvent.Kind) { auditEvents[kind]!.increment() }

    /// A consumed retry refused, by `PolicyDecider.refusal`'s reason.
    func transactionRefused(_ reason: RetryRefusal) { transactionsRefused[reason]!.increment() }

    func journeyStarted(_ name: String) { journeys[name]?.started.increment() }

    func journeyEnded(_ name: String, succeeded: Bool) {
        guard let j = journeys[name] else { return }
        (succeeded ? j.succeeded : j.failed).increment()
    }

    /// A store operation answered off the workers' loops (`MeasuredStore` records one answered on
    /// a worker's loop in that worker's `WorkerStats`).
    func storeOperationOffLoop(_ op: StoreOperation, nanos: UInt64, failed: Bool) {
        offLoopLock.withLock { _ in offLoop.storeOperation(op, nanos: nanos, failed: failed) }
    }

    func upstreamFailed(_ f: UpstreamFailure) {
        switch f {
        case .connectFailed, .connectTimeout: upstreamConnectFailures.increment()
        default: break
        }
        if f.requestMayHaveBeenProcessed { upstreamOutcomeUnknown.increment() }
    }

    /// Prometheus' text exposition format.
    func exposition() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(16 * 1024)
        registry.emit(into: &out)
        WorkerStats.emit(workers + [offLoop], into: &out)
        // One snapshot: a pipeline retired after it is still read as live, never twice.
        var (totals, order, live) = requestCounts.withLock { ($0.retired, $0.retiredOrder, $0.live) }
        for counts in live {
            counts.forEachSeries { series, n in
                if totals[series] == nil { order.append(series) }
                totals[series, default: 0] += n
            }
        }
        out.typeLine("txgate_requests_total", "counter")
        for series in order { out.sample("txgate_requests_total", labels: series, totals[series]!) }
        return out
    }
}

/// The store's operations, numbered from 0 (their slots in `WorkerStats`).
enum StoreOperation: Int, CaseIterable, Sendable {
    case create, put, get, touch, delete, take, increment, compareAndSwap, takeIf, appendAudit, ping, decrement, raise, writeAll

    /// The `operation` label.
    var label: String {
        switch self {
        case .create: "create"
        case .put: "put"
        case .get: "get"
        case .touch: "touch"
        case .delete: "delete"
        case .take: "take"
        case .increment: "increment"
        case .compareAndSwap: "compare_and_swap"
        case .takeIf: "take_if"
        case .appendAudit: "append_audit"
        case .ping: "ping"
        case .decrement: "decrement"
        case .raise: "raise"
        case .writeAll: "write_all"
        }
    }
}

extension GatewayMetrics {
    /// A journey step's outcome: a success or a failure ends the journey; a next step does not.
    func journey(_ name: String, _ result: JourneyResult) {
        switch result {
        case .success: journeyEnded(name, succeeded: true)
        case .failure, .rejected, .timedOut: journeyEnded(name, succeeded: false)
        case .step, .unavailable: break
        }
    }
}

/// What became of approval requests, for `txgate_approval_requests_total{outcome}`.
enum ApprovalOutcome: String, CaseIterable {
    case created, approved, denied, expired
}

extension GatewayMetrics {
    func approval(_ outcome: ApprovalOutcome) { approvalOutcomes[outcome]?.increment() }

    func approvalDelivered(_ channel: ApprovalChannelKind, ok: Bool) {
        approvalDeliveries["\(channel.rawValue)/\(ok ? "sent" : "failed")"]?.increment()
    }
}
