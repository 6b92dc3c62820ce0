import Foundation
import Testing
import TxGateCrypto
import TestSupport

/// Issue 22 item 3, black-box: `txgate serve` on a Redis that may evict keys refuses to start,
/// saying which setting is wrong and how to fix it; `store.allowEviction: true` starts it.
@Suite(.serialized, .testbed) struct RedisEvictionStartTests {
    @Test(.timeLimit(.minutes(1)))
    func serveRefusesARedisThatMayEvictUnlessAllowed() throws {
        let bed = try Testbed.current
        let redis = try RedisServer.start(in: bed.dir.url, arguments: ["--maxmemory-policy", "allkeys-lru"])
        defer { redis.kill() }
        let key = ["TXGATE_SIGNING_KEY": Base64URL.encode(Crypto.randomBytes(48))]
        func config(port: Int, allowEviction: Bool?) -> [String: Any] {
            var store: [String: Any] = ["type": "redis", "url": redis.url]
            if let allowEviction { store["allowEviction"] = allowEviction }
            return Testbed.gatewayConfig(port: port, upstream: "http://127.0.0.1:9", overrides: deepMerge(TransactionKit.config(), [
                "publicUrl": "http://gw.test", "store": store,
            ]))
        }
        let file = try bed.dir.write("evicting.json", String(decoding: try JSONSerialization.data(
            withJSONObject: config(port: try Ports.free(), allowEviction: nil)), as: UTF8.self))
        let refused = try bed.runTxgate(["serve", "--config", file.path], timeout: 20, environment: key)
        #expect(refused.status != 0, "serve started on an allkeys-lru Redis:\n\(refused)")
        let said = refused.stdout + refused.stderr
        #expect(said.contains("maxmemory-policy 'allkeys-lru'"), "\(refused)")
        #expect(said.contains("noeviction") && said.contains("store.allowEviction"), "the fix:\n\(refused)")

        let allowed = try bed.startGateway(environment: key) { config(port: $0, allowEviction: true) }
        defer { allowed.process.kill() }
        #expect(try allowed.fetch("GET", "/-/health").status == 200)
        let metrics = try allowed.fetch("GET", "/-/metrics")
        #expect(metrics.bodyText.contains("txgate_store_eviction_policy_ok 0"), "\(metrics.bodyText.prefix(300))")
    }
}
