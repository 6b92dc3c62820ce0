import EventHTTP
import HTTPCore
import TxGateCore

/// AM's `/json/authenticate` (WIRE.md §4, §5) on one worker: a thin executor of
/// `AuthenticateCommand`, which reads the request (start a journey, step up, approve a
/// transaction, continue, resume); this does the session and store lookups a command needs,
/// runs the journey, and hands its result to `JourneyCompletion`.
final class AuthenticateEndpoint {
    private let auth: AuthService
    private let loop: EventLoop
    private let services: EmbeddedJourneyServices
    private let identifier: SubjectIdentifier
    private let completion: JourneyCompletion
    private let settings: AuthenticateCommand.Settings
    private let started = StartedRecords<JourneyCompletion.Started>()
    /// The authIds this worker signed, so that their answers skip the signature check.
    private let issued = IssuedAuthIds()

    init(auth: AuthService, loop: EventLoop) {
        self.auth = auth
        self.loop = loop
        services = auth.services(on: loop)
        identifier = auth.identifier(on: loop)
        completion = JourneyCompletion(auth: auth, loop: loop, started: started)
        settings = AuthenticateCommand.Settings(gotoPolicy: auth.gotoPolicy, cors: auth.config.cors,
                                                loginJourney: auth.config.loginJourney, engine: auth.engine)
    }

    private var engine: JourneyEngine { auth.engine }

    func handle(_ call: EndpointCall, realm: String) {
        switch AuthenticateCommand.parse(call.head, body: call.exchange.body.bytes, realm: realm, settings, now: auth.now, issued: issued) {
        case .failure(let refusal):
            refuse(call, refusal)
        case .success(.start(let state)):
            // A journey started with a session (a step-up) knows its user already.
            withSession(call) { [self] session in
                var state = state
                state.username = session?.uid
                run(call, state)
            }
        case .success(.stepUp(let state)):
            withSession(call) { [self] session in
                run(call, AuthenticateCommand.stepUpState(state, session: session.map { ($0.uid, SessionManager.key($0.token)) }))
            }
        case .success(.approve(let txid, let state)):
            withSession(call) { [self] session in
                guard let session else {
                    call.respondJSON(status: 401, AuthService.unauthorized("a session is needed to approve a transaction"))
                    return
                }
                approve(call, txid, session: session, state)
            }
        case .success(.decideApproval(let id, let state)):
            call.ctx.approvalId = id
            withSession(call) { [self] session in
                guard let session else {
                    call.respondJSON(status: 401, AuthService.unauthorized("a session is needed to approve a request"))
                    return
                }
                decideApproval(call, id, session: session, state)
            }
        case .success(.proceed(let state, let submitted)):
            call.ctx.approvalId = state.shared[JourneyState.decidesApprovalKey] ?? state.shared["approvalId"]
            let hint = submitted.first(where: { $0.type == "NameCallback" })?.text
            engine.proceed(state, submitted: submitted, context: auth.context(state, services, call, issued: issued)) { [completion, auth] result in
                auth.metrics.journey(state.journey, result)
                completion.finish(call, result, submittedUser: state.username ?? hint, journey: state)
            }
        case .success(.resume(let suspendedId)):
            resume(call, suspendedId, realm: realm)
        }
    }

    private func refuse(_ call: EndpointCall, _ refusal: AuthenticateCommand.Refusal) {
        switch refusal {
        case .badRequest(let message): call.fail(.badRequest(message))
        case .forbidden(let message): call.fail(.forbidden(message))
        case .unsupportedMediaType(let message): call.fail(.unsupportedMediaType(message))
        case .timedOut: completion.finish(call, .timedOut, submittedUser: nil)
        case .rejected(let why): completion.finish(call, .rejected(why), submittedUser: nil)
        }
    }

    private func run(_ call: EndpointCall, _ state: JourneyState) {
        auth.metrics.journeyStarted(state.journey)
        engine.start(state, context: auth.context(state, services, call, issued: issued)) { [completion, auth] in
            auth.metrics.journey(state.journey, $0)
            completion.finish(call, $0, submittedUser: nil, journey: state)
        }
    }

