import Testing
import TxGateCore

/// The key classes a Redis store fences must match the keys the gateway really writes: a
/// transaction key that slipped out of `records` would be consumable again after a restore.
@Suite struct FencedKeysTests {
    /// Prefixes are compared byte by byte, as the store compares keys: a key is fenced by the
    /// bytes it starts with, whatever Unicode text follows.
    @Test func prefixesAreComparedByBytes() {
        let f = FencedKeys.oneShot
        #expect(f.kind(of: "tx:") == .record && f.kind(of: "tx:\u{301}x") == .record)
        #expect(f.kind(of: "tx") == nil && f.kind(of: "") == nil && f.kind(of: "TX:a") == nil && f.kind(of: "é") == nil)
        #expect(f.kind(of: "totp-step:u") == .marker && f.kind(of: "totp-step") == nil)
        #expect(f.quarantine(of: "totp-step:u", ttlMs: 5) == TOTPStepRecord.replayWindowMs && f.quarantine(of: "x", ttlMs: 5) == 5)
        #expect(FencedKeys(records: [""], markers: []).kind(of: "") == .record)
    }

    @Test func theGatewaysOneShotKeysAreFencedAndNothingElse() {
        let f = FencedKeys.oneShot
        #expect(f.kind(of: TransactionRecord.key("abc")) == .record)
        #expect(f.kind(of: SuspendedJourney.storeKey("id", realm: "/")) == .record)
        #expect(f.kind(of: AuthorizationGrant.key("code")) == .record)
        #expect(f.kind(of: "emailotp:ref") == .record)
        #expect(f.kind(of: ApprovalRequest.key("id")) == .record)
        #expect(f.kind(of: TOTPStepRecord.key("demo")) == .marker)
        #expect(f.quarantine(of: TOTPStepRecord.key("demo"), ttlMs: StoreExpiry.never) == TOTPStepRecord.replayWindowMs)
        #expect(TOTPStepRecord.replayWindowMs >= 90_000, "a code is accepted for up to 90 s after its step began")
        for key in [TransactionRecord.pendingKey("demo"), ParkedRequest.key("abc"), "session:x", "fail:user:demo", "lock:user:demo",
                    "emailrate:user:demo", RefreshRecord.key("t"), RefreshRecord.familyKey("f")] {
            #expect(f.kind(of: key) == nil, "\(key) is not fenced")
        }
    }
}
