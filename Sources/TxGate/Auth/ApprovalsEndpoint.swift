import EventHTTP
import HTTPCore
import TxGateCore

/// `POST /am/json/realms/{realm}/approvals?_action=status|deny` with `{"id":"<request id>"}`
/// and the person's own session: what the approval page reads (status) and its Deny button.
/// Approving is not here: it runs the request's approver journey through `/json/authenticate`
/// (`ApprovalRequest.adviceName`), whose success decides it.
///
/// The link names a request; it never authenticates: without a live session the answer is
/// 401, and a session of another user gets 403 and nothing about the request. The body must be
/// JSON, so that a form on another site cannot press Deny.
struct ApprovalsEndpoint {
    let auth: AuthService
    let loop: EventLoop

    func handle(_ ctx: EndpointCall, realm: String) {
        let action = Query(target: ctx.head.target)["_action"]
        guard action == "status" || action == "deny" else {
            ctx.fail(.badRequest("_action must be status or deny"))
            return
        }
        guard ctx.head.headers.first("Content-Type").flatMap(MediaType.init)?.isJSON == true else {
            ctx.fail(.unsupportedMediaType("send {\"id\": \"...\"} as application/json"))
            return
        }
        guard let id = JSONValue.parse(ctx.exchange.body.bytes)?["id"]?.stringValue, Self.isRequestId(id) else {
            ctx.fail(.badRequest("the body must be {\"id\": \"<approval request id>\"}"))
            return
        }
        ctx.ctx.approvalId = id
        guard let token = auth.sessions.token(in: ctx.head.headers) else {
            ctx.respondJSON(status: 401, AuthService.accessDenied)
            return
        }
        auth.sessions.lookup(token, now: auth.now, on: loop) { r in
            switch r {
            case .failure(let e): ctx.fail(.storeUnavailable(e.description))
            case .success(let s?) where s.realm == realm:
                if action == "deny" { deny(ctx, id: id, user: s.uid) } else { status(ctx, id: id, user: s.uid) }
            case .success: ctx.respondJSON(status: 401, AuthService.accessDenied)
            }
        }
    }

    /// 22 base64url characters: what `ApprovalRequest.pending` makes (anything else is no request).
    static func isRequestId(_ id: String) -> Bool {
        id.utf8.count == 22 && id.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D || $0 == 0x5F }
    }

    private func status(_ ctx: EndpointCall, id: String, user: String) {
        auth.store.get(ApprovalRequest.key(id), on: loop) { [auth] r in
            switch r {
            case .failure(let e): ctx.fail(.storeUnavailable(e.description))
            case .success(nil): ctx.respondJSON(status: 404, Self.refusalBody(.notFound))
            case .success(let bytes?):
                guard let request = ApprovalRequest.decode(bytes) else {
                    ctx.fail(.storeUnavailable("the approval request's record does not decode"))
                    return
                }
                guard request.subject == user else {
                    auth.logger.warning("approval request refused: another user's session", metadata: [
                        "request_id": .string(ctx.requestId), "approval": .string(masked(id)), "user": .string(user),
                    ])
                    ctx.respondJSON(status: 403, Self.refusalBody(.notYours))
                    return
                }
                var h = HTTPHeaders()
                h.add("Cache-Control", "no-store")
                ctx.respondJSON(status: 200, request.statusJSON(nowMs: auth.clock.nowMs()), headers: h)
            }
        }
    }

    private func deny(_ ctx: EndpointCall, id: String, user: String) {
        auth.store.decideApproval(id, .denied, by: user, nowMs: auth.clock.nowMs(), on: loop) { [auth] r in
            switch r {
            case .failure(let e):
                ctx.fail(.storeUnavailable(e.description))
            case .success(.failure(let refusal)):
                if refusal == .notYours {
                    auth.logger.warning("approval request refused: another user's session", metadata: [
                        "request_id": .string(ctx.requestId), "approval": .string(masked(id)), "user": .string(user),
                    ])
                }
                ctx.respondJSON(status: Self.status(refusal), Self.refusalBody(refusal))
            case .success(.success):
                auth.metrics.approval(.denied)
                CIBAEndpoint.approvalDecided(id, auth: auth, loop: loop)
                auth.logger.info("approval request denied", metadata: [
                    "request_id": .string(ctx.requestId), "approval": .string(masked(id)), "user": .string(user),
                ])
                ctx.respondJSON(status: 200, #"{"state":"denied"}"#)
            }
        }
    }

    /// The status of a refused decision: 404 unknown, 403 another user's, 409 decided already
    /// (the body's `state` says how), 410 expired.
    static func status(_ refusal: ApprovalRequest.Refusal) -> Int {
        switch refusal {
        case .notFound: return 404
        case .notYours: return 403
        case .alreadyDecided: return 409
        case .expired: return 410
        }
    }

    static func refusalBody(_ refusal: ApprovalRequest.Refusal) -> String {
        let state: String
        switch refusal {
        case .alreadyDecided(let s): state = s.rawValue
        case .expired: state = "expired"
        case .notFound, .notYours: state = "unknown"
        }
        return ErrorBody.text(status: status(refusal), message: refusal.description, members: #""state":"\#(state)""#)
    }
}
