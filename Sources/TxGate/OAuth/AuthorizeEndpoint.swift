import EventHTTP
import Foundation
import HTTPCore
import TxGateCore
import TxGateCrypto

/// `authorize` (RFC 6749 §4.1 with PKCE, OIDC Core §3.1.2): on the browser's SSO session,
/// sends the user through the login page when needed (a login, a step-up journey named by
/// `acr_values`, or a transaction's approval named by `txid`) and comes back; then issues a
/// single-use code that lives 60 s. Consent is implicit for registered clients.
struct AuthorizeEndpoint {
    let provider: OAuthProvider
    let loop: EventLoop

    private var auth: AuthService { provider.auth }

    /// RFC 9126: the client's authorization request, checked now as `authorize` will check it,
    /// kept 60 s under a one-use `request_uri`. Errors are answered to the client (JSON).
    func push(_ ctx: EndpointCall, form: [String: String], realm: String) {
        provider.withClient(ctx, form, on: loop) { client in push(ctx, form: form, client: client) }
    }

    private func push(_ ctx: EndpointCall, form: [String: String], client: OAuthClient) {
        guard form["request_uri"] == nil else {
            OAuthProvider.refuse(ctx, .invalidRequest("request_uri may not be pushed"))
            return
        }
        // The client as it authenticated (with HTTP Basic, the body need not name it).
        var kept = form.filter { !["client_secret", "client_assertion", "client_assertion_type"].contains($0.key) }
        kept["client_id"] = kept["client_id"] ?? client.clientId
        let pairs = kept.sorted { $0.key < $1.key }.map { (name: $0.key, value: $0.value) }
        switch parse(Query(pairs: pairs)) {
        case .failure(.toUser(let e)), .failure(.toClient(_, let e, _)): OAuthProvider.refuse(ctx, e); return
        case .success(let r) where r.clientId != client.clientId:
            OAuthProvider.refuse(ctx, .invalidRequest("client_id is not the authenticated client")); return
        case .success: break
        }
        let uri = PushedAuthorizationRequest.uriPrefix + Base64URL.encode(Crypto.randomBytes(32))
        auth.store.create(PushedAuthorizationRequest.key(uri), value: PushedAuthorizationRequest.encode(pairs),
                          ttlMs: PushedAuthorizationRequest.ttlS * 1000, on: loop) { r in
            switch r {
            case .failure(let e): ctx.fail(.storeUnavailable(e.description))
            case .success(false): ctx.fail(.internalError("request_uri collision"))
            case .success(true):
                ctx.respondJSON(status: 201, #"{"expires_in":\#(PushedAuthorizationRequest.ttlS),"request_uri":"\#(uri)"}"#,
                                headers: OAuthProvider.noStore())
            }
        }
    }

    private func parse(_ query: Query) -> Result<AuthorizationRequest, AuthorizationRequest.Refusal> {
        AuthorizationRequest.parse(query, config: provider.config, clients: provider.client, resources: provider.resourceIdentifiers,
                                   journeys: Set(auth.config.journeys.keys), mappings: provider.detailsMappings)
    }

    func handle(_ ctx: EndpointCall, realm: String) {
        let query = Query(target: ctx.head.target)
        guard let requestUri = query["request_uri"] else { handle(ctx, realm: realm, query: query); return }
        // RFC 9126 §4: the pushed parameters, once, for the client that pushed them; from here on
        // (a round through the login page included) they are the request's own.
        auth.store.take(PushedAuthorizationRequest.key(requestUri), on: loop) { r in
            switch r {
            case .failure(let e): ctx.fail(.storeUnavailable(e.description))
            case .success(let bytes):
                let pushed = bytes.map { Query(string: String(decoding: $0, as: UTF8.self)) }
                guard let pushed, pushed["client_id"] == query["client_id"] else {
                    OAuthProvider.refuse(ctx, .invalidRequest("request_uri is unknown, expired, already used, or another client's"))
                    return
                }
                handle(ctx, realm: realm, query: pushed)
            }
        }
    }

    private func handle(_ ctx: EndpointCall, realm: String, query: Query) {
        provider.resolveClient(query["client_id"], on: loop) { refused in
            // A document that cannot be used: the client is unknown, told to the user (§4.1.2.1).
            if let refused { OAuthProvider.refuse(ctx, OAuthError("invalid_client", refused.description, status: 400)); return }
            parsed(ctx, realm: realm, query: query)
        }
    }

