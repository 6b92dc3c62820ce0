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

    func forWorker(policies: PolicySet) -> PolicyDecisionPoint {
        EmbeddedPDP(decider: decider.with(policies: policies), store: store, clock: clock, logger: logger, metrics: metrics,
                    auditRetentionMs: auditRetentionMs)
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
            store.takeIf(TransactionRecord.key(txid), fields: TransactionRecord.consumable(seal: intent.seal), audit: audit,
                         on: executor) { [self] r in
                step(r, requestId, executor, done) { take in
                    if case .taken = take { metrics.audited(.consumed) } else { metrics.audited(.refused) }
                    let nowMs = clock.nowMs()
                    logConsume(txid, intent, take, nowMs: nowMs)
                    return decider.afterConsume(intent, txid: txid, take, nowMs: nowMs)
                }
            }
        case .checkPending(let txid, let intent, let attempts):
            store.get(TransactionRecord.key(txid), on: executor) { [self] r in
                step(r, requestId, executor, done) { bytes in
                    let next = decider.afterCheckPending(intent, txid: txid, record: bytes, attempts: attempts, nowMs: clock.nowMs())
                    if case .decided = next {
                        metrics.transactionsReused.increment()
                        logger.info("transaction challenged again", metadata: [
                            "request_id": .string(requestId), "txid": .string(masked(txid)), "user": .string(intent.binding.subject),
                            "reason": "the same request, still waiting for approval",
                        ])
                    }
                    return next
                }
            }
        case .open(let record, let intent, let ttlMs, let replacing, let attempts):
            // The record, its index entry and the count bounding the subject's transactions (so
            // that a client cannot fill the store), in one step.
            let txid = Array(record.txid.utf8)
            let index: ConditionalWrite = replacing.map { .swap(intent.pendingKey, expected: Array($0.utf8), new: txid, ttlMs: ttlMs) }
                ?? .create(intent.pendingKey, value: txid, ttlMs: ttlMs)
            // The index first: when both conditions fail, what the index names is what matters.
            let writes: [ConditionalWrite] = [index, .create(TransactionRecord.key(record.txid), value: record.encoded, ttlMs: ttlMs)]
            store.writeAll(writes, moving: .up(TransactionRecord.pendingKey(intent.binding.subject), ttlMs: ttlMs),
                           on: executor) { [self] opened in
                let next = decider.afterOpen(record, intent, replacing: replacing, opened: opened, attempts: attempts,
                                             nowMs: clock.nowMs())
                if case .decided = next {
                    metrics.transactionsCreated.increment()
                    logger.info("transaction created", metadata: [
                        "request_id": .string(requestId), "txid": .string(masked(record.txid)), "user": .string(record.subject),
                        "journey": .string(record.journey), "method": .string(record.method), "resource": .string(record.resource),
                    ])
                }
                run(next, requestId: requestId, executor, done)
            }
        case .withdraw(let txid, let unindex, let then):
            store.delete(TransactionRecord.key(txid), on: executor) { [self] r in
                if case .failure(let e) = r {
                    logger.warning("unused transaction not withdrawn; it expires unused", metadata: [
                        "request_id": .string(requestId), "txid": .string(masked(txid)), "error": .string(e.description),
                    ])
                }
                store.compareAndSwap(unindex, expected: Array(txid.utf8), new: nil, ttlMs: nil, on: executor) { [self] _ in
                    // Left behind, the entry names a record that is gone: the next challenge replaces it.
                    run(then, requestId: requestId, executor, done)
                }
            }
        case .uncountPending(let subject, let then):
            store.decrement(TransactionRecord.pendingKey(subject), on: executor) { [self] r in
                if case .failure(let e) = r {
                    logger.warning("pending transaction count not lowered", metadata: [
                        "request_id": .string(requestId), "error": .string(e.description),
                    ])
                }
                run(then, requestId: requestId, executor, done)
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
            logger.info("transaction refused", metadata: ["txid": .string(masked(txid)), "reason": .string(why.message)])
        } else {
            metrics.transactionsConsumed.increment()
            logger.info("transaction consumed", metadata: [
                "txid": .string(masked(txid)), "user": .string(intent.binding.subject), "reason": "allowed once",
            ])
        }
    }
}
