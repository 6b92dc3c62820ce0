import EventHTTP
import Foundation
import HTTPCore
import Logging
import TxGateCore
import TxGateCrypto

/// The embedded authentication service's shared parts, built once and used by every worker's
/// endpoints (`AuthenticateEndpoint`, `SessionsEndpoint`, `PoliciesEndpoint`, `LoginPage`).
final class AuthService: Sendable {
    let engine: JourneyEngine
    let sessions: SessionManager
    let store: Store
    let config: GatewayConfig
    let users: [String: UserRecord]
    let verifier = PasswordVerifier()
    let gotoPolicy: GotoPolicy
    /// The login page, branded, with its logo read once.
    let loginPageView: LoginPageView
    let publicURL: String
    /// Delivers emails for the email nodes; nil when `email` is not configured.
    let emailDelivery: EmailDelivery?
    /// Where the `webhook` channel of approval requests posts; nil when not configured.
    let webhook: WebhookTarget?
    let clock: WallClock
    /// Keys the hashes of emailed codes: derived from the signing key, so every instance that
    /// shares journeys shares it, without using one key for two purposes.
    let codeKey: [UInt8]
    let logger: Logger
    let metrics: GatewayMetrics
    /// The relying party and settings of the passkey nodes; nil without `webauthn`.
    let passkeys: (WebAuthn.RelyingParty, WebAuthnConfig)?

    init(config: GatewayConfig, store: Store, signingKey: [UInt8], emailDelivery: EmailDelivery?, webhook: WebhookTarget? = nil,
         clock: WallClock = .system, logger: Logger, metrics: GatewayMetrics) {
        self.webhook = webhook
        self.metrics = metrics
        self.config = config
        self.store = store
        self.emailDelivery = emailDelivery
        self.clock = clock
        self.logger = logger
        codeKey = Crypto.hmacSHA256(key: signingKey, data: Array("txgate email one-time codes".utf8))
        users = Dictionary(config.users.map { ($0.username, $0) }, uniquingKeysWith: { a, _ in a })
        engine = JourneyEngine(journeys: JourneyEngine.build(config.journeys).journeys, signingKey: signingKey,
                               authIdTtlS: config.security.authIdTtlS)
        let publicURL = config.effectivePublicURL
        sessions = SessionManager(store: store, config: config.session, secureCookie: publicURL.isTLS)
        gotoPolicy = GotoPolicy(origin: publicURL)
        self.publicURL = publicURL.description
        passkeys = config.webauthn.flatMap { c in c.relyingParty(publicURL: publicURL).map { ($0, c) } }
        let logo = config.loginPage.logoFile.flatMap { FileManager.default.contents(atPath: $0) }.map { [UInt8]($0) }
        loginPageView = LoginPageView(config: config.loginPage, logo: logo,
                                      magicLinkJourney: LoginPageView.magicLinkJourney(in: config.journeys))
    }

    var now: Int { clock.now }

    /// The journey nodes' I/O for one worker's loop.
    func services(on loop: EventLoop) -> EmbeddedJourneyServices {
        EmbeddedJourneyServices(auth: self, loop: loop)
    }

    /// What a journey step sees: what is approved, where links point, who asks and in which session.
    /// `issued`: where the engine remembers the authIds it signs (the worker's, `IssuedAuthIds`).
    func context(_ state: JourneyState, _ services: EmbeddedJourneyServices, _ ctx: EndpointCall,
                 issued: IssuedAuthIds) -> JourneyContext {
        JourneyContext(services: services, display: state.shared["display"], publicURL: publicURL, source: ctx.client.address,
                       session: state.shared[JourneyState.stepUpSessionKey] ?? state.shared[JourneyState.approvalSessionKey],
                       issued: issued)
    }

    func identifier(on loop: EventLoop) -> SubjectIdentifier {
        SubjectIdentifier(sessions: sessions, users: users, loop: loop, clock: clock, sessionCache: sessions.cache.shard(for: loop))
    }

    /// `/am/json/realms/root[/realms/NAME]/<endpoint>` → (realm, endpoint); also `/am/json/<endpoint>`.
    static func route(_ path: String) -> (realm: String, endpoint: String)? {
        let all = path.split(byte: UInt8(ascii: "/"))
        guard all.count >= 3 else { return nil }
        let parts = all[2...]  // after "am", "json"
        let p = parts.startIndex
        if parts.count == 1 { return ("/", String(parts[p])) }
        guard parts.count >= 3, parts[p] == "realms", parts[p + 1] == "root" else { return nil }
        if parts.count == 3 { return ("/", String(parts[p + 2])) }
        guard parts.count == 5, parts[p + 2] == "realms" else { return nil }
        return ("/" + parts[p + 3], String(parts[p + 4]))
    }

    /// AM's 401 answers, in the gateway's error shape.
    static func unauthorized(_ message: String, members: String = "") -> String {
        ErrorBody.text(status: 401, message: message, members: members)
    }

    static let accessDenied = unauthorized("Access Denied")
}

/// Finds the subject behind a session token, on one worker's loop.
///
/// An object each user of it on a loop makes: a lookup's callbacks capture it, and a struct
/// copied into them retained each of its members, most of them objects every worker shares
/// (the session manager, the users).
final class SubjectIdentifier {
    let sessions: SessionManager
    let users: [String: UserRecord]
    let loop: EventLoop
    let clock: WallClock
    /// `loop`'s table of the sessions read in the last second.
    let sessionCache: SessionCache.Shard

    init(sessions: SessionManager, users: [String: UserRecord], loop: EventLoop, clock: WallClock, sessionCache: SessionCache.Shard) {
        self.sessions = sessions
        self.users = users
        self.loop = loop
        self.clock = clock
        self.sessionCache = sessionCache
    }

    /// The session token a request carries (token header or cookie).
    func sessionToken(in headers: HTTPHeaders) -> String? { sessions.token(in: headers) }

    /// The live session for `token` as a subject; nil for no token or no live session.
    func identify(token: String?, _ done: @escaping (StoreResult<Subject?>) -> Void) {
        guard let token else { done(.success(nil)); return }
        sessions.lookup(token, now: clock.now, on: loop, shard: sessionCache) { [self] r in
            done(r.map { s in s.map { subject(of: $0, token: token) } })
        }
    }

    func subject(of s: Session, token: String) -> Subject {
        Subject(uid: s.uid, realm: s.realm, journeys: s.journeys, attributes: users[s.uid]?.attributes ?? [:],
                token: token, authTime: s.lastAuthentication)
    }
}
