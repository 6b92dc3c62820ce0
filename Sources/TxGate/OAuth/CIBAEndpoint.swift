import EventHTTP
import HTTPCore
import TxGateCore
import TxGateCrypto

/// OpenID CIBA Core 1.0, poll mode (`oauth2.ciba`): `POST {issuer}/bc-authorize` makes an
/// approval request for the user the hint names and sends it on the configured channels; the
/// client polls the token endpoint with `grant_type=urn:openid:params:grant-type:ciba` until the
/// person decided on the approval page; the `auth_req_id` is redeemed once.
struct CIBAEndpoint {
    let provider: OAuthProvider
    let loop: EventLoop

    private var auth: AuthService { provider.auth }
    private var store: Store { auth.store }

    /// The back-channel authentication request (CIBA Core §7.1). An unknown user, one out of
    /// the client's reach, or a transaction that is not the user's gets the same answer as a
    /// good request, and an approval request nobody can decide: nothing tells the client which
    /// users exist.
    func authorize(_ ctx: EndpointCall, form: [String: String]) {
        guard let ciba = provider.config.ciba else {
            ctx.fail(.notFound("back-channel authentication is not enabled (oauth2.ciba)"))
            return
        }
        provider.withClient(ctx, form, on: loop) { client in authorize(ctx, form: form, client: client, ciba: ciba) }
    }

