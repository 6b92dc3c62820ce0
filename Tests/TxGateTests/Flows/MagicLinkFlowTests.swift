import Foundation
import Testing
import TestSupport
import TxGateCore

/// A magic link (WIRE.md §5) works once, never for an id that was not issued, and not after
/// its journey's `suspendTtlS`: in process and against the binary, the expiry in process
/// only. The rest are IntegrationTests' MagicLinkTests.
@Suite struct MagicLinkFlowTests: MagicLinkClient {
    @Test(.timeLimit(.minutes(1)), arguments: GatewayForm.allCases)
    func aLinkWorksOnceAndNeverUnknown(_ form: GatewayForm) throws {
        let g = try form.start(configForURL: { Self.config($0) })
        defer { g.stop() }
        let outbox = Self.outbox(g.dir)

        // Reuse.
        Self.expectSuspended(try Self.requestLink(g, user: "demo"))
        let mail = try #require(try MailTools.waitForOutbox(outbox, count: 1).last)
        let (_, id) = try #require(mail.magicLink(), "\(mail)")
        let token = try Self.expectSignedIn(try Self.resume(g, id))
        try Self.expectSession(g, token, uid: "demo")
        Self.expectNotFound(try Self.resume(g, id), "the same link a second time")

        // Never issued.
        Self.expectNotFound(try Self.resume(g, Self.randomId()), "a random suspendedId")
        Self.expectNotFound(try Self.resume(g, ""), "an empty suspendedId")
        // A valid id's hash, prefix or a changed character is not the id.
        Self.expectNotFound(try Self.resume(g, String(id.dropLast())), "a truncated suspendedId")
        let hashed = SuspendedJourney.storeKey(id, realm: "/").replacingOccurrences(of: "suspended:", with: "")
        Self.expectNotFound(try Self.resume(g, hashed), "the hash of a suspendedId")
    }

    /// Two links sent at the same instant with `suspendTtlS` 60: one resumed a second before
    /// the end signs in (so the journey is sound); the other, two seconds later, is gone.
    /// (No time limit: with TXGATE_LIVE_CLOCK=1 the binary's form sleeps a minute.)
    @Test(arguments: GatewayForm.withClock)
    func aLinkDoesNotWorkAfterItExpires(_ form: GatewayForm) throws {
        let g = try form.start(configForURL: { Self.config($0, suspendTtlS: 60) })
        defer { g.stop() }
        let outbox = Self.outbox(g.dir)
        Self.expectSuspended(try Self.requestLink(g, user: "other"))
        let quick = try #require(try MailTools.waitForOutbox(outbox, count: 1).last?.magicLink())
        Self.expectSuspended(try Self.requestLink(g, user: "other"))
        let slow = try #require(try MailTools.waitForOutbox(outbox, count: 2).last?.magicLink())
        #expect(slow.id != quick.id)

        g.advance(seconds: 59)
        let token = try Self.expectSignedIn(try Self.resume(g, quick.id))
        try Self.expectSession(g, token, uid: "other")
        g.advance(seconds: 2)
        Self.expectNotFound(try Self.resume(g, slow.id), "a link with suspendTtlS 60, 61 s later")
    }
}
