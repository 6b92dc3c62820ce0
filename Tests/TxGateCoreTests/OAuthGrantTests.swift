import Testing
import TxGateCore
import TxGateCrypto

/// The provider's pure parts: PKCE, the authorize request's validation and next step, codes,
/// refresh families and the ES256 tokens.
@Suite struct OAuthGrantTests {
    static let client = OAuthClient(clientId: "app", redirectUris: ["https://app.example/cb"], scopes: ["openid", "profile"])
    static var config: OAuth2Config {
        var c = OAuth2Config()
        c.clients = [client]
        return c
    }
    static let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    static let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"

    /// RFC 7636 Appendix B.
    @Test func pkceS256MatchesTheRFCExample() {
        #expect(PKCE.s256(Self.verifier) == Self.challenge)
        #expect(PKCE.verify(verifier: Self.verifier, challenge: Self.challenge))
        #expect(!PKCE.verify(verifier: Self.verifier + "x", challenge: Self.challenge))
        #expect(!PKCE.isWellFormed("short"))
        #expect(!PKCE.isWellFormed(String(repeating: "a", count: 129)))
        #expect(!PKCE.isWellFormed(String(repeating: "a", count: 42) + "+"))
    }

    static func query(_ extra: String = "", redirect: String = "https%3A%2F%2Fapp.example%2Fcb") -> Query {
        Query(string: "client_id=app&redirect_uri=\(redirect)&response_type=code&scope=openid+profile&state=s1"
            + "&code_challenge=\(challenge)&code_challenge_method=S256" + extra)
    }

    static func parse(_ q: Query) -> Result<AuthorizationRequest, AuthorizationRequest.Refusal> {
        AuthorizationRequest.parse(q, config: config, journeys: ["Login", "Confirm"])
    }