    private func authorize(_ ctx: EndpointCall, form: [String: String], client: OAuthClient, ciba: CIBAConfig) {
        guard let reach = client.ciba, !client.isPublic else {
            OAuthProvider.refuse(ctx, OAuthError("unauthorized_client", "this client may not use back-channel authentication"))
            return
        }
        let scope = (form["scope"] ?? "").split(separator: " ").map(String.init)
        guard scope.contains("openid") else { OAuthProvider.refuse(ctx, .invalidRequest("scope must include openid")); return }
        if let extra = scope.first(where: { !client.scopes.contains($0) }) {
            OAuthProvider.refuse(ctx, OAuthError("invalid_scope", "scope '\(extra)' is not allowed for this client"))
            return
        }
        let hints = ["login_hint", "id_token_hint", "login_hint_token"].filter { form[$0] != nil }
        guard hints.count == 1 else {
            OAuthProvider.refuse(ctx, .invalidRequest("give exactly one of login_hint, id_token_hint, login_hint_token"))
            return
        }
        let named: String?
        switch hints[0] {
        case "login_hint": named = form["login_hint"]
        case "id_token_hint":
            // An ID token this provider signed names its subject; it may have expired (CIBA Core §7.1).
            guard let v = try? JWS.verify(form["id_token_hint"] ?? "", typ: "jwt", now: 0, keys: provider.keys.key),
                  v.string("iss") == provider.issuer("/") else {
                OAuthProvider.refuse(ctx, .invalidRequest("id_token_hint is not an ID token of this provider"))
                return
            }
            named = v.string("sub")
        default:
            OAuthProvider.refuse(ctx, .invalidRequest("login_hint_token is not supported; use login_hint or id_token_hint"))
            return
        }
        if let m = form["binding_message"], let why = CIBARequest.bindingMessageRefusal(m) {
            OAuthProvider.refuse(ctx, OAuthError("invalid_binding_message", why))
            return
        }
        var expiresIn = ciba.expiresInS
        if let r = form["requested_expiry"] {
            guard let n = Int(r), n > 0 else { OAuthProvider.refuse(ctx, .invalidRequest("requested_expiry must be a number of seconds")); return }
            expiresIn = min(n, ciba.expiresInS)
        }
        // Ping mode: the client names the bearer token of its notification (CIBA Core §7.1).
        let pingToken = form["client_notification_token"]
        if reach.notificationEndpoint != nil {
            guard let t = pingToken, (1...1024).contains(t.utf8.count) else {
                OAuthProvider.refuse(ctx, .invalidRequest("client_notification_token is required (this client is in ping mode)"))
                return
            }
        }
        if let txid = form["txid"], !PolicyDecider.isTxId(txid) {
            OAuthProvider.refuse(ctx, .invalidRequest("txid is not a transaction id"))
            return
        }
        // CIBA Core §7.1 `acr_values`: the first one names the journey the person approves through.
        let acr = form["acr_values"]?.split(separator: " ").first.map(String.init)
        if let acr, auth.config.journeys[acr] == nil {
            OAuthProvider.refuse(ctx, .invalidRequest("acr_values names no journey: '\(acr)'"))
            return
        }
        var details: [JSONValue]?
        if let text = form["authorization_details"] {
            guard form["txid"] == nil else {
                OAuthProvider.refuse(ctx, .invalidRequest("give txid or authorization_details, not both"))
                return
            }
            switch provider.authorizationDetails(text) {
            case .success(let entries): details = entries
            case .failure(let e): OAuthProvider.refuse(ctx, e); return
            }
        }
        let user = named.flatMap { auth.users[$0] != nil && reach.reaches($0) ? $0 : nil }
        transaction(form["txid"], details, of: user, ctx) { tx in
            // A transaction that is not this user's, waiting, makes the request nobody's.
            let uid = form["txid"] == nil && details == nil || tx != nil ? user : nil
            let now = auth.now
            // `acr_values`', else (asked for ahead, RFC 9396) the type's, else the configured one.
            let approver = acr ?? (tx?.authorizationDetails != nil ? tx?.journey : nil) ?? ciba.approverJourney
            var request = ApprovalRequest.pending(
                subject: uid ?? "", matter: tx.map { .transaction(txid: $0.txid, display: $0.display, bound: $0.shownFields) } ?? .stepUp(journey: approver),
                approverJourney: approver, nowMs: Int64(now) * 1000, ttlS: expiresIn)
            if let m = form["binding_message"] { request.bindingCode = m }
            let services = auth.services(on: loop)
            services.saveApproval(request) { r in
                if case .failure(let e) = r { ctx.fail(.storeUnavailable(e.description)); return }
                if uid != nil { services.notifyApproval(request, channels: ciba.channels) }
                let authReqId = Base64URL.encode(Crypto.randomBytes(32))
                let record = CIBARequest(clientId: client.clientId, approvalId: request.id, uid: uid, scope: scope, txid: tx?.txid,
                                         expires: now + expiresIn, intervalS: ciba.intervalS, nextPollS: now + ciba.intervalS)
                let ping = reach.notificationEndpoint != nil && uid != nil
                    ? CIBAPing(authReqId: authReqId, clientId: client.clientId, token: pingToken ?? "") : nil
                remember(ping, approvalId: request.id, ttlS: expiresIn + 60, ctx) {
                store.create(CIBARequest.key(authReqId), value: record.encoded, ttlMs: (expiresIn + 60) * 1000, on: loop) { r in
                    switch r {
                    case .failure(let e): ctx.fail(.storeUnavailable(e.description))
                    case .success(false): ctx.fail(.internalError("auth_req_id collision"))
                    case .success(true):
                        auth.logger.info("back-channel authentication requested", metadata: [
                            "request_id": .string(ctx.requestId), "client_id": .string(client.clientId),
                            "user": .string(uid ?? "-"), "approval": .string(masked(request.id)),
                        ])
                        ctx.respondJSON(status: 200, JSONValue.object([
                            "auth_req_id": .string(authReqId), "expires_in": .number(expiresIn), "interval": .number(ciba.intervalS),
                        ]).canonical, headers: OAuthProvider.noStore())
                    }
                }
                }
            }
        }
    }

    /// Keeps ping mode's note (none for poll mode, or for a request nobody can decide).
    private func remember(_ ping: CIBAPing?, approvalId: String, ttlS: Int, _ ctx: EndpointCall, then: @escaping () -> Void) {
        guard let ping else { then(); return }
        store.put(CIBAPing.key(approvalId), value: ping.encoded, ttlMs: ttlS * 1000, on: loop) { r in
            if case .failure(let e) = r { ctx.fail(.storeUnavailable(e.description)); return }
            then()
        }
    }

