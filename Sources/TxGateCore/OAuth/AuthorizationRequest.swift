/// A validated `authorize` request (RFC 6749 §4.1.1, RFC 7636, OIDC Core §3.1.2.1), and the
/// RFC 6749 §4.1.2.1 rule for errors: before the client and its redirect URI are known good,
/// the error is shown to the user (never redirected); after, it goes back to the client.
public struct AuthorizationRequest: Equatable, Sendable {
    public var clientId: String
    public var redirectUri: String
    public var scope: [String]
    public var state: String?
    public var nonce: String?
    public var codeChallenge: String
    /// `none`, `login` or nil.
    public var prompt: String?
    public var maxAge: Int?
    /// The journey named by `acr_values` (the first one the gateway runs).
    public var acr: String?
    /// A transaction to approve on the way (RFC 9470 `txid`, or the scope `transaction:<TxId>`).
    public var txid: String?
    /// RFC 8707: the resource the token is for (a configured resource's identifier).
    public var resource: String?
    /// RFC 9396: what the client asks the person to approve, checked against the configured types.
    public var authorizationDetails: [JSONValue]?

    public enum Refusal: Error, Equatable, Sendable {
        /// Unknown client or unregistered redirect URI: answered to the user agent, not redirected.
        case toUser(OAuthError)
        /// Redirect to the client with `error` (and `state`).
        case toClient(redirectUri: String, OAuthError, state: String?)
    }

    /// Validates `query` against the registered clients and the journeys that exist.
    public static func parse(_ query: Query, config: OAuth2Config, journeys: Set<String>) -> Result<AuthorizationRequest, Refusal> {
        parse(query, config: config, clients: config.client, resources: [], journeys: journeys)
    }

    /// `clients` finds a client (the configured ones, and dynamic ones); `resources` are the
    /// resource identifiers a `resource` parameter may name.
    /// `mappings`: the `authorization_details` types transaction policies map (one entry of
    /// those at most).
    public static func parse(_ query: Query, config: OAuth2Config, clients: (String) -> OAuthClient?, resources: Set<String>,
                             journeys: Set<String>, mappings: [String: DetailsMapping] = [:]) -> Result<AuthorizationRequest, Refusal> {
        for name in ["client_id", "redirect_uri", "response_type", "scope", "state", "code_challenge", "txid", "resource",
                     "authorization_details"]
        where query.pairs.filter({ $0.name == name }).count > 1 {
            return .failure(.toUser(.invalidRequest("'\(name)' appears more than once")))
        }
        guard let clientId = query["client_id"], let client = clients(clientId) else {
            return .failure(.toUser(OAuthError("invalid_client", "unknown client_id", status: 400)))
        }
        guard let redirectUri = query["redirect_uri"], client.redirectUris.contains(redirectUri) else {
            return .failure(.toUser(.invalidRequest("redirect_uri is not registered for this client")))
        }
        let state = query["state"]
        func refuse(_ e: OAuthError) -> Result<AuthorizationRequest, Refusal> {
            .failure(.toClient(redirectUri: redirectUri, e, state: state))
        }
        guard query["response_type"] == "code" else {
            return refuse(OAuthError("unsupported_response_type", "only response_type=code is supported"))
        }
        let asked = (query["scope"] ?? "").split(separator: " ").map(String.init)
        // `transaction:<TxId>` names the transaction to approve (WIRE.md §13); it is no grant.
        let scope = asked.filter { !$0.hasPrefix(TransactionScope.prefix) }
        if let extra = scope.first(where: { !client.scopes.contains($0) }) {
            return refuse(OAuthError("invalid_scope", "scope '\(extra)' is not allowed for this client"))
        }
        let resource = query["resource"]
        if let resource, !resources.contains(resource) {
            return refuse(OAuthError("invalid_target", "resource '\(resource)' is not a resource of this gateway"))
        }
        guard let challenge = query["code_challenge"], PKCE.isWellFormed(challenge) else {
            return refuse(.invalidRequest("code_challenge is required (PKCE, 43 to 128 characters)"))
        }
        guard query["code_challenge_method"] == "S256" else { return refuse(.invalidRequest("code_challenge_method must be S256")) }
        let prompt = query["prompt"]
        if let prompt, prompt != "none", prompt != "login" { return refuse(.invalidRequest("prompt must be none or login")) }
        var maxAge: Int?
        if let m = query["max_age"] {
            guard let n = Int(m), n >= 0 else { return refuse(.invalidRequest("max_age must be a number of seconds")) }
            maxAge = n
        }
        let acr = query["acr_values"]?.split(separator: " ").map(String.init).first
        if let acr, !journeys.contains(acr) { return refuse(.invalidRequest("acr_values names no journey: '\(acr)'")) }
        let scoped = TransactionScope.txid(in: asked)
        if let scoped, let named = query["txid"], named != scoped {
            return refuse(.invalidRequest("txid and the transaction: scope name different transactions"))
        }
        let txid = query["txid"] ?? scoped
        if let txid, !PolicyDecider.isTxId(txid) { return refuse(.invalidRequest("txid is not a transaction id")) }
        var r = AuthorizationRequest(clientId: clientId, redirectUri: redirectUri, scope: scope, state: state,
                                     nonce: query["nonce"], codeChallenge: challenge, prompt: prompt, maxAge: maxAge,
                                     acr: acr, txid: txid)
        r.resource = resource
        if let text = query["authorization_details"] {
            let parsed = AuthorizationDetails.parse(text, types: config.authorizationDetailsTypes)
                .flatMap { entries in AuthorizationDetails.binding(entries, mappings: mappings).map { _ in entries } }
            switch parsed {
            case .success(let entries): r.authorizationDetails = entries
            case .failure(let e): return refuse(e)
            }
        }
        return .success(r)
    }