    @Test func authorizeRequestsAreValidatedAndRefusedToTheRightParty() throws {
        let ok = try Self.parse(Self.query("&nonce=n1&acr_values=Confirm")).get()
        #expect(ok.scope == ["openid", "profile"] && ok.nonce == "n1" && ok.acr == "Confirm" && ok.state == "s1")
        // Before the redirect URI is known good, the error goes to the user, never to a redirect.
        guard case .failure(.toUser) = Self.parse(Self.query(redirect: "https%3A%2F%2Fevil.example%2Fcb")) else {
            Issue.record("an unregistered redirect_uri must not be redirected to"); return
        }
        guard case .failure(.toUser) = Self.parse(Query(string: "client_id=nobody&redirect_uri=x")) else {
            Issue.record("an unknown client must not be redirected to"); return
        }
        func codeOf(_ q: Query) -> String? {
            if case .failure(.toClient(_, let e, let state)) = Self.parse(q), state == "s1" { return e.code }
            return nil
        }
        guard case .failure(.toUser(let repeated)) = Self.parse(Self.query("&scope=admin")) else {
            Issue.record("a repeated parameter is refused before anything is trusted"); return
        }
        #expect(repeated.code == "invalid_request")
        #expect(codeOf(Query(string: Self.query().pairs.filter { $0.name != "code_challenge" }.map { "\($0.name)=\(Query.encode($0.value))" }
            .joined(separator: "&"))) == "invalid_request", "PKCE is required")
        #expect(codeOf(Self.query("&prompt=consent")) == "invalid_request")
        #expect(codeOf(Self.query("&acr_values=Unknown")) == "invalid_request")
        #expect(codeOf(Self.query("&txid=not-a-uuid")) == "invalid_request")
        let wrongScope = Query(string: Self.query().pairs.map { $0.name == "scope" ? "scope=openid+admin" : "\($0.name)=\(Query.encode($0.value))" }
            .joined(separator: "&"))
        #expect(codeOf(wrongScope) == "invalid_scope")
    }

    static let session = AuthorizeStep.Session(uid: "demo", realm: "/", journeys: ["Login"], authTime: 1_000)

    static func step(_ extra: String = "", session: AuthorizeStep.Session? = session, tx: TransactionRecord? = nil,
                     now: Int = 1_100) throws -> AuthorizeStep {
        AuthorizeStep.next(try parse(query(extra)).get(), session: session, transaction: tx, realm: "/", loginJourney: "Login", now: now)
    }

    @Test func authorizeTakesTheUserThroughWhatIsMissing() throws {
        #expect(try Self.step() == .issue(acr: "Login", authTime: 1_000, txn: nil))
        #expect(try Self.step(session: nil) == .authenticate(journey: nil))
        #expect(try Self.step("&prompt=none", session: nil) == .refuse(OAuthError("login_required", "prompt=none, and the user must interact")))
        #expect(try Self.step("&prompt=login") == .authenticate(journey: nil))
        #expect(try Self.step("&max_age=50") == .authenticate(journey: nil))
        #expect(try Self.step("&max_age=500") == .issue(acr: "Login", authTime: 1_000, txn: nil))
        #expect(try Self.step("&acr_values=Confirm") == .authenticate(journey: "Confirm"))
        var stepped = Self.session
        stepped.journeys.append("Confirm")
        #expect(try Self.step("&acr_values=Confirm", session: stepped) == .issue(acr: "Confirm", authTime: 1_000, txn: nil))
    }

    @Test func aTransactionIsApprovedOnTheWayAndOnlyByItsSubject() throws {
        let txid = "7b8bfd4c-60fe-4271-928d-d09b94496f84"
        var tx = TransactionRecord(txid: txid, realm: "/", resource: "https://gw/transfer", method: "POST", subject: "demo",
                                   journey: "Confirm", bodyDigest: nil, bound: [:], display: nil, expires: 2_000)
        #expect(try Self.step("&txid=\(txid)", tx: tx) == .approve(txid: txid))
        #expect(try Self.step("&txid=\(txid)&prompt=none", tx: tx)
                == .refuse(OAuthError("interaction_required", "prompt=none, and the user must interact")))
        tx.state = .completed
        // The session's own authentication, not the approval's journey nor its time (issue 23 item 3).
        #expect(try Self.step("&txid=\(txid)&acr_values=Confirm", tx: tx) == .issue(acr: "Login", authTime: 1_000, txn: txid))
        guard case .refuse(let wrongJourney) = try Self.step("&txid=\(txid)&acr_values=Login", tx: tx) else { Issue.record(); return }
        #expect(wrongJourney.code == "invalid_request")
        tx.subject = "other"
        guard case .refuse(let foreign) = try Self.step("&txid=\(txid)", tx: tx) else { Issue.record(); return }
        #expect(foreign.code == "access_denied")
        guard case .refuse(let gone) = try Self.step("&txid=\(txid)", tx: nil) else { Issue.record(); return }
        #expect(gone.code == "invalid_request")
    }

    @Test func aCodeIsRedeemedOnlyByItsClientRedirectAndVerifier() {
        let g = AuthorizationGrant(clientId: "app", redirectUri: "https://app.example/cb", codeChallenge: Self.challenge, uid: "demo",
                                   realm: "/", scope: ["openid"], nonce: "n", acr: "Login", authTime: 1, txn: nil)
        #expect(AuthorizationGrant.decode(g.encoded) == g)
        #expect(g.redeemRefusal(clientId: "app", redirectUri: "https://app.example/cb", verifier: Self.verifier) == nil)
        #expect(g.redeemRefusal(clientId: "other", redirectUri: "https://app.example/cb", verifier: Self.verifier)?.code == "invalid_grant")
        #expect(g.redeemRefusal(clientId: "app", redirectUri: "https://app.example/other", verifier: Self.verifier)?.code == "invalid_grant")
        #expect(g.redeemRefusal(clientId: "app", redirectUri: "https://app.example/cb", verifier: nil)?.code == "invalid_request")
        #expect(g.redeemRefusal(clientId: "app", redirectUri: "https://app.example/cb", verifier: Self.verifier + "A")?.code == "invalid_grant")
        #expect(AuthorizationGrant.key("abc") != AuthorizationGrant.key("abd") && !AuthorizationGrant.key("abc").contains("abc"))
    }

    @Test func aReusedRefreshTokenRevokesItsFamily() {
        let r = RefreshRecord(family: "f1", clientId: "app", uid: "demo", realm: "/", scope: ["openid"], acr: "Login", authTime: 1,
                              expires: 500)
        #expect(RefreshRecord.decode(r.encoded) == r)
        #expect(RefreshRecord.plan(r, clientId: "app", now: 100) == .rotate)
        #expect(RefreshRecord.plan(r, clientId: "other", now: 100) == .refuse(.invalidGrant("the refresh token was issued to another client")))
        #expect(RefreshRecord.plan(r, clientId: "app", now: 500) == .refuse(.invalidGrant("unknown, expired or revoked refresh token")))
        #expect(RefreshRecord.plan(nil, clientId: "app", now: 100) == .refuse(.invalidGrant("unknown, expired or revoked refresh token")))
        var used = r
        used.used = true
        guard case .revokeFamily("f1", let e) = RefreshRecord.plan(used, clientId: "app", now: 100) else { Issue.record(); return }
        #expect(e.code == "invalid_grant")
        let next = used.successor(now: 100, ttlS: 1000)
        #expect(next.family == "f1" && !next.used && next.expires == 1100)
    }

    @Test func es256TokensVerifyOnlyAsSignedTypedAndInTime() throws {
        let key = try #require(ECSigningKey.generate())
        let published = PublishedKey(key.publicKey)
        let keys: (String) -> ECPublicKey? = { $0 == published.kid ? published.key : nil }
        let claims = TokenClaims.accessToken(issuer: "https://gw/am/oauth2/realms/root", audience: "https://gw", uid: "demo", clientId: "app",
                                             scope: ["openid"], acr: "Login", authTime: 10, jti: "j", now: 100, ttlS: 300, txn: "t1")
        let token = JWS.sign(claims, typ: "at+jwt", kid: published.kid, key: key)
        let v = try JWS.verify(token, typ: "at+jwt", now: 200, keys: keys)
        #expect(v.string("sub") == "demo" && v.string("txn") == "t1" && v.int("exp") == 400 && v.header["kid"]?.stringValue == published.kid)
        #expect(throws: JWSError.expired) { try JWS.verify(token, typ: "at+jwt", now: 400, keys: keys) }
        #expect(throws: JWSError.malformed("typ must be txntoken+jwt")) { try JWS.verify(token, typ: "txntoken+jwt", now: 200, keys: keys) }
        #expect(throws: JWSError.unknownKey(published.kid)) { try JWS.verify(token, typ: nil, now: 200, keys: { _ in nil }) }
        let parts = token.split(separator: ".")
        let other = Base64URL.encode(Array(#"{"sub":"admin","exp":999999}"#.utf8))
        #expect(throws: JWSError.badSignature) { try JWS.verify("\(parts[0]).\(other).\(parts[2])", typ: nil, now: 200, keys: keys) }
        let none = Base64URL.encode(Array(#"{"alg":"none","kid":"\#(published.kid)"}"#.utf8))
        #expect(throws: JWSError.malformed("alg must be ES256")) { try JWS.verify("\(none).\(parts[1]).\(parts[2])", typ: nil, now: 200, keys: keys) }
        // The JWK Set round-trips, with the RFC 7638 thumbprint as kid.
        let set = try #require(PublishedKey.parseSet(Array(PublishedKey.jwkSet([published]).utf8)))
        #expect(set.count == 1 && set[0].kid == published.kid && set[0].key.x == key.publicKey.x)
    }

    /// The key decides the algorithm: an RS256 header cannot be checked against an EC key, nor
    /// ES256 against an RSA key; RSA keys under 2048 bits are refused.
    @Test func theKeyNotTheTokenChoosesTheAlgorithm() throws {
        let key = try #require(ECSigningKey.generate())
        let kid = PublishedKey(key.publicKey).kid
        let token = JWS.sign(["sub": "demo", "exp": 500], typ: "JWT", kid: kid, key: key)
        let parts = token.split(separator: ".")
        let rs = Base64URL.encode(Array(#"{"alg":"RS256","kid":"\#(kid)"}"#.utf8))
        #expect(throws: JWSError.malformed("alg RS256 does not match the key")) {
            try JWS.verify("\(rs).\(parts[1]).\(parts[2])", typ: nil, now: 100, key: { _ in .es256(key.publicKey) })
        }
        let modulus = [UInt8(0xC1)] + [UInt8](repeating: 0x5A, count: 255)
        let rsa = try #require(RSAPublicKey(n: modulus, e: [1, 0, 1]))
        #expect(throws: JWSError.malformed("alg ES256 does not match the key")) {
            try JWS.verify(token, typ: nil, now: 100, key: { _ in .rs256(rsa) })
        }
        #expect(RSAPublicKey(n: Array(modulus.prefix(128)), e: [1, 0, 1]) == nil, "1024-bit RSA")
        let set = #"{"keys":[{"kty":"RSA","kid":"r","n":"\#(Base64URL.encode(modulus))","e":"AQAB"},"#
            + #"{"kty":"EC","crv":"P-384","kid":"p384","x":"AA","y":"AA"},{"kty":"oct","kid":"h","k":"AA"}]}"#
        let parsed = try #require(JWSKey.parseSet(Array(set.utf8)))
        #expect(Array(parsed.keys) == ["r"] && parsed["r"]?.algorithm == "RS256")
    }

    /// A client's P-256 key whose coordinate starts with a zero byte, written without it (as
    /// authlib does for one key in 128), is the same key; a coordinate too long is not.
    @Test func aJWKWithAShortECCoordinateIsTheSameKey() throws {
        var found: ECSigningKey?
        for _ in 0..<5000 {
            guard let k = ECSigningKey.generate() else { continue }
            if k.publicKey.x[0] == 0 { found = k; break }
        }
        let key = try #require(found, "a key with a leading zero byte in x, one in 256")
        let x = key.publicKey.x, y = key.publicKey.y
        func set(_ x: [UInt8]) -> String {
            #"{"keys":[{"kty":"EC","crv":"P-256","kid":"k","x":"\#(Base64URL.encode(x))","y":"\#(Base64URL.encode(y))"}]}"#
        }
        for written in [x, Array(x.dropFirst())] {
            let parsed = try #require(JWSKey.parseSet(Array(set(written).utf8)))
            guard case .es256(let k)? = parsed["k"] else { Issue.record("no key read from \(written.count) bytes"); continue }
            #expect(k.x == x && k.y == y)
        }
        #expect(JWSKey.parseSet(Array(set([0] + x).utf8))?["k"] == nil, "33 bytes")
    }
}
