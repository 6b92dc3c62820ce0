import EventHTTP
import Foundation
import HTTPCore
import Logging
import TxGateCore
import TxGateCrypto

/// The embedded authentication service, shared by every worker: AM's `/json/authenticate`
/// and `/json/sessions`, and the login page.
final class AuthService: @unchecked Sendable {
    let engine: JourneyEngine
    let sessions: SessionManager
    let store: Store
    let config: GatewayConfig
    let users: [String: UserRecord]
    let verifier = PasswordVerifier()
    let gotoPolicy: GotoPolicy
    let publicURL: String
    /// Delivers emails for the email nodes; nil when `email` is not configured.
    var emailDelivery: EmailDelivery?
    let logger: Logger
    /// AM's policy-evaluation endpoint, when policies are configured.
    var policiesEndpoint: ((RequestContext, String) -> Void)?

    static let loginFailure = #"{"code":401,"reason":"Unauthorized","message":"Login failure","detail":{"failureUrl":""}}"#
    static let timedOut = #"{"code":401,"reason":"Unauthorized","message":"Session has timed out","detail":{"errorCode":"110"}}"#

    init(config: GatewayConfig, store: Store, signingKey: [UInt8], logger: Logger) {
        self.config = config
        self.store = store
        self.logger = logger
        users = Dictionary(config.users.map { ($0.username, $0) }, uniquingKeysWith: { a, _ in a })
        engine = JourneyEngine(journeys: JourneyEngine.build(config.journeys).journeys, signingKey: signingKey,
                               authIdTtlS: config.security.authIdTtlS)
        let publicURL = config.effectivePublicURL
        sessions = SessionManager(store: store, config: config.session, secureCookie: publicURL.isTLS)
        gotoPolicy = GotoPolicy(origin: publicURL)
        self.publicURL = publicURL.description
    }

    func services(for worker: Worker) -> EmbeddedJourneyServices {
        EmbeddedJourneyServices(loop: worker.loop, store: store, users: users, security: config.security,
                                verifier: verifier, email: emailDelivery, logger: logger)
    }

    var now: Int { Int(Date().timeIntervalSince1970) }

    /// `/am/json/realms/root[/realms/NAME]/<endpoint>` → (realm, endpoint); also `/am/json/<endpoint>`.
    func route(_ path: Substring) -> (realm: String, endpoint: String)? {
        let parts = path.split(separator: "/").dropFirst(2).map(String.init)  // drop "am", "json"
        if parts.count == 1 { return ("/", parts[0]) }
        guard parts.count >= 3, parts[0] == "realms", parts[1] == "root" else { return nil }
        if parts.count == 3 { return ("/", parts[2]) }
        guard parts.count == 5, parts[2] == "realms" else { return nil }
        return ("/" + parts[3], parts[4])
    }

    func handle(_ ctx: RequestContext) {
        let path = ctx.head.path
        if path == "/am/XUI" || path == "/am/XUI/" || path == "/am/XUI/index.html" {
            LoginPage.serve(ctx, gotoPolicy: gotoPolicy)
            return
        }
        guard path.hasPrefix("/am/json/"), let (realm, endpoint) = route(path) else {
            ctx.respondError(status: 404, message: "no authentication service endpoint at \(path)")
            return
        }
        guard realm == "/" || config.realms.contains(String(realm.dropFirst())) else {
            ctx.respondError(status: 404, message: "realm '\(realm)' is not configured")
            return
        }
        guard ctx.head.method == "POST" else {
            ctx.respondError(status: 405, message: "\(ctx.head.method) is not allowed here; use POST")
            return
        }
        switch endpoint {
        case "authenticate": authenticate(ctx, realm: realm)
        case "sessions": sessionAction(ctx, realm: realm)
        case "policies": policiesEndpoint?(ctx, realm)
        default: ctx.respondError(status: 404, message: "no authentication service endpoint at \(path)")
        }
    }

    // MARK: authenticate

