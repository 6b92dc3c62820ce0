import Foundation
import HTTPCore

/// What one `/json/authenticate` request asks for (WIRE.md §4, §5), read from the request
/// alone: parse, then execute. `parse` does every check that needs no store (the cross-site
/// rules, the body, the authId's signature and realm, `authIndexType`/`authIndexValue`,
/// `goto`, the journeys configured); `AuthenticateEndpoint` (in the gateway) carries the
/// command out with the session and store lookups it needs, as `EmbeddedPDP` carries out
/// `PolicyDecider`'s plans.
public enum AuthenticateCommand: Equatable, Sendable {
    /// `authIndexType=service` (the default): the journey named, or the login journey. A session
    /// the request carries names the user.
    case start(JourneyState)
    /// A composite advice naming a journey (`/:NAME`): a step-up, recorded on the request's
    /// session when it carries one.
    case stepUp(JourneyState)
    /// A composite advice naming a transaction: the journey that approves it, for its own
    /// subject's session only (`approval`). `state` holds the realm and `goto`; the journey is
    /// the transaction's, known once the transaction is read.
    case approve(txid: String, JourneyState)
    /// A composite advice naming an approval request (`ApprovalRequest.adviceName`): its approver
    /// journey, for its own subject's session only (`approver`); success approves the request.
    case decideApproval(id: String, JourneyState)
    /// The next step of a journey under way: the state its authId carries (signature, expiry
    /// and realm checked) and the callbacks submitted.
    case proceed(JourneyState, callbacks: [SubmittedCallback])
    /// `?suspendedId=ID`: continues a suspended journey, once (`resumed`).
    case resume(suspendedId: String)

    /// Why the request is refused before anything is looked up.
    public enum Refusal: Error, Equatable, Sendable {
        /// The gateway's own failures (400, 403, 415).
        case badRequest(String)
        case forbidden(String)
        case unsupportedMediaType(String)
        /// The authId has expired: AM's 401 "Session has timed out".
        case timedOut
        /// The authId is forged or belongs to another realm: AM's 401 with this message.
        case rejected(String)
    }

    /// What parsing needs of the configuration.
    public struct Settings: Sendable {
        public let gotoPolicy: GotoPolicy
        public let cors: CORSConfig
        public let loginJourney: String
        /// Reads authIds, and knows the journeys configured.
        public let engine: JourneyEngine

        public init(gotoPolicy: GotoPolicy, cors: CORSConfig, loginJourney: String, engine: JourneyEngine) {
            self.gotoPolicy = gotoPolicy
            self.cors = cors
            self.loginJourney = loginJourney
            self.engine = engine
        }

        func knows(_ journey: String) -> Bool { engine.journeys[journey] != nil }
    }

    /// The request as a command, in the order the checks have always been made: cross-site
    /// rules, the body, then an authId (continue), a `suspendedId` (resume), or a new journey.
    /// `now` (seconds) checks an authId's expiry; `issued` holds the authIds this worker signed
    /// (`JourneyEngine.decode`). The method is checked before (POST only, `AuthEndpointsPhase`).
    public static func parse(_ head: RequestHead, body raw: [UInt8], realm: String, _ settings: Settings,
                             now: Int, issued: IssuedAuthIds? = nil) -> Result<AuthenticateCommand, Refusal> {
        if let refusal = crossSiteRefusal(head.headers, body: raw, gotoPolicy: settings.gotoPolicy, cors: settings.cors) {
            return .failure(refusal)
        }
        guard let body = body(raw) else { return .failure(.badRequest("the request body is not a JSON object")) }
        if let authId = body["authId"]?.stringValue {
            return proceed(authId: authId, callbacks: body["callbacks"], realm: realm, settings, now: now, issued: issued)
        }
        // The query only matters to a request that continues no journey (an SDK posts each
        // step to the URL that started it, advice and all).
        let query = Query(target: head.target)
        if let suspendedId = query["suspendedId"] { return .success(.resume(suspendedId: suspendedId)) }
        return start(query, realm: realm, settings)
    }

