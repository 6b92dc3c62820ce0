import EventHTTP
import Foundation
import HTTPCore
import TxGateCore

/// AM's `/json/authenticate` (WIRE.md §4, §5) on one worker: starts a journey (by name, by
/// advice, or resuming a suspended one) or continues it with the submitted callbacks.
final class AuthenticateEndpoint {
    private let auth: AuthService
    private let loop: EventLoop
    private let services: EmbeddedJourneyServices
    private let identifier: SubjectIdentifier
    private let completion: JourneyCompletion

    init(auth: AuthService, loop: EventLoop) {
        self.auth = auth
        self.loop = loop
        services = auth.services(on: loop)
        identifier = auth.identifier(on: loop)
        completion = JourneyCompletion(auth: auth, loop: loop)
    }

    private var engine: JourneyEngine { auth.engine }

    func handle(_ ctx: EndpointCall, realm: String) {
        if let refusal = Self.crossSiteRefusal(ctx.head.headers, body: ctx.exchange.body.bytes, gotoPolicy: auth.gotoPolicy,
                                             cors: auth.config.cors) {
            ctx.fail(refusal)
            return
        }
        guard let body = Self.body(ctx.exchange.body.bytes) else {
            ctx.fail(.badRequest("the request body is not a JSON object"))
            return
        }
        let query = Query(target: ctx.head.target)
        if let authId = body["authId"]?.stringValue {
            proceed(ctx, authId: authId, callbacks: body["callbacks"], realm: realm)
        } else if let suspendedId = query["suspendedId"] {
            resume(ctx, suspendedId, realm: realm)
        } else {
            start(ctx, query, realm: realm)
        }
    }

    /// Login CSRF: a form on another site can post `text/plain`, a form or multipart without
    /// a preflight, and the answer would set the session cookie. So a body must be JSON (which
    /// a cross-site page cannot send without CORS), and a browser's `Origin` must be the
    /// gateway's own or one that `cors` allows. An empty body with no Content-Type stays accepted: the Android SDK starts
    /// every journey that way.
    static func crossSiteRefusal(_ headers: HTTPHeaders, body: [UInt8], gotoPolicy: GotoPolicy, cors: CORSConfig) -> RequestFailure? {
        if let origin = headers.first("Origin"), !gotoPolicy.origin.isSameOrigin(origin), !cors.allows(origin) {
            return .forbidden("requests from the origin '\(origin)' may not authenticate here")
        }
        guard !isBlank(body) else { return nil }
        guard let type = headers.first("Content-Type"), MediaType(type)?.isJSON == true else {
            return .unsupportedMediaType("the body must be JSON (Content-Type: application/json)")
        }
        return nil
    }

    static func isBlank(_ raw: [UInt8]) -> Bool {
        raw.allSatisfy { $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }
    }

    /// An empty body (the Android SDK starts every journey that way) or a JSON object.
    static func body(_ raw: [UInt8]) -> JSONValue? {
        if isBlank(raw) { return .object([:]) }
        guard let b = JSONValue.parse(raw), b.objectValue != nil else { return nil }
        return b
    }

    /// The next step of a journey under way.
    private func proceed(_ ctx: EndpointCall, authId: String, callbacks: JSONValue?, realm: String) {
        let state: JourneyState
        switch engine.decode(authId: authId, now: auth.now) {
        case .failure(let r):
            completion.finish(ctx, r, submittedUser: nil)
            return
        case .success(let s): state = s
        }
        guard state.realm == realm else {
            completion.finish(ctx, .rejected("the authId belongs to another realm"), submittedUser: nil)
            return
        }
        guard let submitted = SubmittedCallback.parse(callbacks) else {
            ctx.fail(.badRequest("'callbacks' must be the array of callbacks of the current step"))
            return
        }
        let hint = submitted.first(where: { $0.type == "NameCallback" })?.text
        engine.proceed(state, submitted: submitted, context: auth.context(state, services, ctx)) { [completion, auth] result in
            auth.metrics.journey(state.journey, result)
            completion.finish(ctx, result, submittedUser: state.username ?? hint, journey: state)
        }
    }

    /// A new journey: `authIndexType=service` (a journey by name) or `composite_advice`.
    private func start(_ ctx: EndpointCall, _ query: Query, realm: String) {
        var initial = JourneyState(realm: realm, journey: auth.config.loginJourney)
        if let goto = query["goto"] {
            guard let ok = auth.gotoPolicy.validate(goto) else {
                ctx.fail(.badRequest("goto '\(goto)' is not on this gateway's origin (\(auth.gotoPolicy.origin.origin))"))
                return
            }
            initial.shared["goto"] = ok
        }
        switch query["authIndexType"] ?? "service" {
        case "service":
            let name = query["authIndexValue"] ?? auth.config.loginJourney
            guard engine.journeys[name] != nil else {
                ctx.fail(.badRequest("no journey named '\(name)'"))
                return
            }
            initial.journey = name
            // A journey started with a session (a step-up) knows its user already.
            withSession(ctx) { [self] session in
                initial.username = session?.uid
                run(ctx, initial)
            }
        case "composite_advice":
            guard let raw = query["authIndexValue"], let advices = Advices.parse(xmlOrBase64: raw) else {
                ctx.fail(.badRequest("authIndexValue must be advice XML (URL-encoded or base64url)"))
                return
            }
            compositeAdvice(ctx, advices, initial)
        case let other:
            ctx.fail(.badRequest("authIndexType '\(other)' is not supported (use service or composite_advice)"))
        }
    }

