import Foundation
import HTTPCore

/// The records whose presence or absence enforces "exactly once", named by key prefix, for a
/// store that can lose or roll back writes (Redis restarted from a snapshot, a lagging replica
/// promoted). Such a store keeps an epoch that moves on whenever it may have lost writes, and
/// treats these keys by their class (see `RedisStore` and docs/ARCHITECTURE.md, "Fencing"):
///
/// - **records**: a record written in an older epoch does not exist. A transaction consumed
///   before a restart and brought back by the snapshot is absent, not COMPLETED: the user
///   approves again, nothing runs twice. The same holds for a record that was pending or
///   approved when Redis went down: its approval cannot be told apart from a resurrected one.
/// - **markers**: one-time markers, whose *absence* lets something happen once (a TOTP code
///   not used yet). A restore can lose a marker, and nothing that is left can say so; the
///   only safe answer is to refuse new markers until every marker that could have been lost
///   would have expired anyway: a claim with a time to live of T made less than T after the
///   epoch moved on is refused (the store is "unavailable" for it), never granted.
///
/// - **high-water marks**, a kind of marker: a number only ever raised (a user's last accepted
///   TOTP time step), whose loss or roll-back would let something happen again. Its value from
///   an older epoch is not trusted (absent), and setting it again is refused for its
///   `quarantineMs` after the epoch moved on (for TOTP, until every code the lost value could
///   have covered is out of its window); it then starts over.
///
/// Sessions, rate counters and lockouts are not fenced: a resurrected session or lockout fails
/// no exactly-once promise, and a lost lockout or counter cannot be brought back by refusing
/// anything (it only gives a guesser one more window; eviction, which would do the same at
/// any time, is refused separately: `store.allowEviction`).
public struct FencedKeys: Sendable, Equatable {
    public enum Kind: Sendable, Equatable { case record, marker }

    public var records: [String]
    public var markers: [String]
    /// Markers refused for a fixed time after the epoch moved on, rather than for their own time
    /// to live (a high-water mark never expires), by key prefix.
    public var quarantineMs: [String: Int]

    public init(records: [String], markers: [String], quarantineMs: [String: Int] = [:]) {
        self.records = records
        self.markers = markers
        self.quarantineMs = quarantineMs
    }

    /// The gateway's own: transactions, email codes, suspended journeys (a magic link),
    /// OAuth authorization codes, approval requests (one decided before a restore must not be
    /// pending again), passkey challenges (one answered before a restore must not be answerable
    /// again: the same assertion would pass twice); and each user's last accepted TOTP step, a marker.
    /// FencedKeysTests checks these against the keys the gateway really writes.
    public static let oneShot = FencedKeys(
        records: [TransactionRecord.key(""), "emailotp:", "suspended:", "oauth2:code:", ApprovalRequest.keyPrefix,
                  PasskeyChallenge.keyPrefix, PushedAuthorizationRequest.keyPrefix,
                  CIBARequest.keyPrefix],
        markers: [TOTPStepRecord.keyPrefix],
        quarantineMs: [TOTPStepRecord.keyPrefix: TOTPStepRecord.replayWindowMs])

    /// Nothing fenced (a store that cannot lose writes, or a test of the raw protocol).
    public static let none = FencedKeys(records: [], markers: [])

    /// How long after the epoch moved on a marker `key` of `ttlMs` is refused.
    public func quarantine(of key: String, ttlMs: Int) -> Int {
        quarantineMs.first { Self.starts(key, with: $0.key) }?.value ?? ttlMs
    }

    /// How `key` (without the store's own prefix) is fenced, if at all.
    public func kind(of key: String) -> Kind? {
        if records.contains(where: { Self.starts(key, with: $0) }) { return .record }
        if markers.contains(where: { Self.starts(key, with: $0) }) { return .marker }
        return nil
    }

    /// Whether `key`'s bytes start with `prefix`'s, as the store compares keys (asked for every
    /// store operation; `hasPrefix` compares Unicode text, at about a hundred instructions a call).
    static func starts(_ key: String, with prefix: String) -> Bool {
        key.withUTF8Bytes { k in
            prefix.withUTF8Bytes { p in k.count >= p.count && (p.isEmpty || memcmp(k.baseAddress!, p.baseAddress!, p.count) == 0) }
        }
    }
}