    /// Login CSRF: a form on another site can post `text/plain`, a form or multipart without
    /// a preflight, and the answer would set the session cookie. So a body must be JSON (which
    /// a cross-site page cannot send without CORS), and a browser's `Origin` must be the
    /// gateway's own or one that `cors` allows. An empty body with no Content-Type stays
    /// accepted: the Android SDK starts every journey that way.
    static func crossSiteRefusal(_ headers: HTTPHeaders, body: [UInt8], gotoPolicy: GotoPolicy, cors: CORSConfig) -> Refusal? {
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

    private static func proceed(authId: String, callbacks: JSONValue?, realm: String, _ settings: Settings,
                                now: Int, issued: IssuedAuthIds?) -> Result<AuthenticateCommand, Refusal> {
        let state: JourneyState
        switch settings.engine.decode(authId: authId, now: now, issued: issued) {
        case .success(let s): state = s
        case .failure(.timedOut): return .failure(.timedOut)
        case .failure(.rejected(let why)): return .failure(.rejected(why))
        case .failure: return .failure(.rejected("invalid authId"))  // decode fails with the two above only
        }
        guard state.realm == realm else { return .failure(.rejected("the authId belongs to another realm")) }
        guard let submitted = SubmittedCallback.parse(callbacks) else {
            return .failure(.badRequest("'callbacks' must be the array of callbacks of the current step"))
        }
        return .success(.proceed(state, callbacks: submitted))
    }

    /// A new journey: `authIndexType=service` (a journey by name) or `composite_advice`.
    private static func start(_ query: Query, realm: String, _ settings: Settings) -> Result<AuthenticateCommand, Refusal> {
        var initial = JourneyState(realm: realm, journey: settings.loginJourney)
        if let goto = query["goto"] {
            guard let ok = settings.gotoPolicy.validate(goto) else {
                return .failure(.badRequest("goto '\(goto)' is not on this gateway's origin (\(settings.gotoPolicy.origin.origin))"))
            }
            initial.shared["goto"] = ok
        }
        func named(_ name: String) -> JourneyState? {
            guard settings.knows(name) else { return nil }
            var state = initial
            state.journey = name
            return state
        }
        switch query["authIndexType"] ?? "service" {
        case "service":
            let name = query["authIndexValue"] ?? settings.loginJourney
            guard let state = named(name) else { return .failure(.badRequest("no journey named '\(name)'")) }
            return .success(.start(state))
        case "composite_advice":
            guard let raw = query["authIndexValue"], let advices = Advices.parse(xmlOrBase64: raw) else {
                return .failure(.badRequest("authIndexValue must be advice XML (URL-encoded or base64url)"))
            }
            // A transaction's journey completes that transaction; `/:NAME` runs NAME.
            if let txid = advices[Advices.transaction]?.first { return .success(.approve(txid: txid, initial)) }
            if let id = advices[ApprovalRequest.adviceName]?.first { return .success(.decideApproval(id: id, initial)) }
            guard let tree = advices[Advices.authenticateToService]?.first else {
                return .failure(.badRequest("the advice names neither a transaction nor a journey"))
            }
            let name = String(tree.split(separator: ":", maxSplits: 1).last ?? "")
            guard let state = named(name) else { return .failure(.badRequest("no journey named '\(name)'")) }
            return .success(.stepUp(state))
        case let other:
            return .failure(.badRequest("authIndexType '\(other)' is not supported (use service or composite_advice)"))
        }
    }

    /// Why a transaction's approval journey does not start, once the transaction is read.
    public enum ApprovalRefusal: Error, Equatable, Sendable {
        /// 401 (AM's form): unknown, expired or approved already, or another user's.
        case refused(TransactionRecord.ApprovalRefusal)
        /// 400: the transaction names a journey that is no longer configured.
        case journeyNotConfigured(String)

        public var message: String {
            switch self {
            case .refused(let r): return r.message
            case .journeyNotConfigured(let name): return "the transaction's journey '\(name)' is not configured"
            }
        }
    }

    /// The state of the journey that approves `txid` (`record` as read, nil if absent or
    /// unreadable) for the session of `uid`, whose store key (never its token: an authId is
    /// signed, not encrypted) lets the journey's end find it. `initial` is the command's state.
    public static func approval(_ initial: JourneyState, txid: String, record: TransactionRecord?, uid: String, sessionKey: String,
                                _ settings: Settings, now: Int) -> Result<JourneyState, ApprovalRefusal> {
        guard let tx = record else { return .failure(.refused(.gone)) }
        if let refusal = tx.approvalRefusal(by: uid, realm: initial.realm, now: now) { return .failure(.refused(refusal)) }
        guard settings.knows(tx.journey) else { return .failure(.journeyNotConfigured(tx.journey)) }
        var state = initial
        state.journey = tx.journey
        state.username = uid
        state.txid = txid
        state.shared[JourneyState.approvalSessionKey] = sessionKey
        if let d = tx.display { state.shared["display"] = d }
        return .success(state)
    }

    /// The state of the approver journey that approves request `request` (as read, nil if
    /// absent) for the session of `uid` (store key `sessionKey`): only the request's own user,
    /// while it is pending and not expired; the journey must still be configured.
    public static func approver(_ initial: JourneyState, id: String, request: ApprovalRequest?, uid: String, sessionKey: String,
                                _ settings: Settings, nowMs: Int64) -> Result<JourneyState, ApprovalRequest.Refusal> {
        guard let request, request.id == id else { return .failure(.notFound) }
        guard request.subject == uid else { return .failure(.notYours) }
        guard request.state == .pending else { return .failure(.alreadyDecided(request.state)) }
        guard !request.isExpired(nowMs: nowMs) else { return .failure(.expired) }
        guard settings.knows(request.approverJourney) else { return .failure(.notFound) }
        var state = initial
        state.journey = request.approverJourney
        state.username = uid
        state.shared[JourneyState.approvalSessionKey] = sessionKey
        state.shared[JourneyState.decidesApprovalKey] = id
        state.shared["display"] = request.displayText + "\n\nCode: " + request.bindingCode
        return .success(state)
    }

    /// The state of a step-up journey, with the request's session when there is one: its user,
    /// and its store key, where the journey's end records the step-up.
    public static func stepUpState(_ state: JourneyState, session: (uid: String, key: String)?) -> JourneyState {
        var s = state
        s.username = session?.uid
        if let session { s.shared[JourneyState.stepUpSessionKey] = session.key }
        return s
    }

    /// A suspended journey's state as the store kept it (`SuspendedJourney.storeKey`), or nil
    /// when there is none to resume here: unknown, expired, used, or another realm's.
    public static func resumed(_ bytes: [UInt8]?, realm: String) -> JourneyState? {
        guard let bytes, let state = try? JSONDecoder().decode(JourneyState.self, from: Data(bytes)), state.realm == realm else {
            return nil
        }
        return state
    }
}