    private func run(_ ctx: EndpointCall, _ state: JourneyState) {
        auth.metrics.journeyStarted(state.journey)
        engine.start(state, context: auth.context(state, services, ctx)) { [completion, auth] in
            auth.metrics.journey(state.journey, $0)
            completion.finish(ctx, $0, submittedUser: nil, journey: state)
        }
    }

    /// Looks up the request's session, if it carries one. Store failures answer 503.
    private func withSession(_ ctx: EndpointCall, _ then: @escaping (Subject?) -> Void) {
        identifier.identify(token: identifier.sessionToken(in: ctx.head.headers)) { r in
            switch r {
            case .success(let s): then(s)
            case .failure(let e): ctx.fail(.storeUnavailable(e.description))
            }
        }
    }

    /// The journey an advice asks for. A transaction's journey completes that transaction
    /// and needs the session of the transaction's own subject; `/:NAME` runs NAME.
    private func compositeAdvice(_ ctx: EndpointCall, _ advices: Advices, _ initial: JourneyState) {
        if let txid = advices[Advices.transaction]?.first {
            withSession(ctx) { [self] session in
                guard let session else {
                    ctx.respondJSON(status: 401, AuthService.unauthorized("a session is needed to approve a transaction"))
                    return
                }
                approve(ctx, txid, session: session, initial)
            }
        } else if let tree = advices[Advices.authenticateToService]?.first {
            let name = String(tree.split(separator: ":", maxSplits: 1).last ?? "")
            guard engine.journeys[name] != nil else {
                ctx.fail(.badRequest("no journey named '\(name)'"))
                return
            }
            var state = initial
            state.journey = name
            withSession(ctx) { [self] session in
                state.username = session?.uid
                // The session's store key, not its token: an authId is signed, not encrypted.
                if let session { state.shared[JourneyState.stepUpSessionKey] = SessionManager.key(session.token) }
                run(ctx, state)
            }
        } else {
            ctx.fail(.badRequest("the advice names neither a transaction nor a journey"))
        }
    }

    /// Starts the journey that approves transaction `txid`, for its own subject only.
    private func approve(_ ctx: EndpointCall, _ txid: String, session: Subject, _ initial: JourneyState) {
        auth.store.get(TransactionRecord.key(txid), on: loop) { [self] r in
            guard case .success(let bytes) = r else {
                if case .failure(let e) = r { ctx.fail(.storeUnavailable(e.description)) }
                return
            }
            guard let tx = bytes.flatMap(TransactionRecord.decode) else {
                ctx.respondJSON(status: 401, AuthService.unauthorized(TransactionRecord.ApprovalRefusal.gone.message))
                return
            }
            if let refusal = tx.approvalRefusal(by: session.uid, realm: initial.realm, now: auth.now) {
                if refusal == .anotherSubject {
                    auth.logger.warning("transaction approval refused: another user's session", metadata: [
                        "request_id": .string(ctx.requestId), "txid": .string(masked(txid)), "user": .string(session.uid),
                    ])
                }
                ctx.respondJSON(status: 401, AuthService.unauthorized(refusal.message))
                return
            }
            guard engine.journeys[tx.journey] != nil else {
                ctx.fail(.badRequest("the transaction's journey '\(tx.journey)' is not configured"))
                return
            }
            var state = initial
            state.journey = tx.journey
            state.username = session.uid
            state.txid = txid
            state.shared[JourneyState.approvalSessionKey] = SessionManager.key(session.token)
            if let d = tx.display { state.shared["display"] = d }
            run(ctx, state)
        }
    }

    static let suspendedNotFound = AuthService.unauthorized(
        "org.forgerock.openam.auth.nodes.framework.token.SuspendedAuthSessionException: Token not found. It may have expired.")

    /// `?suspendedId=ID`: continues a suspended journey, once. Unknown, expired and used
    /// ids all get AM's exact answer.
    private func resume(_ ctx: EndpointCall, _ suspendedId: String, realm: String) {
        services.take(SuspendedJourney.storeKey(suspendedId, realm: realm)) { [self] r in
            switch r {
            case .failure(let e): ctx.fail(.storeUnavailable(e.description))
            case .success(let bytes):
                guard let bytes, let state = try? JSONDecoder().decode(JourneyState.self, from: Data(bytes)), state.realm == realm else {
                    auth.logger.info("resume refused: unknown, expired or used suspendedId", metadata: [
                        "request_id": .string(ctx.requestId), "suspended_id": .string(masked(suspendedId)),
                    ])
                    ctx.respondJSON(status: 401, Self.suspendedNotFound)
                    return
                }
                auth.logger.info("journey resumed", metadata: ["request_id": .string(ctx.requestId), "journey": .string(state.journey),
                                                               "user": .string(state.username ?? "-")])
                engine.resume(state, context: auth.context(state, services, ctx)) { [completion, auth] in
                    auth.metrics.journey(state.journey, $0)
                    completion.finish(ctx, $0, submittedUser: state.username, journey: state)
                }
            }
        }
    }
}