    /// An approval request was decided: in ping mode, tell its client (CIBA Core §10.2) with a
    /// POST of `{"auth_req_id": …}` and its notification token as bearer. Once, in the
    /// background; a client that is not reached can still poll.
    static func approvalDecided(_ approvalId: String, auth: AuthService, loop: EventLoop) {
        guard auth.config.oauth2?.ciba != nil else { return }
        auth.store.take(CIBAPing.key(approvalId), on: loop) { r in
            guard case .success(let bytes?) = r, let ping = CIBAPing.decode(bytes),
                  let url = auth.config.oauth2?.client(ping.clientId)?.ciba?.notificationEndpoint else { return }
            let endpoint: UpstreamEndpoint
            do {
                endpoint = UpstreamEndpoint(address: try SocketAddress(host: url.host, port: url.port),
                                            tls: url.isTLS ? try TLSContext.client(caFile: nil) : nil, tlsHost: url.host,
                                            connectTimeoutMs: 5_000, responseTimeoutMs: 5_000, maxIdle: 0)
            } catch {
                auth.logger.error("CIBA ping not sent", metadata: ["client_id": .string(ping.clientId), "error": .string("\(error)")])
                return
            }
            let body = JSONValue.object(["auth_req_id": .string(ping.authReqId)]).canonicalBytes
            var h = HTTPHeaders()
            h.add("Host", url.authority)
            h.add("Content-Type", "application/json")
            h.add("Authorization", "Bearer " + ping.token)
            let request = UpstreamRequest(method: "POST", target: url.basePath.isEmpty ? "/" : url.basePath, headers: h, body: Body(body),
                                          resendable: false)
            let pool = UpstreamPool(loop: loop, endpoint: endpoint)
            BufferedCall.send(request, on: pool, deadlineMs: 5_000, maxBytes: 16 * 1024) { r in
                _ = pool  // kept until the answer
                switch r {
                case .success(let resp) where (200..<300).contains(resp.head.status):
                    auth.logger.info("CIBA ping sent", metadata: ["client_id": .string(ping.clientId), "approval": .string(masked(approvalId))])
                case .success(let resp):
                    auth.logger.warning("CIBA ping refused", metadata: ["client_id": .string(ping.clientId), "status": .stringConvertible(resp.head.status)])
                case .failure(let f):
                    auth.logger.warning("CIBA ping failed", metadata: ["client_id": .string(ping.clientId), "error": .string(f.description)])
                }
            }
        }
    }

    /// The transaction `txid` when it waits for `user`'s approval, or the one `details` ask
    /// `user` to approve (RFC 9396), written now; nil otherwise (no such user: nothing written).
    private func transaction(_ txid: String?, _ details: [JSONValue]?, of user: String?, _ ctx: EndpointCall,
                             _ then: @escaping (TransactionRecord?) -> Void) {
        if let details, let user {
            provider.createApproval(details, uid: user, realm: "/", on: loop) { r in
                switch r {
                case .failure(let f): ctx.fail(f)
                case .success(let tx): then(tx)
                }
            }
            return
        }
        guard let txid, let user else { then(nil); return }
        store.get(TransactionRecord.key(txid), on: loop) { r in
            switch r {
            case .failure(let e): ctx.fail(.storeUnavailable(e.description))
            case .success(let bytes):
                let tx = bytes.flatMap(TransactionRecord.decode)
                then(tx.flatMap { $0.approvalRefusal(by: user, realm: "/", now: auth.now) == nil ? $0 : nil })
            }
        }
    }

    /// The token request of a poll (CIBA Core §10.1, §11): pending, slow down, denied, expired,
    /// or the tokens, once.
    func poll(_ ctx: EndpointCall, form: [String: String], client: OAuthClient, tokens: TokenEndpoint) {
        guard let ciba = provider.config.ciba, client.ciba != nil else {
            OAuthProvider.refuse(ctx, OAuthError("unauthorized_client", "this client may not use back-channel authentication"))
            return
        }
        guard let authReqId = form["auth_req_id"] else { OAuthProvider.refuse(ctx, .invalidRequest("auth_req_id is required")); return }
        let key = CIBARequest.key(authReqId)
        store.get(key, on: loop) { r in
            switch r {
            case .failure(let e): ctx.fail(.storeUnavailable(e.description))
            case .success(let bytes):
                guard let bytes, let record = CIBARequest.decode(bytes), record.clientId == client.clientId else {
                    OAuthProvider.refuse(ctx, .invalidGrant("auth_req_id is unknown, redeemed, or another client's"))
                    return
                }
                auth.services(on: loop).readApproval(record.approvalId) { r in
                    switch r {
                    case .failure(let e): ctx.fail(.storeUnavailable(e.description))
                    case .success(let approval):
                        answer(ctx, record.poll(approval, now: auth.now), key: key, read: bytes, record, ciba, tokens)
                    }
                }
            }
        }
    }

