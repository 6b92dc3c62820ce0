/// What a cached decision is for: the method, the request-target (`_txid` removed: the resource
/// without the gateway's public URL, which is the same for every request) and who asks. Built
/// from the request's own strings, without joining them, for every request the cache answers.
///
/// A reference: the dictionary copies the keys it compares out of its storage, and a copy of
/// four members was up to seven retains and releases; one object is one. Compared in place.
public final class DecisionKey: Hashable, Sendable {
    public let method: String
    public let target: String
    public let subject: SubjectKey?

    public init(method: String, target: String, subject: SubjectKey?) {
        self.method = method
        self.target = target
        self.subject = subject
    }

    public static func == (a: DecisionKey, b: DecisionKey) -> Bool {
        if a === b { return true }
        guard a.method == b.method, a.target == b.target else { return false }
        switch (a.subject, b.subject) {
        case (nil, nil): return true
        case (let x?, let y?): return x.id == y.id && x.journeys == y.journeys
        default: return false
        }
    }

    public func hash(into h: inout Hasher) {
        h.combine(method)
        h.combine(target)
        h.combine(subject)
    }
}

/// Caches decisions per key (`DecisionKey` in the gateway) with AM's rules: a decision with
/// advices is never cached, an absolute `ttl` (epoch ms) is honoured, a missing one means the
/// default time, and one whose ttl has passed is not cached. One cache per worker: no locks.
/// At most `maxEntries`, the oldest put forgotten first (`RingMap`).
/// Inlinable, so that the gateway's `DecisionCache<DecisionKey>` is specialized: unspecialized,
/// each lookup went through the standard library's generic dictionary code, hashing the key
/// through its witness table (about 1,700 instructions a request on the allow path).
public final class DecisionCache<Key: Hashable> {
    public let maxEntries: Int
    public let defaultTtlMs: Int64
    @usableFromInline var entries: RingMap<Key, (decision: Decision, expiresMs: Int64)>
    @usableFromInline var hitCount = 0
    @usableFromInline var missCount = 0
    public var hits: Int { hitCount }
    public var misses: Int { missCount }

    public init(maxEntries: Int, defaultTtlMs: Int64) {
        self.maxEntries = maxEntries
        self.defaultTtlMs = defaultTtlMs
        // 0 caches nothing (`put`); the ring still needs a slot.
        entries = RingMap(capacity: max(maxEntries, 1))
    }

    @inlinable public var count: Int { entries.count }

    @inlinable public func get(_ key: Key, nowMs: Int64) -> Decision? {
        guard let e = entries[key] else { missCount += 1; return nil }
        guard e.expiresMs > nowMs else {
            entries.removeValue(forKey: key)
            missCount += 1
            return nil
        }
        hitCount += 1
        return e.decision
    }

    @inlinable public func put(_ key: Key, _ d: Decision, nowMs: Int64) {
        guard maxEntries > 0, d.advices.isEmpty else { return }
        let expires = d.ttl ?? (nowMs + defaultTtlMs)
        guard expires > nowMs else { return }
        entries.set((d, expires), for: key)
    }
}
