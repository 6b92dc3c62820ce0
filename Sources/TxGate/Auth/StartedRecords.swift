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
/// A record and its decoding take one to two KiB; past the bound, the oldest remembered is
/// forgotten and its completion reads the store.
typealias StartedRecords<Value> = WorkerMemo<String, Value>
