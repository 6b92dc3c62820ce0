import EventHTTP
import HTTPCore
import TxGateCore

/// What a journey's result becomes on the wire: the next step, a new session, a step-up
/// recorded on the session, a completed transaction, or AM's failure answers.
struct JourneyCompletion {
    let auth: AuthService
    let loop: EventLoop
    /// The records of the transactions whose journeys this worker started (`AuthenticateEndpoint`).
    let started: StartedRecords<Started>

    /// A transaction record as read and decoded when its journey started.
    typealias Started = (bytes: [UInt8], record: TransactionRecord)

    static let loginFailure = AuthService.unauthorized("Login failure", members: #""detail":{"failureUrl":""}"#)
    static let timedOut = AuthService.unauthorized("Session has timed out", members: #""detail":{"errorCode":"110"}"#)

    /// `journey` is the state the step ran from, when there was one: a failed journey for a
    /// transaction is a denial, and goes into the audit trail.
    func finish(_ ctx: EndpointCall, _ result: JourneyResult, submittedUser: String?, journey: JourneyState? = nil) {
        switch result {
        case .step(let authId, let callbacks):
            ctx.respondJSON(status: 200, JourneyEngine.stepJSONBytes(authId: authId, callbacks: callbacks))
        case .success(let state):
            guard let user = state.username else {
                finish(ctx, .failure(reason: "the journey identified no user"), submittedUser: nil)
                return
            }
            if let id = state.shared[JourneyState.decidesApprovalKey] {
                approveRequest(ctx, state, id: id, user: user)
            } else if let txid = state.txid {
                completeTransaction(ctx, state, txid)
            } else if let sessionKey = state.shared[JourneyState.stepUpSessionKey] {
                recordStepUp(ctx, state, user: user, sessionKey: sessionKey)
            } else {
                createSession(ctx, state, user: user)
            }
        case .failure(let reason, let kind, let attemptsLeft):
            // A name as typed is logged only when it is an account: a password typed into the
            // name field must not land in the log.
            let known = submittedUser.flatMap { auth.users[$0] != nil ? $0 : nil }
            auth.logger.warning("login failed", metadata: [
                "request_id": .string(ctx.requestId), "user": .string(known ?? "-"), "reason": .string(reason),
            ])
            if kind == .expired { auth.metrics.approval(.expired) }
            let answer = journey.map(Self.inLiveSession) == true ? failureTold(kind, attemptsLeft: attemptsLeft) : Self.loginFailure
            if let journey, let txid = journey.txid, let user = journey.username {
                declined(ctx, journey, txid: txid, user: user, reason: reason, answer: answer)
            } else {
                ctx.respondJSON(status: 401, answer)
            }
        case .timedOut:
            ctx.respondJSON(status: 401, Self.timedOut)
        case .rejected(let why):
            auth.logger.warning("journey step rejected", metadata: ["request_id": .string(ctx.requestId), "reason": .string(why)])
            ctx.respondJSON(status: 401, AuthService.unauthorized(why))
        case .unavailable(let why):
            ctx.fail(.storeUnavailable(why))
        }
    }

    /// Whether a journey runs inside a live session (a transaction's approval, a step-up): only
    /// then is the person told what failed (issue 24: a used code is not a wrong code).
    static func inLiveSession(_ state: JourneyState) -> Bool {
        state.txid != nil || state.shared[JourneyState.stepUpSessionKey] != nil || state.shared[JourneyState.approvalSessionKey] != nil
    }

    /// AM's failure answer with what failed in `detail.reason` (`FailureKind`); for a failure
    /// counted toward the lockout, the failures still allowed before it (`detail.attemptsLeft`);
    /// for a lockout, or the failure that started one (attemptsLeft 0), the longest it lasts
    /// (`detail.retryAfterS`). The message stays AM's.
    func failureTold(_ kind: FailureKind, attemptsLeft: Int? = nil) -> String {
        var detail = #""failureUrl":"","reason":"\#(kind.rawValue)""#
        if let attemptsLeft { detail += #","attemptsLeft":\#(max(0, attemptsLeft))"# }
        if kind == .lockedOut || attemptsLeft.map({ $0 <= 0 }) == true {
            detail += #","retryAfterS":\#(auth.config.security.lockoutDurationS)"#
        }
        return AuthService.unauthorized("Login failure", members: #""detail":{\#(detail)}"#)
    }

    /// AM's success answer: the session's token, where to go next, the realm.
    private func success(_ ctx: EndpointCall, token: String, _ state: JourneyState, headers: HTTPHeaders = HTTPHeaders()) {
        let successUrl = state.shared["goto"] ?? auth.config.loginPage.defaultGoto
        ctx.respondJSON(status: 200, #"{"tokenId":"\#(JSONText.escape(token))","successUrl":"\#(JSONText.escape(successUrl))","realm":"\#(JSONText.escape(state.realm))"}"#,
                        headers: headers)
    }

    private func createSession(_ ctx: EndpointCall, _ state: JourneyState, user: String) {
        auth.sessions.create(uid: user, realm: state.realm, journey: state.journey, now: auth.now, on: loop) { r in
            switch r {
            case .failure(let e): ctx.fail(.storeUnavailable(e.description))
            case .success(let token):
                auth.logger.info("login succeeded", metadata: [
                    "request_id": .string(ctx.requestId), "user": .string(user), "journey": .string(state.journey),
                    "realm": .string(state.realm), "session": .string(masked(token)),
                ])
                var h = HTTPHeaders()
                h.add("Set-Cookie", auth.sessions.setCookie(token))
                h.add("Cache-Control", "no-store")
                success(ctx, token: token, state, headers: h)
            }
        }
    }

    private func recordStepUp(_ ctx: EndpointCall, _ state: JourneyState, user: String, sessionKey: String) {
        auth.sessions.addJourney(state.journey, toSessionKey: sessionKey, uid: user, now: auth.now, on: loop) { r in
            switch r {
            case .failure(let e): ctx.fail(.storeUnavailable(e.description))
            case .success(false): finish(ctx, .failure(reason: "the session ended during step-up"), submittedUser: user)
            case .success(true):
                auth.logger.info("step-up succeeded", metadata: ["request_id": .string(ctx.requestId), "user": .string(user),
                                                                 "journey": .string(state.journey)])
                success(ctx, token: auth.sessions.token(in: ctx.head.headers) ?? "", state)
            }
        }
    }

    /// An approver journey passed: the approval request is approved (`Store.decideApproval`),
    /// unless it was decided or expired meanwhile (409 or 410 says what it is), or the
    /// approver's session ended during the journey (a logout on that device: nothing counts).
    private func approveRequest(_ ctx: EndpointCall, _ state: JourneyState, id: String, user: String) {
        guard let sessionKey = state.shared[JourneyState.approvalSessionKey] else {
            finish(ctx, .failure(reason: "an approver journey without its session"), submittedUser: user)
            return
        }
        auth.sessions.isLive(key: sessionKey, uid: user, now: auth.now, on: loop) { r in
            switch r {
            case .failure(let e): ctx.fail(.storeUnavailable(e.description))
            case .success(false): finish(ctx, .failure(reason: "the session ended during the approval"), submittedUser: user)
            case .success(true): decide(ctx, state, id: id, user: user)
            }
        }
    }

    private func decide(_ ctx: EndpointCall, _ state: JourneyState, id: String, user: String) {
        auth.store.decideApproval(id, .approved, by: user, nowMs: auth.clock.nowMs(), on: loop) { r in
            switch r {
            case .failure(let e):
                ctx.fail(.storeUnavailable(e.description))
            case .success(.failure(let refusal)):
                auth.logger.info("approval request not approved", metadata: [
                    "request_id": .string(ctx.requestId), "approval": .string(masked(id)), "user": .string(user),
                    "reason": .string(refusal.description),
                ])
                ctx.respondJSON(status: ApprovalsEndpoint.status(refusal), ApprovalsEndpoint.refusalBody(refusal))
            case .success(.success):
                auth.metrics.approval(.approved)
                CIBAEndpoint.approvalDecided(id, auth: auth, loop: loop)
                auth.logger.info("approval request approved", metadata: [
                    "request_id": .string(ctx.requestId), "approval": .string(masked(id)), "user": .string(user),
                    "journey": .string(state.journey),
                ])
                success(ctx, token: auth.sessions.token(in: ctx.head.headers) ?? "", state)
            }
        }
    }

    /// A journey run for a transaction completes it (a compare-and-swap over what was read);
    /// the session stays as it was. The record as read when this worker started the journey
    /// is swapped from without reading it again; if it changed since, the swap fails and the
    /// record is read (`StartedRecords`).
    private func completeTransaction(_ ctx: EndpointCall, _ state: JourneyState, _ txid: String) {
        let key = TransactionRecord.key(txid)
        if let guess = started.take(key) {
            complete(ctx, state, key, bytes: guess.bytes, record: guess.record, guessed: true)
        } else {
            readAndComplete(ctx, state, key)
        }
    }

    private func readAndComplete(_ ctx: EndpointCall, _ state: JourneyState, _ key: String) {
        auth.store.get(key, on: loop) { r in
            switch r {
            case .failure(let e): ctx.fail(.storeUnavailable(e.description))
            case .success(let bytes): complete(ctx, state, key, bytes: bytes, record: bytes.flatMap(TransactionRecord.decode), guessed: false)
            }
        }
    }

    /// `record`: what `bytes` decode to. `guessed`: both were read at the journey's start, not
    /// now; whatever they do not settle is settled by reading the record.
    private func complete(_ ctx: EndpointCall, _ state: JourneyState, _ key: String, bytes: [UInt8]?, record: TransactionRecord?,
                          guessed: Bool) {
        // Approved with a passkey: the assertion's evidence is kept with the transaction.
        let passkey = state.shared[PasskeyNodes.evidenceKey].flatMap { JSONValue.parse(Array($0.utf8)) }
        guard let bytes, let tx = record?.approved(by: state.username, passkey: passkey) else {
            if guessed { return readAndComplete(ctx, state, key) }
            finish(ctx, .failure(reason: "transaction gone before completion"), submittedUser: state.username)
            return
        }
        // The approval's audit record is written by the same store step as the approval, and
        // the transaction, no longer waiting, stops counting against maxPendingTransactions.
        let audit = AuditAppend(ifChanged: AuditEvent.approved(tx, requestId: ctx.requestId).entry,
                                retentionMs: auth.config.audit.retentionMs)
        auth.store.compareAndSwap(key, expected: bytes, new: tx.encoded, ttlMs: nil, audit: audit,
                                  moving: .down(TransactionRecord.pendingKey(tx.subject)), on: loop) { r in
            switch r {
            case .failure(let e): ctx.fail(.storeUnavailable(e.description))
            case .success(nil) where guessed: readAndComplete(ctx, state, key)
            case .success(nil): finish(ctx, .failure(reason: "transaction changed during completion"), submittedUser: state.username)
            case .success:
                auth.metrics.audited(.approved)
                approved(ctx, state, tx)
            }
        }
    }

    /// A transaction's journey failed (the user declined, or failed a step): the denial goes
    /// into the audit trail, with the transaction as stored (what was shown), before the answer.
    /// Nothing changes state, so a store that cannot write it loses no decision: the answer is
    /// the same, and the loss is logged.
    private func declined(_ ctx: EndpointCall, _ state: JourneyState, txid: String, user: String, reason: String, answer: String) {
        _ = started.take(TransactionRecord.key(txid))
        let event = AuditEvent(kind: .declined, txid: txid, subject: user, requestId: ctx.requestId, realm: state.realm,
                               journey: state.journey, display: state.shared["display"], reason: reason)
        auth.store.appendAudit(event.entry, foundKey: TransactionRecord.key(txid), retentionMs: auth.config.audit.retentionMs,
                               on: loop) { [auth] r in
            switch r {
            case .success:
                auth.metrics.audited(.declined)
            case .failure(let e):
                auth.logger.error("declined approval not recorded in the audit trail", metadata: [
                    "request_id": .string(ctx.requestId), "txid": .string(masked(txid)), "error": .string(e.description),
                ])
            }
            ctx.respondJSON(status: 401, answer)
        }
    }

    private func approved(_ ctx: EndpointCall, _ state: JourneyState, _ tx: TransactionRecord) {
        auth.metrics.transactionsCompleted.increment()
        auth.logger.info("transaction approved", metadata: [
            "request_id": .string(ctx.requestId), "txid": .string(masked(tx.txid)),
            "user": .string(tx.subject), "journey": .string(tx.journey),
        ])
        success(ctx, token: auth.sessions.token(in: ctx.head.headers) ?? "", state)
    }
}
