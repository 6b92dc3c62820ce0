import Logging
import TxGateCore

/// Policies from gateway.json, transactions in the store: a thin executor of
/// `PolicyDecider`'s plans. Each store step's answer goes back to the decider, until the plan
/// is a decision.
final class EmbeddedPDP: PolicyDecisionPoint {
    let decider: PolicyDecider
    let store: Store
    let clock: WallClock
    let logger: Logger
    let metrics: GatewayMetrics
    /// How long the store keeps a consume's audit record (`audit.retentionDays`).
    let auditRetentionMs: Int

    init(decider: PolicyDecider, store: Store, clock: WallClock, logger: Logger, metrics: GatewayMetrics,
         auditRetentionMs: Int = AuditConfig().retentionMs) {
        self.metrics = metrics
        self.auditRetentionMs = auditRetentionMs
        self.decider = decider
        self.store = store
        self.clock = clock
        self.logger = logger
    }

    func needsSubject(applicable: Policy?) -> Bool {
        applicable.map { $0.subjects != .anyone } ?? false
    }

    func evaluate(_ q: DecisionQuery, on executor: CallbackExecutor, _ done: @escaping (Result<Decision, PDPError>) -> Void) {
        run(decider.decide(q, nowMs: clock.nowMs()), requestId: q.requestId ?? "-", executor, done)
    }

    private func run(_ plan: PolicyDecider.Plan, requestId: String, _ executor: CallbackExecutor,
                     _ done: @escaping (Result<Decision, PDPError>) -> Void) {
        switch plan {
        case .decided(let d):
            done(.success(d))
        case .failed(let e):
            done(.failure(e))
        case .consume(let txid, let intent):
            // In one store step, the record is deleted only if it is COMPLETED and sealed to this
            // very request, so of all concurrent retries, on any instance, exactly one gets through;
            // the same step writes the audit record of what happened: consumed, or refused.
            let audit = AuditEvent.consume(txid: txid, intent.binding, requestId: requestId).append(retentionMs: auditRetentionMs)
            store.takeIf(TransactionRecord.key(txid), fields: TransactionRecord.consumable(by: intent.binding), audit: audit,
                         on: executor) { [self] r in
                step(r, requestId, executor, done) { take in
                    if case .taken = take { metrics.audited(.consumed) } else { metrics.audited(.refused) }
                    let nowMs = clock.nowMs()
                    logConsume(txid, intent, take, nowMs: nowMs)
                    return decider.afterConsume(intent, take, nowMs: nowMs)
                }
            }
        case .countPending(let intent):
            // Bounded per subject so that a client cannot fill the store.
            store.increment(TransactionRecord.pendingKey(intent.binding.subject), ttlMs: intent.rule.ttlS * 1000, on: executor) { [self] r in
                step(r, requestId, executor, done) { decider.afterCount(intent, pending: $0, nowMs: clock.nowMs()) }
            }
        case .create(let record, let ttlMs):
            store.create(TransactionRecord.key(record.txid), value: record.encoded, ttlMs: ttlMs, on: executor) { [self] r in
                step(r, requestId, executor, done) { _ in
                    metrics.transactionsCreated.increment()
                    logger.info("transaction created", metadata: [
                        "txid": .string(masked(record.txid)), "user": .string(record.subject), "journey": .string(record.journey),
                        "method": .string(record.method), "resource": .string(record.resource),
                    ])
                    return decider.created(record)
                }
            }
        }
    }

    /// A store failure fails closed; a store answer gives the next plan.
    private func step<T>(_ r: StoreResult<T>, _ requestId: String, _ executor: CallbackExecutor,
                         _ done: @escaping (Result<Decision, PDPError>) -> Void, _ next: (T) -> PolicyDecider.Plan) {
        switch r {
        case .failure(let e): done(.failure(.unavailable(e.description)))
        case .success(let value): run(next(value), requestId: requestId, executor, done)
        }
    }

    private func logConsume(_ txid: String, _ intent: PolicyDecider.Intent, _ take: ConditionalTake, nowMs: Int64) {
        if let why = decider.refusal(intent, take, nowMs: nowMs) {
            metrics.transactionRefused(why)
            logger.info("transaction refused", metadata: ["txid": .string(masked(txid)), "reason": .string(why)])
        } else {
            metrics.transactionsConsumed.increment()
            logger.info("transaction consumed", metadata: [
                "txid": .string(masked(txid)), "user": .string(intent.binding.subject), "reason": "allowed once",
            ])
        }
    }
}