    private func parsed(_ ctx: EndpointCall, realm: String, query: Query) {
        let request: AuthorizationRequest
        switch parse(query) {
        case .success(let r): request = r
        case .failure(.toUser(let e)): OAuthProvider.refuse(ctx, e); return
        case .failure(.toClient(let uri, let e, let state)): redirect(ctx, AuthorizationRequest.errorRedirect(uri, e, state: state)); return
        }
        session(ctx) { session, sessionKey in
            transaction(ctx, request.txid) { tx in
                let step = AuthorizeStep.next(request, session: session, transaction: tx, realm: realm,
                                              loginJourney: auth.config.loginJourney, now: auth.now)
                perform(ctx, step, request, realm: realm, session: session.map { ($0.uid, sessionKey) }, query: query)
            }
        }
    }

    /// `session`: the user and the session's store key, when there is a session.
    private func perform(_ ctx: EndpointCall, _ step: AuthorizeStep, _ r: AuthorizationRequest, realm: String,
                         session: (uid: String, key: String)?, query: Query) {
        let back = returnURL(ctx.path, query)
        let loginPage = provider.publicURL + "/am/XUI/"
        switch step {
        case .refuse(let e):
            redirect(ctx, AuthorizationRequest.errorRedirect(r.redirectUri, e, state: r.state))
        case .authenticate(nil):
            redirect(ctx, loginPage + "?goto=" + Query.encode(back) + "&realm=" + Query.encode(realm))
        case .authenticate(let journey?):
            let advices = Advices([(Advices.authenticateToService, ["\(realm):\(journey)"])])
            redirect(ctx, Challenge.loginRedirect(loginPage: loginPage, goto: back, realm: realm, advices: advices))
        case .approve(let txid):
            let advices = Advices([(Advices.transaction, [txid])])
            redirect(ctx, Challenge.loginRedirect(loginPage: loginPage, goto: back, realm: realm, advices: advices))
        case .askApproval:
            // RFC 9396: what the client asks for becomes a transaction waiting for this user's
            // approval; back here naming it, the request goes on as one with `txid`.
            guard let session, let entries = r.authorizationDetails else { ctx.fail(.internalError("an approval without a session")); return }
            provider.createApproval(entries, uid: session.uid, realm: realm, on: loop) { result in
                switch result {
                case .failure(let f): ctx.fail(f)
                case .success(let record):
                    let again = returnURL(ctx.path, Query(pairs: query.pairs + [(name: "txid", value: record.txid)]))
                    let advices = Advices([(Advices.transaction, [record.txid])])
                    redirect(ctx, Challenge.loginRedirect(loginPage: loginPage, goto: again, realm: realm, advices: advices))
                }
            }
        case .issue(let acr, let authTime, let txn):
            guard let session else { ctx.fail(.internalError("a code without a session")); return }
            var grant = AuthorizationGrant(clientId: r.clientId, redirectUri: r.redirectUri, codeChallenge: r.codeChallenge,
                                           uid: session.uid, realm: realm, scope: r.scope, nonce: r.nonce, acr: acr, authTime: authTime,
                                           txn: txn)
            grant.session = session.key
            grant.resource = r.resource
            grant.authorizationDetails = r.authorizationDetails.map(JSONValue.array)
            guard let consentJourney = provider.consentJourney(r.clientId) else {
                issue(ctx, grant, state: r.state)
                return
            }
            consented(ctx, r, uid: session.uid, sessionKey: session.key, realm: realm, journey: consentJourney, query: query) {
                issue(ctx, grant, state: r.state)
            }
        }
    }

    /// Where a consent given in an SSO session is remembered for the rest of that session.
    static func consentKey(session: String, clientId: String) -> String {
        "oauth2:consent:" + Crypto.hex(Crypto.sha256(Array((session + "\u{0}" + clientId).utf8)))
    }

    /// A client registered at run time gets a code only with the person's consent in this very
    /// authorization: a consent record (`ClientConsent`) the consent journey completed, named by
    /// the `consent` parameter the login page comes back with, taken once, for this client and
    /// user. Without one, the person is sent to give it.
    private func consented(_ ctx: EndpointCall, _ r: AuthorizationRequest, uid: String, sessionKey: String, realm: String, journey: String,
                           query: Query, then: @escaping () -> Void) {
        let remembered = Self.consentKey(session: sessionKey, clientId: r.clientId)
        auth.store.get(remembered, on: loop) { g in
            if case .success(_?) = g { then(); return }
            let resource = ClientConsent.resource(clientId: r.clientId)
            guard let txid = query["consent"], PolicyDecider.isTxId(txid) else {
                ask(ctx, r, uid: uid, realm: realm, journey: journey, query: query)
                return
            }
            let fields = ["state": TransactionRecord.State.completed.rawValue, "subject": uid, "resource": resource]
            auth.store.takeIf(TransactionRecord.key(txid), fields: fields, on: loop) { t in
                switch t {
                case .failure(let e): ctx.fail(.storeUnavailable(e.description))
                case .success(.taken):
                    auth.logger.info("client allowed", metadata: [
                        "request_id": .string(ctx.requestId), "client_id": .string(String(r.clientId.prefix(24))), "user": .string(uid),
                    ])
                    auth.store.put(remembered, value: [1], ttlMs: auth.config.session.maxLifetimeS * 1000, on: loop) { _ in then() }
                case .success:
                    ask(ctx, r, uid: uid, realm: realm, journey: journey, query: query.without("consent"))
                }
            }
        }
    }

