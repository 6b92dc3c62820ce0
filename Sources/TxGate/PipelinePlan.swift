import TxGateCore

/// A named place in the request pipeline (nginx's phases): the phases a configuration gets are
/// a list of these, in this order.
enum PhaseSlot: String, CaseIterable, Sendable {
    /// One `Host`, one normalized path (`CanonicalRequestPhase`).
    case canonicalRequest
    /// `/-/authz`: the original request of a proxy in front replaces the request's own.
    case forwardAuth
    /// `/-/metrics`.
    case metricsEndpoint
    /// `/-/health`, `/-/ready`, and 404 for anything else under `/-/`.
    case gatewayEndpoints
    /// Preflights answered, CORS headers added (with `cors.allowedOrigins`).
    case cors
    /// The body of an `/am` request, read before the authentication service answers.
    case readBodyForAuthEndpoints
    /// `/am/...`: journeys, sessions, transactions, policies, the login page, OAuth 2.0.
    case authEndpoints
    /// `_txid`/`X-TxID` taken from the request (WIRE.md §3c).
    case retryParameters
    /// Who is asking: an access token or a session.
    case identify
    /// A browser back from an approval: its parked request takes the GET's place.
    case replay
    /// The body, read before deciding where the applicable transaction binds it.
    case readBodyForDecision
    /// The decision, from the cache or the policy decision point.
    case decide
    /// Advices become a challenge (SSOADVICE, RFC 9470, the login redirect).
    case challenge
    /// `/-/authz` allowed: 200 instead of proxying.
    case forwardAuthAnswer
    /// The headers that go upstream.
    case upstreamRequest
    /// `Txn-Token` on what goes upstream (`txnTokens.enabled`).
    case txnToken
    /// The body, read before it goes upstream.
    case readBodyForUpstream
    /// The upstream's answer, streamed back.
    case proxy
}

/// Which phases a configuration gets, decided in one place from the configuration alone, so
/// that each kind of configuration can be checked without starting anything (`Worker.phases`
/// builds the phases of a plan; `txgate check --verbose` could print it).
struct PipelinePlan: Equatable, Sendable, CustomStringConvertible {
    /// Who decides on proxied requests.
    enum Decisions: Equatable, Sendable {
        /// No policy decision point: every request is proxied as it is.
        case none
        /// The embedded engine over this gateway's store (policies and journeys).
        case embedded
        /// A remote AM (`pdp.type: "am"`).
        case remote
    }

    let decisions: Decisions
    /// The OAuth 2.0 provider: its endpoints under `/am/oauth2/`, its access tokens as subjects.
    let oauth: Bool
    /// Other issuers' access tokens as subjects (`bearer.issuers`).
    let externalIssuers: Bool
    let slots: [PhaseSlot]

    init(_ config: GatewayConfig) {
        let authService = !config.journeys.isEmpty
        if authService && config.policies != nil {
            decisions = .embedded
        } else if config.pdp.type == .am && config.pdp.url != nil {
            decisions = .remote
        } else {
            decisions = .none
        }
        oauth = authService && config.oauth2 != nil
        externalIssuers = decisions != .none && !config.bearer.issuers.isEmpty
        var slots: [PhaseSlot] = [.canonicalRequest, .forwardAuth, .metricsEndpoint, .gatewayEndpoints]
        if !config.cors.allowedOrigins.isEmpty { slots.append(.cors) }
        slots += [.readBodyForAuthEndpoints, .authEndpoints]
        if decisions != .none {
            slots += [.retryParameters, .identify]
            // Browsers' requests wait for approval in this gateway's own store.
            if decisions == .embedded { slots.append(.replay) }
            slots += [.readBodyForDecision, .decide, .challenge]
        }
        slots += [.forwardAuthAnswer, .upstreamRequest]
        if authService && config.txnTokens.enabled { slots.append(.txnToken) }
        slots += [.readBodyForUpstream, .proxy]
        self.slots = slots
    }

    var description: String { slots.map(\.rawValue).joined(separator: " → ") }
}