    /// Looks up the request's session, if it carries one. Store failures answer 503.
    private func withSession(_ call: EndpointCall, _ then: @escaping (Subject?) -> Void) {
        identifier.identify(token: identifier.sessionToken(in: call.head.headers)) { r in
            switch r {
            case .success(let s): then(s)
            case .failure(let e): call.fail(.storeUnavailable(e.description))
            }
        }
    }

    /// Starts the journey that approves transaction `txid`, for its own subject only.
    private func approve(_ call: EndpointCall, _ txid: String, session: Subject, _ initial: JourneyState) {
        let key = TransactionRecord.key(txid)
        auth.store.get(key, on: loop) { [self] r in
            let bytes: [UInt8]?
            switch r {
            case .failure(let e): return call.fail(.storeUnavailable(e.description))
            case .success(let b): bytes = b
            }
            let record = bytes.flatMap(TransactionRecord.decode)
            switch AuthenticateCommand.approval(initial, txid: txid, record: record, uid: session.uid,
                                                sessionKey: SessionManager.key(session.token), settings, now: auth.now) {
            case .success(let state):
                // What the journey's completion swaps from, if it completes on this worker.
                if let bytes, let record { started.remember(key, (bytes, record)) }
                run(call, state)
            case .failure(.refused(let refusal)):
                if refusal == .anotherSubject {
                    auth.logger.warning("transaction approval refused: another user's session", metadata: [
                        "request_id": .string(call.requestId), "txid": .string(masked(txid)), "user": .string(session.uid),
                    ])
                }
                call.respondJSON(status: 401, AuthService.unauthorized(refusal.message))
            case .failure(let other):
                call.fail(.badRequest(other.message))
            }
        }
    }

    /// Starts the approver journey of approval request `id`, for its own subject only; its
    /// success approves the request (`JourneyCompletion`).
    private func decideApproval(_ call: EndpointCall, _ id: String, session: Subject, _ initial: JourneyState) {
        guard ApprovalsEndpoint.isRequestId(id) else {
            call.respondJSON(status: 404, ApprovalsEndpoint.refusalBody(.notFound))
            return
        }
        services.readApproval(id) { [self] r in
            let request: ApprovalRequest?
            switch r {
            case .failure(let e): return call.fail(.storeUnavailable(e.description))
            case .success(let q): request = q
            }
            switch AuthenticateCommand.approver(initial, id: id, request: request, uid: session.uid,
                                                sessionKey: SessionManager.key(session.token), settings, nowMs: auth.clock.nowMs()) {
            case .success(let state):
                run(call, state)
            case .failure(let refusal):
                if refusal == .notYours {
                    auth.logger.warning("approval request refused: another user's session", metadata: [
                        "request_id": .string(call.requestId), "approval": .string(masked(id)), "user": .string(session.uid),
                    ])
                }
                call.respondJSON(status: ApprovalsEndpoint.status(refusal), ApprovalsEndpoint.refusalBody(refusal))
            }
        }
    }

    static let suspendedNotFound = AuthService.unauthorized(
        "org.forgerock.openam.auth.nodes.framework.token.SuspendedAuthSessionException: Token not found. It may have expired.")

    /// `?suspendedId=ID`: continues a suspended journey, once. Unknown, expired and used
    /// ids all get AM's exact answer.
    private func resume(_ call: EndpointCall, _ suspendedId: String, realm: String) {
        services.take(SuspendedJourney.storeKey(suspendedId, realm: realm)) { [self] r in
            let bytes: [UInt8]?
            switch r {
            case .failure(let e): return call.fail(.storeUnavailable(e.description))
            case .success(let b): bytes = b
            }
            guard let state = AuthenticateCommand.resumed(bytes, realm: realm) else {
                auth.logger.info("resume refused: unknown, expired or used suspendedId", metadata: [
                    "request_id": .string(call.requestId), "suspended_id": .string(masked(suspendedId)),
                ])
                call.respondJSON(status: 401, Self.suspendedNotFound)
                return
            }
            auth.logger.info("journey resumed", metadata: ["request_id": .string(call.requestId), "journey": .string(state.journey),
                                                           "user": .string(state.username ?? "-")])
            engine.resume(state, context: auth.context(state, services, call, issued: issued)) { [completion, auth] in
                auth.metrics.journey(state.journey, $0)
                completion.finish(call, $0, submittedUser: state.username, journey: state)
            }
        }
    }
}