    /// Writes a consent record and sends the person to the login page to give it, back here with it.
    private func ask(_ ctx: EndpointCall, _ r: AuthorizationRequest, uid: String, realm: String, journey: String, query: Query) {
        guard let client = provider.client(r.clientId) else { ctx.fail(.internalError("the client vanished")); return }
        let txid = Crypto.uuidV4()
        let record = ClientConsent.record(txid: txid, client: client, name: provider.clientName(r.clientId), scope: r.scope, uid: uid,
                                          realm: realm, journey: journey, expires: auth.now + 600)
        auth.store.create(TransactionRecord.key(txid), value: record.encoded, ttlMs: 600_000, on: loop) { res in
            switch res {
            case .failure(let e): ctx.fail(.storeUnavailable(e.description))
            case .success(false): ctx.fail(.internalError("consent id collision"))
            case .success(true):
                // Counted as waiting, as a transaction is: its approval lowers the count again.
                auth.store.increment(TransactionRecord.pendingKey(uid), ttlMs: 600_000, on: loop) { _ in }
                let back = returnURL(ctx.path, Query(pairs: query.pairs + [(name: "consent", value: txid)]))
                let advices = Advices([(Advices.transaction, [txid])])
                redirect(ctx, Challenge.loginRedirect(loginPage: provider.publicURL + "/am/XUI/", goto: back, realm: realm, advices: advices))
            }
        }
    }

    private func issue(_ ctx: EndpointCall, _ grant: AuthorizationGrant, state: String?) {
        let code = Base64URL.encode(Crypto.randomBytes(32))
        auth.store.create(AuthorizationGrant.key(code), value: grant.encoded, ttlMs: AuthorizationGrant.ttlS * 1000, on: loop) { r in
            switch r {
            case .failure(let e): ctx.fail(.storeUnavailable(e.description))
            case .success(false): ctx.fail(.internalError("authorization code collision"))
            case .success(true):
                auth.logger.info("authorization code issued", metadata: [
                    "request_id": .string(ctx.requestId), "client_id": .string(grant.clientId), "user": .string(grant.uid),
                    "acr": .string(grant.acr), "txid": .string(grant.txn.map(masked) ?? "-"),
                ])
                var params = [("code", code)]
                if let state { params.append(("state", state)) }
                params.append(("iss", provider.issuer(grant.realm)))
                redirect(ctx, AuthorizationRequest.redirect(grant.redirectUri, params))
            }
        }
    }

    /// The authorize URL to come back to after the login page: `prompt` and `max_age` are
    /// dropped, since they have just been satisfied (kept, they would send the user round again).
    private func returnURL(_ path: String, _ query: Query) -> String {
        let kept = query.pairs.filter { $0.name != "prompt" && $0.name != "max_age" }
        return provider.publicURL + path + "?" + kept.map { "\(Query.encode($0.name))=\(Query.encode($0.value))" }
            .joined(separator: "&")
    }

    /// The browser's live session and its store key.
    private func session(_ ctx: EndpointCall, _ then: @escaping (AuthorizeStep.Session?, String) -> Void) {
        guard let token = auth.sessions.token(in: ctx.head.headers) else { then(nil, ""); return }
        auth.sessions.lookup(token, now: auth.now, on: loop) { r in
            switch r {
            case .failure(let e): ctx.fail(.storeUnavailable(e.description))
            case .success(let s):
                then(s.map { AuthorizeStep.Session(uid: $0.uid, realm: $0.realm, journeys: $0.journeys, authTime: $0.lastAuthentication) },
                     SessionManager.key(token))
            }
        }
    }

    private func transaction(_ ctx: EndpointCall, _ txid: String?, _ then: @escaping (TransactionRecord?) -> Void) {
        guard let txid else { then(nil); return }
        auth.store.get(TransactionRecord.key(txid), on: loop) { r in
            switch r {
            case .failure(let e): ctx.fail(.storeUnavailable(e.description))
            case .success(let bytes): then(bytes.flatMap(TransactionRecord.decode))
            }
        }
    }

    private func redirect(_ ctx: EndpointCall, _ location: String) {
        var h = OAuthProvider.noStore()
        h.add("Location", location)
        ctx.respond(status: 302, headers: h, body: [])
    }
}
