import EventHTTP
import HTTPCore
import TxGateCore

/// `POST /am/json/realms/{realm}/transactions?_action=decline` with `{"txid":"<TxId>"}` and the
/// user's session: the approval page's "Decline — this wasn't me". The transaction is refused at
/// once (taken from the store while it still waits for approval, in the same step as its
/// "declined" audit record), a parked browser request is dropped, and it is logged and counted.
///
/// Only the transaction's own user, with a live session, may decline it; anything else is the
/// same 404, so that nothing is learnt about other people's transactions. The body must be JSON:
/// a form on another site cannot send that without the browser asking (CORS), so the button
/// cannot be pressed from elsewhere.
struct TransactionsEndpoint {
    let auth: AuthService
    let loop: EventLoop

    func handle(_ ctx: EndpointCall, realm: String) {
        guard Query(target: ctx.head.target)["_action"] == "decline" else {
            ctx.fail(.badRequest("_action must be decline"))
            return
        }
        guard ctx.head.headers.first("Content-Type").flatMap(MediaType.init)?.isJSON == true else {
            ctx.fail(.unsupportedMediaType("send {\"txid\": \"...\"} as application/json"))
            return
        }
        guard let txid = JSONValue.parse(ctx.exchange.body.bytes)?["txid"]?.stringValue, PolicyDecider.isTxId(txid) else {
            ctx.fail(.badRequest("the body must be {\"txid\": \"<TxId>\"}"))
            return
        }
        guard let token = auth.sessions.token(in: ctx.head.headers) else {
            ctx.respondJSON(status: 401, AuthService.accessDenied)
            return
        }
        auth.sessions.lookup(token, now: auth.now, on: loop) { r in
            switch r {
            case .failure(let e): ctx.fail(.storeUnavailable(e.description))
            case .success(let s?) where s.realm == realm: decline(ctx, txid: txid, user: s.uid, realm: realm)
            case .success: ctx.respondJSON(status: 401, AuthService.accessDenied)
            }
        }
    }

    private func decline(_ ctx: EndpointCall, txid: String, user: String, realm: String) {
        let key = TransactionRecord.key(txid)
        let event = AuditEvent(kind: .declined, txid: txid, subject: user, requestId: ctx.requestId, realm: realm,
                               reason: "declined on the approval page")
        let audit = AuditAppend(ifChanged: event.entry, retentionMs: auth.config.audit.retentionMs)
        // Still waiting for approval, and this user's: an approved one is past declining.
        auth.store.takeIf(key, fields: ["state": TransactionRecord.State.created.rawValue, "subject": user, "realm": realm],
                          audit: audit, on: loop) { [auth, loop] r in
            switch r {
            case .failure(let e):
                ctx.fail(.storeUnavailable(e.description))
            case .success(.absent):
                ctx.fail(.notFound("no transaction of yours waits for approval under this TxId (unknown, expired or already used)"))
            case .success(.kept(let bytes)):
                let record = TransactionRecord.decode(bytes)
                guard let record, record.subject == user, record.realm == realm else {
                    ctx.fail(.notFound("no transaction of yours waits for approval under this TxId (unknown, expired or already used)"))
                    return
                }
                ctx.respondJSON(status: 409, ErrorBody.text(status: 409, message: "this transaction was already approved: it can no longer be declined"))
            case .success(.taken):
                auth.metrics.audited(.declined)
                auth.metrics.transactionsDeclined.increment()
                auth.logger.info("transaction declined", metadata: [
                    "request_id": .string(ctx.requestId), "txid": .string(masked(txid)), "user": .string(user),
                ])
                // No longer waiting: it stops counting against maxPendingTransactions; its parked request goes.
                auth.store.decrement(TransactionRecord.pendingKey(user), on: loop) { _ in }
                auth.store.take(ParkedRequest.key(txid), on: loop) { _ in
                    ctx.respondJSON(status: 200, #"{"declined":true}"#)
                }
            }
        }
    }
}
