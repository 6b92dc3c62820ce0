/// What one worker remembered, by key, until it takes it back once: a bounded memo that saves
/// the worker a store read or a check it can redo (`IssuedAuthIds`, `StartedRecords` in the
/// gateway). Whatever is not found here (forgotten, taken, remembered by another worker) is
/// read or checked as if the memo did not exist.
///
/// Confined to the worker's loop (no lock). Bounded (`RingMap`): past `capacity` entries the
/// oldest remembered is forgotten. Inlinable, so that its users in other modules get it
/// specialized.
public final class WorkerMemo<Key: Hashable, Value> {
    public static var defaultCapacity: Int { 256 }

    @usableFromInline var entries: RingMap<Key, Value>

    public init(capacity: Int = WorkerMemo.defaultCapacity) {
        entries = RingMap(capacity: capacity)
    }

    @inlinable public var capacity: Int { entries.capacity }
    @inlinable public var count: Int { entries.count }

    /// Remembers `value` under `key` (replacing what was there).
    @inlinable public func remember(_ key: Key, _ value: Value) {
        entries.set(value, for: key)
    }

    /// What is remembered under `key`, forgotten here.
    @inlinable public func take(_ key: Key) -> Value? {
        entries.removeValue(forKey: key)
    }
}