    /// `redirect_uri` with `params` added to its query.
    public static func redirect(_ uri: String, _ params: [(String, String)]) -> String {
        let q = params.map { "\($0.0)=\(Query.encode($0.1))" }.joined(separator: "&")
        return uri + (uri.contains("?") ? "&" : "?") + q
    }

    public static func errorRedirect(_ uri: String, _ e: OAuthError, state: String?) -> String {
        redirect(uri, [("error", e.code), ("error_description", e.description)] + (state.map { [("state", $0)] } ?? []))
    }
}

/// The claims of the tokens the provider signs.
public enum TokenClaims {
    /// RFC 9068 access token (header `typ: at+jwt`).
    public static func accessToken(issuer: String, audience: String, uid: String, clientId: String, scope: [String], acr: String,
                                   authTime: Int, jti: String, now: Int, ttlS: Int, txn: String?,
                                   authorizationDetails: JSONValue? = nil) -> [String: JSONValue] {
        var c: [String: JSONValue] = [
            "iss": .string(issuer), "aud": .string(audience), "sub": .string(uid), "client_id": .string(clientId),
            "scope": .string(scope.joined(separator: " ")), "acr": .string(acr), "auth_time": .number(authTime),
            "jti": .string(jti), "iat": .number(now), "exp": .number(now + ttlS),
        ]
        if let txn { c["txn"] = .string(txn) }
        if let authorizationDetails { c["authorization_details"] = authorizationDetails }
        return c
    }

    /// OIDC Core §2 ID token.
    public static func idToken(issuer: String, clientId: String, uid: String, nonce: String?, acr: String, authTime: Int,
                               now: Int, ttlS: Int, attributes: [String: String], scope: [String]) -> [String: JSONValue] {
        var c: [String: JSONValue] = [
            "iss": .string(issuer), "aud": .string(clientId), "azp": .string(clientId), "sub": .string(uid), "acr": .string(acr),
            "auth_time": .number(authTime), "iat": .number(now), "exp": .number(now + ttlS),
        ]
        if let nonce { c["nonce"] = .string(nonce) }
        for (k, v) in userClaims(uid: uid, attributes: attributes, scope: scope) { c[k] = v }
        return c
    }

    /// What `userinfo` (and the ID token) say about the user, by scope: `profile` → name,
    /// `email` → email.
    public static func userClaims(uid: String, attributes: [String: String], scope: [String]) -> [String: JSONValue] {
        var c: [String: JSONValue] = ["sub": .string(uid)]
        if scope.contains("profile") {
            c["preferred_username"] = .string(uid)
            c["name"] = .string(attributes["name"] ?? uid)
        }
        if scope.contains("email"), let email = attributes["email"] { c["email"] = .string(email) }
        return c
    }