    private func answer(_ ctx: EndpointCall, _ poll: CIBARequest.Poll, key: String, read: [UInt8], _ record: CIBARequest,
                        _ ciba: CIBAConfig, _ tokens: TokenEndpoint) {
        let now = auth.now
        switch poll {
        case .slowDown, .pending:
            var next = record
            if poll == .slowDown { next.intervalS += 5 }
            next.nextPollS = now + next.intervalS
            // A poll that lost a race to another keeps the other's timing: nothing to retry.
            store.compareAndSwap(key, expected: read, new: next.encoded, ttlMs: nil, on: loop) { _ in
                OAuthProvider.refuse(ctx, poll == .slowDown ? OAuthError("slow_down", "poll less often: every \(next.intervalS) s")
                                                            : OAuthError("authorization_pending", "the user has not decided yet"))
            }
        case .denied, .expired:
            store.delete(key, on: loop) { _ in
                OAuthProvider.refuse(ctx, poll == .denied ? OAuthError("access_denied", "the user denied the request")
                                                          : OAuthError("expired_token", "the auth_req_id has expired"))
            }
        case .approved(let uid, let authTime, let acr):
            // Redeemed once: of two polls racing, one takes the record.
            store.compareAndSwap(key, expected: read, new: nil, ttlMs: nil, on: loop) { r in
                switch r {
                case .failure(let e): ctx.fail(.storeUnavailable(e.description))
                case .success(false): OAuthProvider.refuse(ctx, .invalidGrant("auth_req_id was redeemed already"))
                case .success(true):
                    auth.logger.info("back-channel authentication approved", metadata: [
                        "request_id": .string(ctx.requestId), "client_id": .string(record.clientId), "user": .string(uid),
                        "txid": .string(record.txid.map(masked) ?? "-"),
                    ])
                    var grant = AuthorizationGrant(clientId: record.clientId, redirectUri: "", codeChallenge: "", uid: uid, realm: "/",
                                                   scope: record.scope, nonce: nil, acr: acr, authTime: authTime,
                                                   txn: record.txid)
                    guard let txid = record.txid else { tokens.newFamily(ctx, grant); return }
                    complete(ctx, txid: txid, uid: uid) { tx in
                        grant.authorizationDetails = tx.authorizationDetails
                        tokens.newFamily(ctx, grant)
                    }
                }
            }
        }
    }

    /// The person approved the transaction on the approval page: it is COMPLETED now (a
    /// compare-and-swap over what was read, with its audit record and the user's count of
    /// waiting transactions lowered in the same step), so that the access token's `txn` opens
    /// that one request.
    private func complete(_ ctx: EndpointCall, txid: String, uid: String, then: @escaping (TransactionRecord) -> Void) {
        let key = TransactionRecord.key(txid)
        store.get(key, on: loop) { r in
            switch r {
            case .failure(let e): ctx.fail(.storeUnavailable(e.description))
            case .success(let bytes):
                guard let bytes, let tx = TransactionRecord.decode(bytes)?.approved(by: uid), tx.expires > auth.now else {
                    OAuthProvider.refuse(ctx, .invalidGrant("the transaction expired or was used before the request was redeemed"))
                    return
                }
                let audit = AuditAppend(ifChanged: AuditEvent.approved(tx, requestId: ctx.requestId).entry, retentionMs: auth.config.audit.retentionMs)
                store.compareAndSwap(key, expected: bytes, new: tx.encoded, ttlMs: nil, audit: audit,
                                     moving: .down(TransactionRecord.pendingKey(uid)), on: loop) { r in
                    switch r {
                    case .failure(let e): ctx.fail(.storeUnavailable(e.description))
                    case .success(nil): OAuthProvider.refuse(ctx, .invalidGrant("the transaction changed before the request was redeemed"))
                    case .success:
                        auth.metrics.audited(.approved)
                        auth.metrics.transactionsCompleted.increment()
                        then(tx)
                    }
                }
            }
        }
    }
}
