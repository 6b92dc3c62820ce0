import EventHTTP
import HTTPCore
import TxGateCore
import TxGateCrypto

/// AM's `/json/sessions?_action=validate|logout` on one worker.
final class SessionsEndpoint {
    private let auth: AuthService
    private let loop: EventLoop

    init(auth: AuthService, loop: EventLoop) {
        self.auth = auth
        self.loop = loop
    }

    func handle(_ ctx: EndpointCall, realm: String) {
        let action = Query(target: ctx.head.target)["_action"] ?? ""
        // AM's form: the session asked about is `tokenId` in the body (the header is the
        // caller's, e.g. a gateway agent's); without one, the caller's own session.
        let token = JSONValue.parse(ctx.exchange.body.bytes)?["tokenId"]?.stringValue ?? auth.sessions.token(in: ctx.head.headers)
        switch action {
        case "validate": validate(ctx, token, realm: realm)
        case "logout": logout(ctx, token)
        default: ctx.fail(.badRequest("_action must be validate or logout"))
        }
    }

    private func validate(_ ctx: EndpointCall, _ token: String?, realm: String) {
        guard let token else { ctx.respondJSON(status: 200, #"{"valid":false}"#); return }
        auth.sessions.lookup(token, now: auth.now, on: loop) { r in
            switch r {
            case .failure(let e): ctx.fail(.storeUnavailable(e.description))
            case .success(let s?) where s.realm == realm:
                let sessionUid = Crypto.hex(Array(Crypto.sha256(Array(token.utf8)).prefix(8)))
                ctx.respondJSON(status: 200, #"{"valid":true,"sessionUid":"\#(sessionUid)","uid":"\#(JSONText.escape(s.uid))","realm":"\#(JSONText.escape(s.realm))"}"#)
            case .success:
                ctx.respondJSON(status: 200, #"{"valid":false}"#)
            }
        }
    }

    private func logout(_ ctx: EndpointCall, _ token: String?) {
        guard let token else {
            ctx.respondJSON(status: 401, AuthService.accessDenied)
            return
        }
        auth.sessions.delete(token, on: loop) { [auth] r in
            switch r {
            case .failure(let e): ctx.fail(.storeUnavailable(e.description))
            case .success(true):
                auth.logger.info("logout", metadata: ["request_id": .string(ctx.requestId), "session": .string(masked(token))])
                var h = HTTPHeaders()
                h.add("Set-Cookie", auth.sessions.clearCookie())
                ctx.respondJSON(status: 200, #"{"result":"Successfully logged out"}"#, headers: h)
            case .success(false):
                ctx.respondJSON(status: 401, AuthService.accessDenied)
            }
        }
    }
}