    /// draft-ietf-oauth-transaction-tokens: `txn`, `sub`, `scope`, `tctx` (what was approved),
    /// `rctx` (where the request came from).
    public static func transactionToken(issuer: String, audience: String, txn: String, uid: String, scope: String,
                                        tctx: [String: JSONValue], rctx: [String: JSONValue], now: Int, ttlS: Int) -> [String: JSONValue] {
        ["iss": .string(issuer), "aud": .string(audience), "iat": .number(now), "exp": .number(now + ttlS),
         "txn": .string(txn), "sub": .string(uid), "scope": .string(scope), "tctx": .object(tctx), "rctx": .object(rctx)]
    }
}

/// What `authorize` does next for a validated request, given the browser's session and the
/// transaction it names: a pure decision, so that every branch is unit-tested.
public enum AuthorizeStep: Equatable, Sendable {
    /// Issue a code.
    case issue(acr: String, authTime: Int, txn: String?)
    /// Run the login page: a login (no session, `prompt=login`, `max_age` passed) when
    /// `journey` is nil, else that journey as a step-up on the session.
    case authenticate(journey: String?)
    /// Run the login page on the transaction's composite advice (its approval journey).
    case approve(txid: String)
    /// Make the transaction of the request's `authorization_details` (waiting for this user's
    /// approval) and come back naming it (`txid`).
    case askApproval
    case refuse(OAuthError)

    /// The session's facts that matter here.
    public struct Session: Equatable, Sendable {
        public var uid: String
        public var realm: String
        public var journeys: [String]
        public var authTime: Int
        public init(uid: String, realm: String, journeys: [String], authTime: Int) {
            (self.uid, self.realm, self.journeys, self.authTime) = (uid, realm, journeys, authTime)
        }
    }

    public static func next(_ r: AuthorizationRequest, session: Session?, transaction: TransactionRecord?, realm: String,
                            loginJourney: String, now: Int) -> AuthorizeStep {
        let interactive = r.prompt != "none"
        func interact(_ step: AuthorizeStep, _ error: String) -> AuthorizeStep {
            interactive ? step : .refuse(OAuthError(error, "prompt=none, and the user must interact"))
        }
        guard let s = session, s.realm == realm else { return interact(.authenticate(journey: nil), "login_required") }
        if r.prompt == "login" { return .authenticate(journey: nil) }
        if let maxAge = r.maxAge, now - s.authTime > maxAge { return interact(.authenticate(journey: r.acr), "login_required") }
        if r.txid == nil, r.authorizationDetails != nil { return interact(.askApproval, "interaction_required") }
        if let txid = r.txid {
            guard let tx = transaction, tx.expires > now else {
                return .refuse(.invalidRequest("the transaction is unknown, expired or already used"))
            }
            guard tx.subject == s.uid, tx.realm == realm else {
                return .refuse(OAuthError("access_denied", "the transaction belongs to another user"))
            }
            guard tx.authorizationDetails == r.authorizationDetails.map(JSONValue.array) else {
                return .refuse(.invalidRequest("the transaction approves other authorization_details"))
            }
            if let acr = r.acr, acr != tx.journey {
                return .refuse(.invalidRequest("acr_values must name the transaction's journey '\(tx.journey)'"))
            }
            guard tx.state == .completed else { return interact(.approve(txid: txid), "interaction_required") }
            // The approval completes this transaction, nothing more: the token carries it as
            // `txn`; its `acr` and `auth_time` stay those of the authentication that happened, so
            // that neither it nor a refresh counts as a step-up for another resource.
            return .issue(acr: s.journeys.first ?? loginJourney, authTime: s.authTime, txn: txid)
        }
        if let acr = r.acr, !s.journeys.contains(acr) { return interact(.authenticate(journey: acr), "interaction_required") }
        return .issue(acr: r.acr ?? s.journeys.first ?? loginJourney, authTime: s.authTime, txn: nil)
    }
}
