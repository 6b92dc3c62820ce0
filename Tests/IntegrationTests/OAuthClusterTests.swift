import Foundation
import Testing
import TxGateCore
import TestSupport

/// The provider on Redis, across instances: a code issued by one instance is redeemed once on
/// any, refresh rotation and reuse detection hold across instances, and an access token from one
/// is a subject on the other (same key folder, same publicUrl).
@Suite(.testbed, .enabled(if: RedisServer.isInstalled, "redis-server is not installed (run scripts/install-deps.sh)"))
struct OAuthClusterTests {
    @Test func codesAndRefreshFamiliesAreOneShotAcrossInstances() throws {
        let bed = try Testbed.current
        let keys = bed.dir.url.appendingPathComponent("shared-token-keys").path
        let cluster = try Cluster(bed: bed, instances: 2) { _ in
            OAuthKit.config(["secrets": ["tokenKeysFolder": keys]])
        }
        let (a, b) = (cluster[0], cluster[1])
        let session = try TransactionKit.login(a)
        let challenge = PKCE.s256(OAuthKit.verifier)
        let authorize = try a.fetch("GET", OAuthKit.issuerPath + "/authorize?client_id=app&response_type=code&scope=openid"
            + "&redirect_uri=\(Query.encode("http://127.0.0.1/callback"))&code_challenge=\(challenge)&code_challenge_method=S256",
            headers: [("Cookie", "iPlanetDirectoryPro=\(session)")])
        let code = try #require(authorize.header("Location").flatMap { Query(target: $0)["code"] }, "\(authorize)")
        func token(_ g: GatewayInstance, _ form: String) throws -> HTTPResponse {
            try g.fetch("POST", OAuthKit.issuerPath + "/access_token", headers: [("Content-Type", "application/x-www-form-urlencoded")],
                        body: Array(("client_id=app&" + form).utf8))
        }
        let redeem = "grant_type=authorization_code&code=\(code)&code_verifier=\(OAuthKit.verifier)"
            + "&redirect_uri=\(Query.encode("http://127.0.0.1/callback"))"
        let first = try token(b, redeem)
        #expect(first.status == 200, "\(first)")
        let again = try token(a, redeem)
        #expect(try again.status == 400 && again.json()["error"] as? String == "invalid_grant", "\(again)")

        // The access token B issued is a subject on A.
        let access = try #require(try first.json()["access_token"] as? String)
        #expect(try a.fetch("GET", "/accounts", headers: [("Authorization", "Bearer \(access)")]).status == 200)

        let old = try #require(try first.json()["refresh_token"] as? String)
        let rotated = try token(b, "grant_type=refresh_token&refresh_token=\(old)")
        #expect(rotated.status == 200, "\(rotated)")
        let successor = try #require(try rotated.json()["refresh_token"] as? String)
        let reused = try token(a, "grant_type=refresh_token&refresh_token=\(old)")
        #expect(try reused.status == 400 && reused.json()["error"] as? String == "invalid_grant", "\(reused)")
        let revoked = try token(b, "grant_type=refresh_token&refresh_token=\(successor)")
        #expect(revoked.status == 400, "reuse on A must revoke the family on B too: \(revoked)")
        #expect(try cluster.redis.keys().allSatisfy { !$0.contains(code) && !$0.contains(old) }, "tokens in clear in Redis keys")
    }
}
