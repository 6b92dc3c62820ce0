import TxGateCore

/// The transaction records one worker read when it started their approval journeys, by store
/// key, kept until the journey completes there: the bytes read and what they decoded to
/// (`Value`; the tests keep bytes alone).
///
/// The completion writes the approved record with a compare-and-swap over the record as read.
/// Read at the start, that is a guess: the swap compares it byte for byte with what the store
/// holds, so a guess still true saves the completion's store read (a Redis round trip, a
/// SQLite query on the store's thread), and one that is not (the record changed, expired or
/// is gone) only fails the swap, after which the completion reads the record and decides as
/// it always did. A record is never answered from here: only the swap's expectation is.
///
/// Confined to the worker's loop (no lock). Bounded (`RingMap`): past `capacity` records (a
/// record and its decoding take one to two KiB) the oldest remembered is forgotten, and its
/// completion reads the store.
final class StartedRecords<Value> {
    static var defaultCapacity: Int { 256 }

    private var records: RingMap<String, Value>

    init(capacity: Int = StartedRecords.defaultCapacity) {
        records = RingMap(capacity: capacity)
    }

    var capacity: Int { records.capacity }
    var count: Int { records.count }

    /// The record `key` as read when its journey started.
    func remember(_ key: String, _ value: Value) {
        records.set(value, for: key)
    }

    /// The record `key` as remembered, forgotten here.
    func take(_ key: String) -> Value? {
        records.removeValue(forKey: key)
    }
}
