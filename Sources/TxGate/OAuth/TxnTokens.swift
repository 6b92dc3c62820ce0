import HTTPCore
import TxGateCore

/// Signs Transaction Tokens (draft-ietf-oauth-transaction-tokens) for requests the gateway
/// forwards: who asks and, for a consumed transaction, exactly what the user approved.
final class TxnTokenIssuer: Sendable {
    let config: TxnTokenConfig
    let keys: TokenKeys
    let issuer: String
    let clock: WallClock

    init(config: TxnTokenConfig, keys: TokenKeys, issuer: String, clock: WallClock) {
        self.config = config
        self.keys = keys
        self.issuer = issuer
        self.clock = clock
    }

    /// The token for an allowed request, or nil when none is due (`forAll` false and no
    /// transaction consumed, or no subject).
    func token(_ ctx: RequestContext) -> String? {
        guard let subject = ctx.subject, let decision = ctx.decision else { return nil }
        let consumed = decision.consumed
        guard consumed != nil || config.forAll else { return nil }
        var tctx: [String: JSONValue] = ["method": .string(ctx.method), "resource": .string(decision.resource)]
        var rctx: [String: JSONValue] = ["req_ip": .string(ctx.client.address)]
        if let tx = consumed {
            tctx["bound"] = .object(tx.bound)
            if let display = tx.display { tctx["display"] = .string(display) }
            // Approved with a passkey: the assertion, which commits to what is approved.
            if let passkey = tx.passkey { tctx["passkey"] = passkey }
            // Approved ahead of the request (RFC 9396): the entries the person approved.
            if let details = tx.authorizationDetails { tctx["authorization_details"] = details }
            rctx["authn"] = .string(tx.journey)
        } else if let journey = subject.journeys.last {
            rctx["authn"] = .string(journey)
        }
        let claims = TokenClaims.transactionToken(issuer: issuer, audience: config.audience, txn: consumed?.txid ?? ctx.requestId,
                                                  uid: subject.uid, scope: ctx.accessToken?.string("scope") ?? "",
                                                  tctx: tctx, rctx: rctx, now: clock.now, ttlS: config.ttlS)
        return keys.sign(claims, typ: "txntoken+jwt")
    }
}