    private func authenticate(_ ctx: RequestContext, realm: String) {
        let query = Query(target: ctx.head.target)
        let raw = ctx.exchange.body.bytes
        let body: JSONValue
        if raw.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
            body = .object([:])
        } else if let b = JSONValue.parse(raw), b.objectValue != nil {
            body = b
        } else {
            ctx.respondError(status: 400, message: "the request body is not a JSON object")
            return
        }
        let services = services(for: ctx.worker)
        if let authId = body["authId"]?.stringValue {
            let state: JourneyState
            switch engine.decode(authId: authId, now: now) {
            case .failure(let r): finish(ctx, r, submittedUser: nil)
                return
            case .success(let s): state = s
            }
            guard state.realm == realm else {
                finish(ctx, .rejected("the authId belongs to another realm"), submittedUser: nil)
                return
            }
            guard let submitted = SubmittedCallback.parse(body["callbacks"]) else {
                ctx.respondError(status: 400, message: "'callbacks' must be the array of callbacks of the current step")
                return
            }
            let hint = submitted.first(where: { $0.type == "NameCallback" })?.text
            engine.proceed(state, submitted: submitted, context: context(state, services)) { [self] result in
                finish(ctx, result, submittedUser: state.username ?? hint)
            }
            return
        }
        if let suspendedId = query["suspendedId"] {
            resume(ctx, suspendedId, realm: realm, services)
            return
        }
        var initial = JourneyState(realm: realm, journey: config.loginJourney)
        if let goto = query["goto"] {
            guard let ok = gotoPolicy.validate(goto) else {
                ctx.respondError(status: 400, message: "goto '\(goto)' is not on this gateway's origin (\(gotoPolicy.origin.origin))")
                return
            }
            initial.shared["goto"] = ok
        }
        switch query["authIndexType"] ?? "service" {
        case "service":
            let name = query["authIndexValue"] ?? config.loginJourney
            guard engine.journeys[name] != nil else {
                ctx.respondError(status: 400, message: "no journey named '\(name)'")
                return
            }
            initial.journey = name
        case "composite_advice":
            guard let raw = query["authIndexValue"], let advices = Advices.parse(xmlOrBase64: raw) else {
                ctx.respondError(status: 400, message: "authIndexValue must be advice XML (URL-encoded or base64url)")
                return
            }
            compositeAdvice(ctx, advices, initial, services)
            return
        default:
            ctx.respondError(status: 400, message: "authIndexType '\(query["authIndexType"]!)' is not supported (use service or composite_advice)")
            return
        }
        // A journey started with a session (a step-up) knows its user already.
        withSession(ctx) { [self] session in
            initial.username = session?.uid
            engine.start(initial, context: context(initial, services)) { [self] in finish(ctx, $0, submittedUser: nil) }
        }
    }

    /// Looks up the request's session, if it carries one. Store failures answer 503.
    func withSession(_ ctx: RequestContext, _ then: @escaping (Session?) -> Void) {
        guard let token = sessions.token(in: ctx.head.headers) else { then(nil); return }
        sessions.lookup(token, now: now, on: ctx.worker.loop) { r in
            switch r {
            case .success(let s): then(s)
            case .failure(let e): self.unavailable(ctx, e.description)
            }
        }
    }

    private func finish(_ ctx: RequestContext, _ result: JourneyResult, submittedUser: String?) {
        switch result {
        case .step(let authId, let callbacks):
            ctx.respondJSON(status: 200, JourneyEngine.stepJSON(authId: authId, callbacks: callbacks))
        case .success(let state):
            guard let user = state.username else {
                finish(ctx, .failure(reason: "the journey identified no user"), submittedUser: nil)
                return
            }
            if let txid = state.txid {
                completeTransaction(ctx, state, txid)
                return
            }
            if let sessionKey = state.shared["stepUpSession"] {
                let token = sessions.token(in: ctx.head.headers) ?? ""
                sessions.addJourney(state.journey, toSessionKey: sessionKey, uid: user, now: now, on: ctx.worker.loop) { [self] r in
                    switch r {
                    case .failure(let e): unavailable(ctx, e.description)
                    case .success(false): finish(ctx, .failure(reason: "the session ended during step-up"), submittedUser: user)
                    case .success(true):
                        logger.info("step-up succeeded", metadata: ["request_id": .string(ctx.requestId), "user": .string(user),
                                                                    "journey": .string(state.journey)])
                        ctx.respondJSON(status: 200, #"{"tokenId":"\#(JSONText.escape(token))","successUrl":"\#(JSONText.escape(state.shared["goto"] ?? "/"))","realm":"\#(JSONText.escape(state.realm))"}"#)
                    }
                }
                return
            }
            sessions.create(uid: user, realm: state.realm, journey: state.journey, now: now, on: ctx.worker.loop) { [self] r in
                switch r {
                case .failure(let e): unavailable(ctx, e.description)
                case .success(let token):
                    logger.info("login succeeded", metadata: [
                        "request_id": .string(ctx.requestId), "user": .string(user), "journey": .string(state.journey),
                        "realm": .string(state.realm), "session": .string(masked(token)),
                    ])
                    var h = HTTPHeaders()
                    h.add("Set-Cookie", sessions.setCookie(token))
                    h.add("Cache-Control", "no-store")
                    let successUrl = state.shared["goto"] ?? "/"
                    ctx.respondJSON(status: 200, #"{"tokenId":"\#(token)","successUrl":"\#(JSONText.escape(successUrl))","realm":"\#(JSONText.escape(state.realm))"}"#, headers: h)
                }
            }
        case .failure(let reason):
            logger.warning("login failed", metadata: [
                "request_id": .string(ctx.requestId), "user": .string(submittedUser ?? "-"), "reason": .string(reason),
            ])
            ctx.respondJSON(status: 401, Self.loginFailure)
        case .timedOut:
            ctx.respondJSON(status: 401, Self.timedOut)
        case .rejected(let why):
            logger.warning("journey step rejected", metadata: ["request_id": .string(ctx.requestId), "reason": .string(why)])
            ctx.respondJSON(status: 401, #"{"code":401,"reason":"Unauthorized","message":"\#(JSONText.escape(why))"}"#)
        case .unavailable(let why):
            unavailable(ctx, why)
        }
    }

    func unavailable(_ ctx: RequestContext, _ why: String) {
        logger.error("store unavailable", metadata: ["request_id": .string(ctx.requestId), "error": .string(why)])
        ctx.respondError(status: 503, message: "the authentication service cannot reach its store; try again shortly")
    }

    /// The journey an advice asks for. A transaction's journey completes that transaction
    /// and needs the session of the transaction's own subject; `/:NAME` runs NAME.
    private func compositeAdvice(_ ctx: RequestContext, _ advices: Advices, _ initial: JourneyState,
                                 _ services: EmbeddedJourneyServices) {
        var state = initial
        if let txid = advices[Advices.transaction]?.first {
            withSession(ctx) { [self] session in
                guard let session else {
                    ctx.respondJSON(status: 401, #"{"code":401,"reason":"Unauthorized","message":"a session is needed to approve a transaction"}"#)
                    return
                }
                store.get(TransactionRecord.key(txid), on: ctx.worker.loop) { [self] r in
                    switch r {
                    case .failure(let e): unavailable(ctx, e.description)
                    case .success(let bytes):
                        guard let tx = bytes.flatMap(TransactionRecord.decode), tx.state == .created, tx.expires > now else {
                            ctx.respondJSON(status: 401, #"{"code":401,"reason":"Unauthorized","message":"the transaction is unknown, expired or already approved"}"#)
                            return
                        }
                        guard tx.subject == session.uid, tx.realm == state.realm else {
                            logger.warning("transaction approval refused: another user's session", metadata: [
                                "request_id": .string(ctx.requestId), "txid": .string(masked(txid)), "user": .string(session.uid),
                            ])
                            ctx.respondJSON(status: 401, #"{"code":401,"reason":"Unauthorized","message":"this transaction belongs to another user"}"#)
                            return
                        }
                        guard engine.journeys[tx.journey] != nil else {
                            ctx.respondError(status: 400, message: "the transaction's journey '\(tx.journey)' is not configured")
                            return
                        }
                        state.journey = tx.journey
                        state.username = session.uid
                        state.txid = txid
                        if let d = tx.display { state.shared["display"] = d }
                        engine.start(state, context: context(state, services)) { [self] in finish(ctx, $0, submittedUser: nil) }
                    }
                }
            }
            return
        }
        if let tree = advices[Advices.authenticateToService]?.first {
            let name = String(tree.split(separator: ":", maxSplits: 1).last ?? "")
            guard engine.journeys[name] != nil else {
                ctx.respondError(status: 400, message: "no journey named '\(name)'")
                return
            }
            state.journey = name
            withSession(ctx) { [self] session in
                state.username = session?.uid
                // The session's store key, not its token: an authId is signed, not encrypted.
                if let token = sessions.token(in: ctx.head.headers), session != nil { state.shared["stepUpSession"] = SessionManager.key(token) }
                engine.start(state, context: context(state, services)) { [self] in finish(ctx, $0, submittedUser: nil) }
            }
            return
        }
        ctx.respondError(status: 400, message: "the advice names neither a transaction nor a journey")
    }

    func context(_ state: JourneyState, _ services: EmbeddedJourneyServices) -> JourneyContext {
        JourneyContext(services: services, display: state.shared["display"], publicURL: publicURL)
    }

    static let suspendedNotFound = #"{"code":401,"reason":"Unauthorized","message":"org.forgerock.openam.auth.nodes.framework.token.SuspendedAuthSessionException: Token not found. It may have expired."}"#

    /// `?suspendedId=ID`: continues a suspended journey, once. Unknown, expired and used
    /// ids all get AM's exact answer.
    private func resume(_ ctx: RequestContext, _ suspendedId: String, realm: String, _ services: EmbeddedJourneyServices) {
        services.take(SuspendedJourney.storeKey(suspendedId, realm: realm)) { [self] r in
            switch r {
            case .failure(let e): unavailable(ctx, e.description)
            case .success(let bytes):
                guard let bytes, let state = try? JSONDecoder().decode(JourneyState.self, from: Data(bytes)), state.realm == realm else {
                    logger.info("resume refused: unknown, expired or used suspendedId", metadata: [
                        "request_id": .string(ctx.requestId), "suspended_id": .string(masked(suspendedId)),
                    ])
                    ctx.respondJSON(status: 401, Self.suspendedNotFound)
                    return
                }
                logger.info("journey resumed", metadata: ["request_id": .string(ctx.requestId), "journey": .string(state.journey),
                                                          "user": .string(state.username ?? "-")])
                engine.resume(state, context: context(state, services)) { [self] in finish(ctx, $0, submittedUser: state.username) }
            }
        }
    }

    /// A journey run for a transaction completes it; the session stays as it was.
    private func completeTransaction(_ ctx: RequestContext, _ state: JourneyState, _ txid: String) {
        let key = TransactionRecord.key(txid)
        let loop = ctx.worker.loop
        store.get(key, on: loop) { [self] r in
            switch r {
            case .failure(let e): unavailable(ctx, e.description)
            case .success(let bytes):
                guard let bytes, var tx = TransactionRecord.decode(bytes), tx.state == .created, tx.subject == state.username else {
                    finish(ctx, .failure(reason: "transaction gone before completion"), submittedUser: state.username)
                    return
                }
                tx.state = .completed
                store.compareAndSwap(key, expected: bytes, new: tx.encoded, ttlMs: nil, on: loop) { [self] r in
                    switch r {
                    case .failure(let e): unavailable(ctx, e.description)
                    case .success(false): finish(ctx, .failure(reason: "transaction changed during completion"), submittedUser: state.username)
                    case .success(true):
                        logger.info("transaction approved", metadata: [
                            "request_id": .string(ctx.requestId), "txid": .string(masked(txid)),
                            "user": .string(tx.subject), "journey": .string(tx.journey),
                        ])
                        // No longer waiting: it stops counting against maxPendingTransactions.
                        store.decrement(TransactionRecord.pendingKey(tx.subject), on: loop) { [logger] r in
                            if case .failure(let e) = r {
                                logger.warning("pending transaction count not lowered", metadata: ["error": .string(e.description)])
                            }
                        }
                        let token = sessions.token(in: ctx.head.headers) ?? ""
                        ctx.respondJSON(status: 200, #"{"tokenId":"\#(JSONText.escape(token))","successUrl":"\#(JSONText.escape(state.shared["goto"] ?? "/"))","realm":"\#(JSONText.escape(state.realm))"}"#)
                    }
                }
            }
        }
    }

    /// The request's subject, from `Authorization: Bearer`, the token header or the cookie.
    func identify(_ ctx: RequestContext, bearer: String?, _ then: @escaping (Subject?) -> Void) {
        guard let token = bearer ?? sessions.token(in: ctx.head.headers) else { then(nil); return }
        sessions.lookup(token, now: now, on: ctx.worker.loop) { [self] r in
            switch r {
            case .failure(let e): unavailable(ctx, e.description)
            case .success(nil): then(nil)
            case .success(let s?):
                then(Subject(uid: s.uid, realm: s.realm, journeys: s.journeys,
                             attributes: users[s.uid]?.attributes ?? [:], token: token))
            }
        }
    }

    // MARK: sessions

    private func sessionAction(_ ctx: RequestContext, realm: String) {
        let action = Query(target: ctx.head.target)["_action"] ?? ""
        var token = sessions.token(in: ctx.head.headers)
        if token == nil, let body = JSONValue.parse(ctx.exchange.body.bytes) {
            token = body["tokenId"]?.stringValue
        }
        switch action {
        case "validate":
            guard let token else { ctx.respondJSON(status: 200, #"{"valid":false}"#); return }
            sessions.lookup(token, now: now, on: ctx.worker.loop) { [self] r in
                switch r {
                case .failure(let e): unavailable(ctx, e.description)
                case .success(let s?) where s.realm == realm:
                    ctx.respondJSON(status: 200, #"{"valid":true,"sessionUid":"\#(Crypto.hex(Array(Crypto.sha256(Array(token.utf8)).prefix(8))))","uid":"\#(JSONText.escape(s.uid))","realm":"\#(JSONText.escape(s.realm))"}"#)
                case .success:
                    ctx.respondJSON(status: 200, #"{"valid":false}"#)
                }
            }
        case "logout":
            guard let token else {
                ctx.respondJSON(status: 401, #"{"code":401,"reason":"Unauthorized","message":"Access Denied"}"#)
                return
            }
            sessions.delete(token, on: ctx.worker.loop) { [self] r in
                switch r {
                case .failure(let e): unavailable(ctx, e.description)
                case .success(true):
                    logger.info("logout", metadata: ["request_id": .string(ctx.requestId), "session": .string(masked(token))])
                    var h = HTTPHeaders()
                    h.add("Set-Cookie", sessions.clearCookie())
                    ctx.respondJSON(status: 200, #"{"result":"Successfully logged out"}"#, headers: h)
                case .success(false):
                    ctx.respondJSON(status: 401, #"{"code":401,"reason":"Unauthorized","message":"Access Denied"}"#)
                }
            }
        default:
            ctx.respondError(status: 400, message: "_action must be validate or logout")
        }
    }
}

/// `/am/...` goes to the authentication service; nothing under it is ever proxied.
final class AuthEndpointsPhase: RequestPhase {
    let auth: AuthService?
    init(auth: AuthService?) { self.auth = auth }

    func handle(_ ctx: RequestContext) {
        let path = ctx.head.path
        guard path == "/am" || path.hasPrefix("/am/") else { ctx.next(); return }
        guard let auth else {
            ctx.respondError(status: 404, message: "the authentication service is not configured (no journeys in the configuration)")
            return
        }
        auth.handle(ctx)
    }
}
