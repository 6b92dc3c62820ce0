import EventHTTP
import HTTPCore
import TxGateCore

/// Who is asking: an access token the gateway issued (`Authorization: Bearer` JWT), else the
/// session named by `Authorization: Bearer`, the token header or the cookie. Skipped when the
/// policy that applies does not need a subject (and the request is not a browser coming back to
/// a parked request), so that open routes keep working when the store is down.
struct IdentifyPhase: RequestPhase {
    let pdp: PolicyDecisionPoint
    let identifier: SubjectIdentifying
    /// Verifies bearer access tokens (and remembers them); nil without the OAuth 2.0 provider.
    var accessTokens: AccessTokenCache? = nil
    /// Other providers' access tokens (`bearer.issuers`); nil without any.
    var externalIssuers: ExternalIssuers? = nil
    var clock = WallClock.system

    func handle(_ ctx: RequestContext) -> PhaseStatus {
        ctx.bearer = Self.bearerToken(ctx.head.headers)
        guard pdp.needsSubject(applicable: ctx.policy) || RequestParking.mayReplay(ctx) else {
            return .next
        }
        // A valid access token wins; one that does not verify is treated like any other
        // unrecognized bearer below: it never hides a valid session cookie.
        guard let bearer = ctx.bearer, bearer.utf8.count(where: { $0 == UInt8(ascii: ".") }) == 2 else { return identify(ctx) }
        // A token issued for another resource (RFC 8707) is not a subject here.
        if let tokens = accessTokens, let v = tokens.verify(bearer, now: clock.now), tokens.fits(v, path: ctx.path[...]) {
            ctx.subject = tokens.subject(v, token: bearer)
            ctx.accessToken = v
            // The transaction the token was issued for is consumed like `_txid` (WIRE-EXTENSIONS §7).
            if ctx.txid == nil, let txn = v.string("txn") {
                ctx.txid = txn
                ctx.txidApprovedAhead = v.claims["authorization_details"] != nil
            }
            return .next
        }
        guard let externalIssuers else { return identify(ctx) }
        return ctx.suspend { resume in
            var resume = Optional(resume)
            externalIssuers.subject(bearer) { subject, v in
                guard let r = resume.take() else { return }
                guard let subject else {
                    identify(ctx, r)
                    return
                }
                ctx.subject = subject
                ctx.accessToken = v
                r.next()
            }
        }
    }

    /// The bearer as a session token, else the session. A session read moments ago is the
    /// usual case: answered at once, without waiting for a lookup.
    private func identify(_ ctx: RequestContext) -> PhaseStatus {
        if let subject = recentSubject(ctx) {
            ctx.subject = subject
            return .next
        }
        return ctx.suspend { identify(ctx, $0) }
    }

    /// `identify`, continuing through a token already taken.
    private func identify(_ ctx: RequestContext, _ token: consuming PhaseResume) {
        if let subject = recentSubject(ctx) {
            ctx.subject = subject
            token.next()
            return
        }
        var resume = Optional(token)
        identifyBearerThenSession(ctx) { r in
            switch r {
            case .failure(let e):
                resume.take()?.fail(e)
            case .success(let subject):
                ctx.subject = subject
                resume.take()?.next()
            }
        }
    }

    private func recentSubject(_ ctx: RequestContext) -> Subject? {
        guard ctx.bearer == nil, let token = identifier.sessionToken(in: ctx.head.headers) else { return nil }
        return identifier.recentSubject(token: token)
    }

    /// A bearer token that identifies someone wins. One that does not (another issuer's token,
    /// an expired one: the SDKs send theirs whenever they hold OAuth tokens) does not hide the
    /// session cookie or token header: the request is then the session's, and is no longer
    /// treated as a bearer client (`ctx.bearer` cleared). With neither, `ctx.bearer` stays, so
    /// a bearer client is told its token is not valid.
    private func identifyBearerThenSession(_ ctx: RequestContext, _ done: @escaping (Result<Subject?, RequestFailure>) -> Void) {
        let session = identifier.sessionToken(in: ctx.head.headers)
        let received = ctx.exchange.startNanos
        guard let bearer = ctx.bearer, bearer != session else {
            identifier.identifySubject(token: session, receivedNanos: received, done)
            return
        }
        identifier.identifySubject(token: bearer, receivedNanos: received) { [identifier] r in
            guard case .success(nil) = r, session != nil else { done(r); return }
            identifier.identifySubject(token: session, receivedNanos: received) { r in
                if case .success(_?) = r { ctx.bearer = nil }
                done(r)
            }
        }
    }

    static func bearerToken(_ h: HTTPHeaders) -> String? {
        guard let a = h.first("Authorization"), a.count > 7, a.prefix(7).lowercased() == "bearer " else { return nil }
        return String(a.dropFirst(7)).trimmingOWS()
    }
}

/// Where the subject behind a token comes from: this gateway's sessions, or the remote AM's.
protocol SubjectIdentifying {
    /// The session token a request carries (token header or cookie).
    func sessionToken(in headers: HTTPHeaders) -> String?
    /// The subject for `token`; nil for no token or no live session. `receivedNanos`: when the
    /// request arrived (a remote lookup's time budget counts from there).
    func identifySubject(token: String?, receivedNanos: UInt64, _ done: @escaping (Result<Subject?, RequestFailure>) -> Void)
    /// The subject for `token` when it is known without a lookup (its session was read moments
    /// ago); nil otherwise, and then `identifySubject` decides.
    func recentSubject(token: String) -> Subject?
}

extension SubjectIdentifying {
    func recentSubject(token: String) -> Subject? { nil }
}

extension SubjectIdentifier: SubjectIdentifying {
    func recentSubject(token: String) -> Subject? {
        sessions.recentSubject(token, now: clock.now, in: sessionCache) { subject(of: $0, token: token) }
    }

    func identifySubject(token: String?, receivedNanos: UInt64, _ done: @escaping (Result<Subject?, RequestFailure>) -> Void) {
        identify(token: token) { done($0.mapError { .storeUnavailable($0.description) }) }
    }
}
