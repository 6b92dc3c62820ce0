import Foundation
import TestSupport
import TxGateCore
import TxGateCrypto

/// The OAuth 2.0 provider's test setup: TransactionKit's users, journeys and policies plus a
/// registered public PKCE client, and the authlib client script (`oauth/client.py`).
enum OAuthKit {
    static let clientScript = BinaryLocator.packageRoot.appendingPathComponent("Tests/IntegrationTests/oauth/client.py")
    static let issuerPath = "/am/oauth2/realms/root"

    static func config(_ extra: [String: Any] = [:]) -> [String: Any] {
        TransactionKit.config(deepMerge([
            "oauth2": ["clients": [[
                "clientId": "app", "public": true, "redirectUris": ["http://127.0.0.1/callback"],
                "postLogoutRedirectUris": ["http://127.0.0.1/bye"], "scopes": ["openid", "profile", "email"],
            ]]],
        ], extra))
    }

    /// Runs `client.py` (authlib) against the gateway and returns what it reports.
    static func runClient(_ bed: Testbed, _ g: GatewayInstance, scenario: String, code: String = "") throws -> [String: Any] {
        let r = try bed.runTool("python3", [clientScript.path, "http://127.0.0.1:\(g.port)", scenario, "demo", TransactionKit.password, code],
                                timeout: 60)
        let last = r.stdout.split(separator: "\n").last.map(String.init) ?? ""
        guard r.status == 0, let obj = (try? JSONSerialization.jsonObject(with: Data(last.utf8))) as? [String: Any] else {
            if r.stderr.contains("No module named 'authlib'") {
                throw HarnessError("authlib is not installed: run scripts/install-deps.sh (it installs authlib with pip)")
            }
            throw HarnessError("client.py \(scenario) failed:\n\(r)")
        }
        return obj
    }

    /// The claims of a JWT, unverified (the tests verify with the published keys separately).
    static func claims(_ jwt: String) -> [String: Any] {
        let parts = jwt.split(separator: ".")
        guard parts.count == 3, let bytes = Base64URL.decode(String(parts[1])) else { return [:] }
        return ((try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any]) ?? [:]
    }

    static func header(_ jwt: String) -> [String: Any] {
        guard let first = jwt.split(separator: ".").first, let bytes = Base64URL.decode(String(first)) else { return [:] }
        return ((try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any]) ?? [:]
    }

    /// The gateway's signing key, read from its key folder (the tests own the folder).
    static func gatewayKey(_ bed: Testbed) throws -> ECSigningKey {
        let folder = bed.dir.url.appendingPathComponent("var/token-keys")
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".pem") }.sorted()
        guard let newest = names.last, let data = FileManager.default.contents(atPath: folder.appendingPathComponent(newest).path),
              let key = ECSigningKey(pem: Array(data)) else { throw HarnessError("no token key in \(folder.path)") }
        return key
    }

    /// A Transaction Token as the gateway would sign it, with `key`.
    static func txnToken(key: ECSigningKey, bound: [String: JSONValue], audience: String = "demo-bank", exp: Int? = nil) -> String {
        let now = Int(Date().timeIntervalSince1970)
        var claims = TokenClaims.transactionToken(issuer: "test", audience: audience, txn: UUID().uuidString.lowercased(), uid: "demo",
                                                  scope: "", tctx: ["method": "POST", "bound": .object(bound)], rctx: [:],
                                                  now: now, ttlS: 60)
        if let exp { claims["exp"] = .number(exp) }
        return JWS.sign(claims, typ: "txntoken+jwt", kid: PublishedKey(key.publicKey).kid, key: key)
    }
}

extension OAuthKit {
    static let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"

    /// An authorization code for the session `session` (authorize with PKCE), then the token
    /// response, as an app would get them after the login page. `extra`: more authorize parameters.
    static func tokens(_ g: GatewayInstance, session: String, scope: String = "openid profile", extra: String = "") throws -> [String: Any] {
        let challenge = PKCE.s256(verifier)
        let authorize = try g.fetch("GET", issuerPath + "/authorize?client_id=app&response_type=code&scope=" + Query.encode(scope)
            + "&redirect_uri=\(Query.encode("http://127.0.0.1/callback"))&code_challenge=\(challenge)&code_challenge_method=S256" + extra,
            headers: [("Cookie", "iPlanetDirectoryPro=\(session)")])
        guard authorize.status == 302, let location = authorize.header("Location"),
              let code = Query(target: location)["code"] else { throw HarnessError("no code from authorize:\n\(authorize)") }
        let form = "grant_type=authorization_code&client_id=app&code=\(code)&code_verifier=\(verifier)"
            + "&redirect_uri=\(Query.encode("http://127.0.0.1/callback"))"
        let r = try g.fetch("POST", issuerPath + "/access_token", headers: [("Content-Type", "application/x-www-form-urlencoded")],
                            body: Array(form.utf8))
        guard r.status == 200 else { throw HarnessError("token request failed:\n\(r)") }
        return try r.json()
    }

    static func accessToken(_ g: GatewayInstance, session: String, scope: String = "openid profile", extra: String = "") throws -> String {
        guard let t = try tokens(g, session: session, scope: scope, extra: extra)["access_token"] as? String else { throw HarnessError("no access_token") }
        return t
    }
}
