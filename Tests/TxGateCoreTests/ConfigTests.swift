import Foundation
import Testing
import TxGate
@testable import TxGateCore

@Suite struct ConfigTests {
    func decode(_ json: String, folder: String = "/tmp", overrides: ConfigOverrides = ConfigOverrides()) -> Result<GatewayConfig, ConfigErrors> {
        do { return .success(try ConfigLoader.decode(Data(json.utf8), folder: folder, overrides: overrides)) }
        catch { return .failure(error) }
    }

    func errors(_ json: String) -> [String] {
        if case .failure(let e) = decode(json) { return e.errors.map(\.description) }
        return []
    }

    @Test func minimalConfigGetsDefaults() throws {
        let c = try decode(#"{"upstream": {"url": "http://127.0.0.1:9000"}}"#).get()
        #expect(c.listen == HostPort(host: "127.0.0.1", port: 8080))
        #expect(c.upstream.url.authority == "127.0.0.1:9000")
        #expect(c.upstream.connectTimeoutMs == 2000)
        #expect(c.limits.maxBodyBytes == 10 << 20)
        #expect(c.workers >= 1)
        #expect(c.log.access)
        #expect(c.effectivePublicURL.description == "http://127.0.0.1:8080")
    }

    /// Found by the config fuzz target: a `listen` host no URL can name crashed the checks that
    /// compare with the public URL derived from it.
    @Test func aListenHostNoURLCanNameIsAnErrorNotACrash() {
        #expect(errors(#"{"listen": "127.?0..01:8080", "upstream": {"url": "http://a"}}"#)
            == ["listen: '127.?0..01' is not a host name or an IP address"])
        #expect(errors(#"{"listen": "a b:80", "publicUrl": "https://gw.example", "upstream": {"url": "http://a"}}"#)
            == ["listen: 'a b' is not a host name or an IP address"])
    }

    @Test func unknownKeyIsNamedByItsPath() {
        #expect(errors(#"{"upstream": {"url": "http://a", "timeoutMS": 5}}"#) == ["upstream.timeoutMS: unknown key"])
        #expect(errors(#"{"upstream": {"url": "http://a"}, "lsiten": "x"}"#) == ["lsiten: unknown key"])
    }

    @Test func everyErrorIsReportedNotOnlyTheFirst() {
        let e = errors(#"{"workers": "two", "upstream": {"url": "ftp://x", "keepAlive": -1, "bogus": 1}, "limits": {"maxBodyBytes": true}}"#)
        #expect(e.contains("workers: wrong type: expected an integer"))
        #expect(e.contains("upstream.url: 'ftp://x' is not an http:// or https:// URL"))
        #expect(e.contains("upstream.keepAlive: must be 0 or more"))
        #expect(e.contains("upstream.bogus: unknown key"))
        #expect(e.contains("limits.maxBodyBytes: wrong type: expected an integer"))
        #expect(e.count == 5)
    }

    @Test func trustedProxiesAreCIDRsNamedByTheirPath() throws {
        let c = try decode(#"{"upstream": {"url": "http://a"}, "trustedProxies": ["10.0.0.0/8", "::1", "fd00::/8"]}"#).get()
        #expect(c.trustedProxies.ranges.map(\.description) == ["10.0.0.0/8", "::1/128", "fd00::/8"])
        #expect(try decode(#"{"upstream": {"url": "http://a"}}"#).get().trustedProxies.isEmpty)
        #expect(errors(#"{"upstream": {"url": "http://a"}, "trustedProxies": ["10.0.0.0/8", "nginx", "10.0.0.1/33", "10.1.2.3/8"]}"#) == [
            "trustedProxies[1]: 'nginx' is not an IP address or CIDR range (e.g. 10.0.0.0/8, 192.0.2.7, fd00::/8)",
            "trustedProxies[2]: '10.0.0.1/33': the prefix length must be a number from 0 to 32",
            "trustedProxies[3]: '10.1.2.3/8' has bits set after its prefix; did you mean 10.0.0.0/8?",
        ])
        #expect(errors(#"{"upstream": {"url": "http://a"}, "trustedProxies": "10.0.0.0/8"}"#)
                == ["trustedProxies: wrong type: expected an array"])
        #expect(errors(#"{"upstream": {"url": "http://a"}, "readiness": {"intervalMs": 0}}"#) == ["readiness.intervalMs: must be at least 100"])
        #expect(errors(#"{"upstream": {"url": "http://a"}, "readiness": {"everyMs": 5}}"#) == ["readiness.everyMs: unknown key"])
    }

    @Test func missingUpstreamAndBadValues() {
        #expect(errors(#"{}"#) == ["upstream: required key is missing"])
        #expect(errors(#"{"upstream": {}}"#) == ["upstream.url: required key is missing"])
        #expect(errors(#"{"listen": "nope", "upstream": {"url": "http://a"}}"#) == ["listen: 'nope' is not HOST:PORT"])
        #expect(errors(#"{"workers": 0, "upstream": {"url": "http://a"}}"#) == ["workers: must be between 1 and 256"])
        #expect(errors(#"{"upstream": "http://a"}"#) == ["upstream: wrong type: expected an object"])
        #expect(errors(#"{"upstream": {"url": "http://a"}, "log": {"level": "loud"}}"#).first?.hasPrefix("log.level: 'loud' is not one of") == true)
    }

    @Test func slowRequestLimits() throws {
        let d = try decode(#"{"upstream": {"url": "http://a"}}"#).get().limits
        #expect(d.headerTimeoutMs == 10_000 && d.bodyTimeoutMs == 10_000 && d.minBodyRate == 1024 && d.maxConnectionsPerClient == 256)
        let c = try decode(#"{"upstream": {"url": "http://a"}, "limits": {"headerTimeoutMs": 5000, "bodyTimeoutMs": 2000, "minBodyRate": 0, "maxConnectionsPerClient": 0}}"#).get().limits
        #expect(c.headerTimeoutMs == 5000 && c.bodyTimeoutMs == 2000 && c.minBodyRate == 0 && c.maxConnectionsPerClient == 0)
        let e = errors(#"{"upstream": {"url": "http://a"}, "limits": {"headerTimeoutMs": 10, "bodyTimeoutMs": 0, "minBodyRate": -1, "maxConnectionsPerClient": -2, "minBodyRateGraceMs": 1}}"#)
        #expect(e.contains("limits.headerTimeoutMs: must be at least 100"))
        #expect(e.contains("limits.bodyTimeoutMs: must be at least 100"))
        #expect(e.contains("limits.minBodyRate: must be 0 or more"))
        #expect(e.contains("limits.maxConnectionsPerClient: must be 0 or more"))
        #expect(e.contains("limits.minBodyRateGraceMs: unknown key"))
        #expect(e.count == 5)
    }

    @Test func invalidJSONSaysSo() {
        let e = errors(#"{"upstream": "#)
        #expect(e.count == 1)
        #expect(e.first == "upstream: line 1, column 14: expected a value, found end of input")
    }

    @Test func relativePathsResolveAgainstTheConfigFolderAndMustExist() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("txgate-cfg-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try Data("x".utf8).write(to: dir.appendingPathComponent("cert.pem"))
        let json = #"{"upstream": {"url": "https://a", "caFile": "ca.pem"}, "tls": {"certificate": "cert.pem", "privateKey": "key.pem"}}"#
        guard case .failure(let e) = decode(json, folder: dir.path) else { Issue.record("expected errors"); return }
        #expect(e.errors.map(\.path) == ["tls.privateKey", "upstream.caFile"])
        #expect(e.errors[0].message == "cannot read file '\(dir.path)/key.pem'")
        try Data("x".utf8).write(to: dir.appendingPathComponent("key.pem"))
        try Data("x".utf8).write(to: dir.appendingPathComponent("ca.pem"))
        let c = try decode(json, folder: dir.path).get()
        #expect(c.tls?.certificate == dir.path + "/cert.pem")
        #expect(c.upstream.caFile == dir.path + "/ca.pem")
    }

    @Test func commandLineOverridesTheFile() throws {
        let c = try decode(#"{"listen": "127.0.0.1:1", "workers": 4, "upstream": {"url": "http://a"}}"#,
                           overrides: ConfigOverrides(listen: "0.0.0.0:9999", upstream: "https://b:8443/api/", workers: 1)).get()
        #expect(c.listen == HostPort(host: "0.0.0.0", port: 9999))
        #expect(c.workers == 1)
        #expect(c.upstream.url.isTLS)
        #expect(c.upstream.url.authority == "b:8443")
        #expect(c.upstream.url.basePath == "/api")
        if case .failure(let e) = decode(#"{"upstream": {"url": "http://a"}}"#, overrides: ConfigOverrides(workers: 0)) {
            #expect(e.errors.map(\.description) == ["--workers: must be between 1 and 256"])
        } else { Issue.record("expected --workers error") }
    }

    @Test func hostPortForms() {
        #expect(HostPort(parsing: "127.0.0.1:80") == HostPort(host: "127.0.0.1", port: 80))
        #expect(HostPort(parsing: "[::1]:8080") == HostPort(host: "::1", port: 8080))
        #expect(HostPort(parsing: ":8080") == HostPort(host: "0.0.0.0", port: 8080))
        #expect(HostPort(parsing: "host") == nil)
        #expect(HostPort(parsing: "host:99999") == nil)
        #expect(HostPort(parsing: "::1:80") == nil)
    }

    @Test func theShippedGatewayJSONIsValid() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        _ = try ConfigLoader.load(path: root.appendingPathComponent("gateway.json").path)
        let cluster = try ConfigLoader.load(path: root.appendingPathComponent("docker/cluster/gateway.json").path)
        #expect(cluster.store.redis == RedisURL(host: "redis"))
        // compose.yaml gives the instances TXGATE_SIGNING_KEY; without it, check warns.
        #expect(cluster.warnings(environment: ["TXGATE_SIGNING_KEY": "k"]).isEmpty)
        #expect(cluster.warnings(environment: [:]).count == 1)
    }

    @Test func storeTypesAndTheirKeys() throws {
        let redis = try decode(#"{"upstream": {"url": "http://a"}, "store": {"type": "redis", "url": "redis://:pw@127.0.0.1:6379/2", "keyPrefix": "gw1:"}}"#).get()
        #expect(redis.store.type == "redis" && redis.store.url == "redis://:pw@127.0.0.1:6379/2" && redis.store.keyPrefix == "gw1:")
        #expect(errors(#"{"upstream": {"url": "http://a"}, "store": {"type": "redis"}}"#) == ["store.url: required for type redis (redis://host:port/db, or redis+sentinel://host:26379,host:26379/master/db)"])
        #expect(errors(#"{"upstream": {"url": "http://a"}, "store": {"type": "redis", "url": "http://x"}}"#)
            == ["store.url: 'http://x' is not redis://[user:password@]host:port[/db] or redis+sentinel://[user:password@]host:port[,host:port...]/master[/db]"])
        let sentinel = try decode(#"{"upstream": {"url": "http://a"}, "store": {"type": "redis", "url": "redis+sentinel://:pw@s1,s2:26380,s3/mymaster/2"}}"#).get()
        #expect(sentinel.store.redis?.server == .sentinel(master: "mymaster", sentinels: [
            RedisURL.Address(host: "s1", port: 26379), RedisURL.Address(host: "s2", port: 26380), RedisURL.Address(host: "s3", port: 26379)]))
        #expect(sentinel.store.redis?.database == 2 && sentinel.store.redis?.password == "pw")
        #expect(!sentinel.warnings(environment: ["TXGATE_SIGNING_KEY": "x"]).contains { $0.contains("sentinel") })
        #expect(errors(#"{"upstream": {"url": "http://a"}, "store": {"type": "redis", "url": "redis+sentinel://s1,s2:x/m"}}"#)
            == ["store.url: sentinel 2 of 2 ('s2:x'): port 'x' is not a number"])
        let lone = try decode(#"{"upstream": {"url": "http://a"}, "store": {"type": "redis", "url": "redis+sentinel://s1/m"}}"#).get()
        #expect(lone.warnings(environment: ["TXGATE_SIGNING_KEY": "x"]).contains { $0.hasPrefix("store.url lists 1 sentinel for 'm'") })
        #expect(errors(#"{"upstream": {"url": "http://a"}, "store": {"type": "sqlite", "url": "redis://x"}}"#) == ["store.url: only for type redis"])
        #expect(errors(#"{"upstream": {"url": "http://a"}, "store": {"type": "redis", "url": "redis://x:1", "tls": {}}}"#).first?.hasPrefix("store.tls: not supported") == true)
        #expect(errors(#"{"upstream": {"url": "http://a"}, "store": {"type": "memcache"}}"#) == ["store.type: 'memcache' is not a known store (sqlite, redis)"])
        let waiting = try decode(#"{"upstream": {"url": "http://a"}, "store": {"type": "redis", "url": "redis://h", "waitReplicas": 1, "waitTimeoutMs": 50}}"#).get()
        #expect(waiting.store.waitReplicas == 1 && waiting.store.waitTimeoutMs == 50 && waiting.store.timeoutMs == 1000)
        #expect(waiting.store.allowEviction == false, "eviction is refused unless allowed")
        let evicting = try decode(#"{"upstream": {"url": "http://a"}, "store": {"type": "redis", "url": "redis://h", "allowEviction": true}}"#).get()
        #expect(evicting.store.allowEviction)
        #expect(evicting.warnings(environment: ["TXGATE_SIGNING_KEY": "x"]).contains { $0.hasPrefix("store.allowEviction") })
        #expect(errors(#"{"upstream": {"url": "http://a"}, "store": {"allowEviction": true}}"#) == ["store.allowEviction: only for type redis"])
        #expect(errors(#"{"upstream": {"url": "http://a"}, "store": {"type": "redis", "url": "redis://h", "allowEviction": "yes"}}"#).count == 1)
        #expect(errors(#"{"upstream": {"url": "http://a"}, "store": {"type": "redis", "url": "redis://h", "waitTimeoutMs": 1000}}"#)
            == ["store.waitTimeoutMs: must be at least 1 and less than timeoutMs (1000), or the connection is dropped while it waits"])
        #expect(errors(#"{"upstream": {"url": "http://a"}, "store": {"type": "redis", "url": "redis://h", "waitReplicas": -1}}"#) == ["store.waitReplicas: must be 0 or more"])
        #expect(errors(#"{"upstream": {"url": "http://a"}, "store": {"waitReplicas": 1}}"#) == ["store.waitReplicas: only for type redis"])
        #expect(errors(#"{"upstream": {"url": "http://a"}, "store": {"type": "redis", "url": "redis://h:x"}}"#) == ["store.url: port 'x' is not a number"])
    }

    @Test func checkWarnsAboutAClusterWithoutASharedKey() throws {
        let json = #"{"upstream": {"url": "http://a"}, "store": {"type": "redis", "url": "redis://127.0.0.1:6379"}, "policies": [],"#
            + #" "journeys": {"Login": [{"type": "UsernamePassword"}]}}"#
        var c = try decode(json).get()
        #expect(c.warnings(environment: ["TXGATE_SIGNING_KEY": "x"]).count == 1)
        #expect(c.warnings(environment: ["TXGATE_SIGNING_KEY": "x"]).first?.hasPrefix("store.type is redis but publicUrl is not set") == true)
        c.publicUrl = HTTPURL(parsing: "https://bank.example")
        #expect(c.warnings(environment: [:]).count == 1)
        #expect(c.warnings(environment: [:]).first?.contains("TXGATE_SIGNING_KEY") == true)
        #expect(c.warnings(environment: ["TXGATE_SIGNING_KEY": "x"]).isEmpty)
        var withFile = c
        withFile.secrets.signingKeyFileGiven = true
        #expect(withFile.warnings(environment: [:]).isEmpty)
        let plain = try decode(#"{"upstream": {"url": "http://a"}}"#).get()
        #expect(plain.warnings(environment: [:]) == ["no policies: the gateway runs as a plain proxy and forwards every request"])
    }
}

@Suite struct PathsConfigTests {
    func decode(_ paths: String) -> Result<GatewayConfig, ConfigErrors> {
        let json = #"{"upstream": {"url": "http://127.0.0.1:9000"}"# + (paths.isEmpty ? "" : #", "paths": "# + paths) + "}"
        do { return .success(try ConfigLoader.decode(Data(json.utf8), folder: "/tmp")) }
        catch { return .failure(error) }
    }

    func errors(_ paths: String) -> [String] {
        if case .failure(let e) = decode(paths) { return e.errors.map(\.description) }
        return []
    }

    @Test func encodedSlashDefaultsToRejectAndCanKeep() throws {
        #expect(try decode("").get().paths.encodedSlash == .reject)
        #expect(try decode("{}").get().paths.encodedSlash == .reject)
        #expect(try decode(#"{"encodedSlash": "reject"}"#).get().paths.encodedSlash == .reject)
        #expect(try decode(#"{"encodedSlash": "keep"}"#).get().paths.encodedSlash == .keep)
    }

    @Test func semicolonDefaultsToStrip() throws {
        #expect(try decode("").get().paths.semicolon == .strip)
        #expect(try decode("{}").get().paths.semicolon == .strip)
        #expect(try decode(#"{"semicolon": "reject"}"#).get().paths.semicolon == .reject)
        #expect(try decode(#"{"semicolon": "keep"}"#).get().paths.semicolon == .keep)
        #expect(errors(#"{"semicolon": "drop"}"#) == ["paths.semicolon: 'drop' is not one of strip, reject, keep"])
    }

    @Test func badPathsValuesAreNamedByTheirPath() {
        #expect(errors(#"{"encodedSlash": "decode"}"#) == ["paths.encodedSlash: 'decode' is not one of reject, keep"])
        #expect(errors(#"{"encodedSlash": true}"#) == ["paths.encodedSlash: wrong type: expected a string"])
        #expect(errors(#"{"mergeSlashes": false}"#) == ["paths.mergeSlashes: unknown key"])
        #expect(errors(#""keep""#) == ["paths: wrong type: expected an object"])
    }

    @Test func aPolicyPatternWithADotSegmentIsRefused() {
        let json = #"{"upstream": {"url": "http://a"}, "policies": [{"name": "x", "resources": ["/pub/../x"], "actions": ["GET"], "subjects": "anyone"}]}"#
        guard case .failure(let e) = (Result { try ConfigLoader.decode(Data(json.utf8), folder: "/tmp") }.mapError { $0 as! ConfigErrors }) else {
            Issue.record("accepted"); return
        }
        #expect(e.errors.map(\.description).first?.hasPrefix("policies[0].resources: '/pub/../x' is not a path pattern") == true)
    }
}
