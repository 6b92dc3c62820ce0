/// A dictionary of at most `capacity` entries. Its keys are kept in a ring of `capacity` slots,
/// in the order they were put; once the ring is full, putting a new key takes the oldest slot,
/// and the entry of the key that held it is forgotten. A key removed and put again holds two
/// slots, and the older one forgets it early. One owner (a worker's loop): no locks.
/// Inlinable, so that its users in other modules (through `WorkerMemo`) get it specialized.
public struct RingMap<Key: Hashable, Value> {
    public let capacity: Int
    @usableFromInline var values: [Key: Value] = [:]
    /// Keys in the order put; a key removed since stays until its slot is taken.
    @usableFromInline var order: [Key] = []
    @usableFromInline var next = 0

    public init(capacity: Int) {
        precondition(capacity >= 1, "RingMap: capacity must be at least 1")
        self.capacity = capacity
        order.reserveCapacity(capacity)
    }

    @inlinable public var count: Int { values.count }

    @inlinable public subscript(key: Key) -> Value? { values[key] }

    /// Sets `key`'s entry; a key already here keeps its slot.
    @inlinable public mutating func set(_ value: Value, for key: Key) {
        if values.updateValue(value, forKey: key) != nil { return }
        if order.count < capacity {
            order.append(key)
        } else {
            let oldest = order[next]
            if oldest != key { values[oldest] = nil }
            order[next] = key
            next = (next + 1) % capacity
        }
    }

    @inlinable @discardableResult
    public mutating func removeValue(forKey key: Key) -> Value? {
        values.removeValue(forKey: key)
    }
}
