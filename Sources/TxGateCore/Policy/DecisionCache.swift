/// What a cached decision is for: the method, the request-target (`_txid` removed: the resource
/// without the gateway's public URL, which is the same for every request) and who asks. Built
/// from the request's own strings, without joining them, for every request the cache answers.
public struct DecisionKey: Hashable, Sendable {
    public var method: String
    public var target: String
    public var subject: SubjectKey?

    public init(method: String, target: String, subject: SubjectKey?) {
        self.method = method
        self.target = target
        self.subject = subject
    }
}

/// Caches decisions per key (`DecisionKey` in the gateway) with AM's rules: a decision with
/// advices is never cached, an absolute `ttl` (epoch ms) is honoured, a missing one means the
/// default time, and one whose ttl has passed is not cached. One cache per worker: no locks.
/// At most `maxEntries`, the oldest put forgotten first (`RingMap`).
public final class DecisionCache<Key: Hashable> {
    public let maxEntries: Int
    public let defaultTtlMs: Int64
    private var entries: RingMap<Key, (decision: Decision, expiresMs: Int64)>
    public private(set) var hits = 0
    public private(set) var misses = 0

    public init(maxEntries: Int, defaultTtlMs: Int64) {
        self.maxEntries = maxEntries
        self.defaultTtlMs = defaultTtlMs
        // 0 caches nothing (`put`); the ring still needs a slot.
        entries = RingMap(capacity: max(maxEntries, 1))
    }

    public var count: Int { entries.count }

    public func get(_ key: Key, nowMs: Int64) -> Decision? {
        guard let e = entries[key] else { misses += 1; return nil }
        guard e.expiresMs > nowMs else {
            entries.removeValue(forKey: key)
            misses += 1
            return nil
        }
        hits += 1
        return e.decision
    }

    public func put(_ key: Key, _ d: Decision, nowMs: Int64) {
        guard maxEntries > 0, d.advices.isEmpty else { return }
        let expires = d.ttl ?? (nowMs + defaultTtlMs)
        guard expires > nowMs else { return }
        entries.set((d, expires), for: key)
    }
}
