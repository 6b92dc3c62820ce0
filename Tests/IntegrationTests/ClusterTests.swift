import Foundation
import Testing
import TxGateCore
import TxGateCrypto
#if canImport(Glibc)
import Glibc
#endif
import TestSupport

/// Cluster mode end to end: several `txgate serve` processes sharing one real redis-server
/// (`store.type` redis) and one signing key (TXGATE_SIGNING_KEY), in front of one demo-bank,
/// as a load balancer would spread one client's requests over them. Everything is judged on
/// the wire: a journey started on one instance continues on another, a transaction approved
/// on one is consumed exactly once across all of them, a magic link works once whichever
/// instance opens it, a Redis outage fails closed with a quick 503 and heals by itself, and a
/// session outlives the instance that created it.
///
/// Serialized: the outage tests measure response times, and the races start 100 threads.
@Suite(.serialized, .testbed) struct ClusterTests {
    typealias Kit = TransactionKit
    typealias Magic = MagicLinkTests

    // MARK: 1. Login on A, challenge on B, approval on C, retry on A; once only

    @Test(.timeLimit(.minutes(1)))
    func aTransactionChallengedApprovedAndUsedOnDifferentInstancesIsUsedOnce() throws {
        let bed = try Testbed.current
        let cluster = try Cluster(bed: bed, instances: 3) { _ in Kit.config() }
        let (a, b, c) = (cluster[0], cluster[1], cluster[2])
        var codes = Kit.Codes()

        // The login journey starts on C and finishes on A (the authId is signed with the shared
        // key, so A continues C's journey); A creates the session, every instance knows it.
        let token = try Cluster.login(start: c, finish: a)
        for g in [a, b, c] { try Magic.expectSession(g, token, uid: "demo") }
        #expect(try a.fetch("GET", "/accounts", headers: [("iPlanetDirectoryPro", token)]).status == 200)

        // The challenge, on B.
        let first = try Kit.transfer(b, token: token, body: Kit.transferBody)
        #expect(first.status == 401, "first try on B:\n\(first)")
        let txid = try Kit.challengeTxid(first)
        #expect(!first.bodyText.contains("executed"))

        // The approval journey, on C: it shows what B's transaction approves.
        let start = try Kit.startComposite(c, txid: txid, session: .header(token))
        #expect(start.status == 200, "composite_advice start on C for B's transaction:\n\(start)")
        let step = try start.json()
        let callbacks = try #require(step["callbacks"] as? [[String: Any]], "\(start)")
        #expect(callbacks.map { $0["type"] as? String } == ["TextOutputCallback", "PasswordCallback"], "\(callbacks)")
        #expect(Kit.output(callbacks.first, "message") as? String == "Approve 100 EUR to Bob?", "\(callbacks)")
        let done = try Kit.post(c, Kit.authPath, Kit.answer(step, [codes.next(Kit.demoSecret)]),
                                headers: [("iPlanetDirectoryPro", token)])
        #expect(done.status == 200, "answering the TOTP step on C:\n\(done)")
        #expect((try? done.json())?["tokenId"] as? String == token, "the approval must answer with the same session: \(done)")

        // The retry, on A: allowed, and demo-bank executes it (its first transfer).
        let retry = try Kit.transfer(a, token: token, body: Kit.transferBody, query: "?_txid=\(txid)")
        #expect(retry.status == 201, "retry with _txid on A:\n\(retry)")
        let executed = try retry.json()
        #expect(executed["status"] as? String == "executed", "\(retry)")
        #expect((executed["amount"] as? NSNumber)?.intValue == 100)
        #expect(executed["payee"] as? String == "Bob")
        #expect((executed["sequence"] as? NSNumber)?.intValue == 1, "\(retry)")

        // The same TxId again, on every instance: a challenge each time, never an allow; never
        // the consumed TxId, and one new transaction for the one request, whichever instance.
        var offered: Set<String> = []
        for (name, g) in [("B", b), ("C", c), ("A", a)] {
            let again = try Kit.transfer(g, token: token, body: Kit.transferBody, query: "?_txid=\(txid)")
            #expect(again.status == 401, "the consumed TxId on \(name):\n\(again)")
            #expect(!again.bodyText.contains("executed"), "\(again)")
            let fresh = try Kit.challengeTxid(again)
            #expect(fresh != txid, "\(name) offered the consumed TxId")
            offered.insert(fresh)
        }
        #expect(offered.count == 1, "one request challenged again on three instances got \(offered.count) TxIds")
    }

    // MARK: 2. 100 concurrent retries over three instances: exactly one executes

    @Test(.timeLimit(.minutes(1)))
    func aHundredConcurrentRetriesAcrossThreeInstancesAllowExactlyOne() throws {
        let bed = try Testbed.current
        // A pending limit high enough that the 99 refusals are challenges rather than 429s.
        let cluster = try Cluster(bed: bed, instances: 3) { _ in
            Kit.config(["security": ["maxPendingTransactions": 500]])
        }
        let (a, b, c) = (cluster[0], cluster[1], cluster[2])
        var codes = Kit.Codes()
        let token = try Kit.login(a)
        let txid = try Kit.approvedTransfer(b, approveOn: c, token: token, codes: &codes)

        let n = 100
        let instances = [a, b, c]
        let results = try Cluster.race(n, timeout: 45) { i in
            (instances[i % 3].port, "POST", "/transfer?_txid=\(txid)", Kit.apiHeaders(token), Kit.transferBody)
        }

        var allowed: [(Int, HTTPResponse)] = []
        var challenged: [String] = []
        var other: [String] = []
        for (i, r) in results.enumerated() {
            let name = ["A", "B", "C"][i % 3]
            switch r {
            case .failure(let e): other.append("#\(i) on \(name): error: \(e)")
            case .success(let resp) where (200..<300).contains(resp.status): allowed.append((i, resp))
            case .success(let resp) where resp.status == 401:
                if let t = try? Kit.challengeTxid(resp), !resp.bodyText.contains("executed") {
                    challenged.append(t)
                } else {
                    other.append("#\(i) on \(name): \(resp)")
                }
            case .success(let resp): other.append("#\(i) on \(name): \(resp)")
            }
        }
        #expect(results.count == n)
        let allowedText = allowed.map { "#\($0.0) on \(["A", "B", "C"][$0.0 % 3]): \($0.1)" }.joined(separator: "\n---\n")
        #expect(allowed.count == 1, "allowed \(allowed.count) times:\n\(allowedText)")
        #expect(challenged.count == n - 1, "challenged \(challenged.count) of \(n)")
        #expect(other.isEmpty, "unexpected answers (\(other.count)):\n\(other.prefix(5).joined(separator: "\n---\n"))")
        #expect(!challenged.contains(txid), "the consumed TxId was offered again")
        // One request challenged again on three instances: one transaction waits, one TxId.
        #expect(Set(challenged).count == 1, "the refusals of one request got \(Set(challenged).count) TxIds")
        if let winner = allowed.first {
            #expect(winner.1.status == 201, "\(winner.1)")
            #expect((try? winner.1.json())?["sequence"] as? NSNumber == 1, "\(winner.1)")
        }

        // demo-bank executed exactly one of the 100: the next approved transfer is its second.
        let probeTxid = try Kit.approvedTransfer(c, approveOn: a, token: token, codes: &codes)
        let next = try Kit.transfer(b, token: token, body: Kit.transferBody, query: "?_txid=\(probeTxid)")
        #expect(next.status == 201, "\(next)")
        #expect((try? next.json())?["sequence"] as? NSNumber == 2, "demo-bank executed more than one of the \(n): \(next)")
    }

    // MARK: 3. A magic link resumed on two instances at once continues once

    @Test(.timeLimit(.minutes(1)))
    func aMagicLinkResumedConcurrentlyOnTwoInstancesContinuesOnce() throws {
        let bed = try Testbed.current
        let outbox = bed.dir.url.appendingPathComponent("outbox", isDirectory: true)
        let cluster = try Cluster(bed: bed, instances: 3) { pub in
            Magic.config(pub, email: ["outbox": outbox.path])
        }
        let (a, b, c) = (cluster[0], cluster[1], cluster[2])

        // Three links (the default email limit is 5 per user), each raced by 8 clients on B and
        // 8 on C; the journey was suspended on A.
        let perInstance = 8
        for round in 1...3 {
            Magic.expectSuspended(try Magic.requestLink(a, user: "demo"))
            let mails = try MailTools.waitForOutbox(outbox, count: round)
            let (link, id) = try #require(mails.last?.magicLink(), "no magic link in \(mails)")
            #expect(link == "\(cluster.publicUrl)/am/XUI/?realm=/&suspendedId=\(id)", "link: \(link)")

            let results = try Cluster.race(2 * perInstance, timeout: 30) { i in
                ((i % 2 == 0 ? b : c).port, "POST", Magic.authPath + "?suspendedId=\(id)", Magic.jsonHeaders, [])
            }
            var tokens: [(String, String)] = []
            var refused = 0
            var other: [String] = []
            for (i, r) in results.enumerated() {
                let name = i % 2 == 0 ? "B" : "C"
                switch r {
                case .failure(let e): other.append("#\(i) on \(name): error: \(e)")
                case .success(let resp) where resp.status == 200:
                    if let t = (try? resp.json())?["tokenId"] as? String { tokens.append((name, t)) } else { other.append("#\(i) on \(name): \(resp)") }
                case .success(let resp) where resp.status == 401 && resp.bodyText == Magic.notFound: refused += 1
                case .success(let resp): other.append("#\(i) on \(name): \(resp)")
                }
            }
            #expect(tokens.count == 1, "round \(round): \(tokens.count) resumes got a session (on \(tokens.map(\.0)))")
            #expect(refused == 2 * perInstance - 1,
                    "round \(round): \(refused) exact SuspendedAuthSessionException answers; others:\n\(other.prefix(5).joined(separator: "\n---\n"))")
            #expect(other.isEmpty, "round \(round): unexpected answers (\(other.count)):\n\(other.prefix(5).joined(separator: "\n---\n"))")
            // The session the winner got is known everywhere; the link is used up everywhere.
            if let (_, token) = tokens.first {
                try Magic.expectSession(a, token, uid: "demo")
                #expect(try a.fetch("GET", "/accounts", headers: [("iPlanetDirectoryPro", token)]).status == 200)
            }
            Magic.expectNotFound(try Magic.resume(a, id), "round \(round): the link on A after B and C raced for it")
        }
    }

    // MARK: 4. Redis killed during traffic: a quick 503, open routes open, then it heals

    @Test(.timeLimit(.minutes(1)))
    func aRedisOutageFailsClosedQuicklyAndHealsWithoutARestart() throws {
        let bed = try Testbed.current
        let cluster = try Cluster(bed: bed, instances: 2) { _ in Kit.config() }
        let (a, b) = (cluster[0], cluster[1])
        let token = try Kit.login(a)
        let withSession = [("iPlanetDirectoryPro", token)]
        for g in [a, b] {
            #expect(try g.fetch("GET", "/accounts", headers: withSession).status == 200)
            let health = try g.fetch("GET", "/-/health")
            #expect(health.status == 200, "\(health)")
            #expect((try? health.json())?["store"] as? String == "up", "\(health)")
        }

        // Traffic on both instances; Redis is killed in the middle of it.
        let traffic = Traffic(threads: 4) { k in
            let g = k % 2 == 0 ? a : b
            return try g.fetch("GET", "/accounts", headers: withSession, timeout: 10)
        }
        Timing.sleep(0.5)
        let killedAt = Timing.now()
        cluster.redis.kill()
        Timing.sleep(2.0)
        let samples = traffic.stop()

        let before = samples.filter { $0.end < killedAt }
        // A session read from Redis less than a second before the kill is still answered from
        // the gateway's session cache until that second is up (`SessionCache.maxAgeNanos`, the
        // documented bound), so "well after" starts past it.
        let after = samples.filter { $0.start > killedAt + 1.2 }
        #expect(!before.isEmpty && !after.isEmpty, "\(before.count) requests before the kill, \(after.count) after")
        #expect(before.allSatisfy { (try? $0.result.get().status) == 200 },
                "before the kill: \(before.compactMap { try? $0.result.get().status })")
        var worst = 0.0
        for s in samples {
            worst = max(worst, s.end - s.start)
            switch s.result {
            case .failure(let e): Issue.record("a request during the outage failed on the wire: \(e)")
            case .success(let r):
                #expect(r.status == 200 || r.status == 503, "during the outage, only 200 (before) or 503 (after):\n\(r)")
                if r.status == 503 { expectGatewayError(r, 503) }
            }
        }
        #expect(worst < 3, "the slowest answer around the kill took \(worst) s")
        for s in after {
            #expect((try? s.result.get().status) == 503, "a request well after the kill: \(s.result)")
        }

        // What needs state fails closed, quickly, as a JSON error, on both instances.
        for (name, g) in [("A", a), ("B", b)] {
            let (accounts, t1) = try Timing.measure { try g.fetch("GET", "/accounts", headers: withSession) }
            expectGatewayError(accounts, 503)
            #expect(t1 < 3, "\(name): GET /accounts took \(t1) s with Redis down")
            #expect(!accounts.hasHeader("WWW-Authenticate") && !accounts.hasHeader("Location"), "\(accounts)")

            let (transfer, t2) = try Timing.measure { try Kit.transfer(g, token: token, body: Kit.transferBody) }
            expectGatewayError(transfer, 503)
            #expect(t2 < 3, "\(name): POST /transfer took \(t2) s with Redis down")
            #expect(!transfer.hasHeader("WWW-Authenticate"), "a transaction was offered with Redis down:\n\(transfer)")

            // A login cannot end in a session that nothing can store.
            let (login, t3) = try Timing.measure { () -> HTTPResponse in
                let start = try Kit.post(g, Kit.authPath, nil)
                guard start.status == 200, let step = try? start.json() else { return start }
                return try Kit.post(g, Kit.authPath, Kit.answer(step, ["demo", Kit.password]))
            }
            expectGatewayError(login, 503)
            #expect((try? login.json())?["tokenId"] == nil, "\(login)")
            #expect(!login.hasHeader("Set-Cookie"), "\(login)")
            #expect(t3 < 3, "\(name): the login took \(t3) s with Redis down")

            // Open routes need no state, with or without a session.
            for headers in [[], withSession] {
                let (open, t4) = try Timing.measure { try g.fetch("GET", "/health", headers: headers) }
                #expect(open.status == 200, "\(name): /health (anyone) with Redis down:\n\(open)")
                #expect((try? open.json())?["status"] as? String == "ok", "\(open)")
                #expect(t4 < 3, "\(name): /health took \(t4) s")
            }

            // The gateway's own health says what is wrong.
            let (health, t5) = try Timing.measure { try g.fetch("GET", "/-/health") }
            #expect(health.status == 503, "\(name): /-/health with Redis down:\n\(health)")
            #expect(health.header("Content-Type")?.lowercased().hasPrefix("application/json") == true, "\(health.headerSummary)")
            #expect((try? health.json())?["store"] as? String == "down", "\(health)")
            #expect(t5 < 3, "\(name): /-/health took \(t5) s")
        }

        // Redis comes back on the same port, empty. Both instances reconnect by themselves.
        try cluster.redis.start()
        let restartedAt = Timing.now()
        var recovered: [String: Double] = [:]
        var lastFailure: [String: String] = [:]
        Timing.poll(timeout: 15, interval: 0.25) {
            for (name, g) in [("A", a), ("B", b)] where recovered[name] == nil {
                do {
                    try Cluster.expectServing(g)
                    recovered[name] = Timing.now() - restartedAt
                } catch {
                    lastFailure[name] = "\(error)"
                }
            }
            return recovered.count == 2
        }
        #expect(recovered["A"] != nil, "A did not serve again within 15 s of Redis's restart; last: \(lastFailure["A"] ?? "")")
        #expect(recovered["B"] != nil, "B did not serve again within 15 s of Redis's restart; last: \(lastFailure["B"] ?? "")")
        guard recovered.count == 2 else { return }

        // The old session died with Redis's data: it is a login challenge now, not a 503 or an allow.
        let old = try a.fetch("GET", "/accounts", headers: [("x-authenticate-response", "header")] + withSession)
        #expect(old.status == 401, "the session from before the restart of an empty Redis:\n\(old)")
        #expect((try? Kit.bodyAdvices(old)) == ["AuthenticateToServiceConditionAdvice": ["/:Login"]], "\(old)")
        // A new session from A works on B.
        let fresh = try Kit.login(a)
        #expect(try b.fetch("GET", "/accounts", headers: [("iPlanetDirectoryPro", fresh)]).status == 200)
    }

    // MARK: 4b. A Redis that hangs (SIGSTOP): the store timeout answers, not the client's

    @Test(.timeLimit(.minutes(1)))
    func aHungRedisIsA503WithinTheStoreTimeoutAndDataSurvivesItsReturn() throws {
        let bed = try Testbed.current
        let cluster = try Cluster(bed: bed, instances: 2) { _ in Kit.config() }
        let (a, b) = (cluster[0], cluster[1])
        let token = try Kit.login(a)
        let withSession = [("iPlanetDirectoryPro", token)]
        #expect(try b.fetch("GET", "/accounts", headers: withSession).status == 200)

        cluster.redis.pause()
        defer { cluster.redis.resume() }
        for (name, g) in [("A", a), ("B", b)] {
            for attempt in 1...2 {
                let (accounts, t) = try Timing.measure { try g.fetch("GET", "/accounts", headers: withSession, timeout: 15) }
                expectGatewayError(accounts, 503)
                #expect(t < 3, "\(name) #\(attempt): GET /accounts took \(t) s with Redis hung (store timeout 1000 ms)")
            }
            let (health, th) = try Timing.measure { try g.fetch("GET", "/-/health", timeout: 15) }
            #expect(health.status == 503, "\(name): /-/health with Redis hung:\n\(health)")
            #expect((try? health.json())?["store"] as? String == "down", "\(health)")
            #expect(th < 3, "\(name): /-/health took \(th) s with Redis hung")
            let (open, to) = try Timing.measure { try g.fetch("GET", "/health", timeout: 15) }
            #expect(open.status == 200, "\(name): /health (anyone) with Redis hung:\n\(open)")
            #expect(to < 3, "\(name): /health took \(to) s")
        }

        // Redis answers again; nothing was lost, so the same session works again on both.
        cluster.redis.resume()
        for (name, g) in [("A", a), ("B", b)] {
            var last: HTTPResponse?
            let ok = Timing.poll(timeout: 15, interval: 0.25) {
                last = try? g.fetch("GET", "/accounts", headers: withSession)
                return last?.status == 200
            }
            #expect(ok, "\(name): the session did not work again within 15 s of Redis resuming; last:\n\(last.map { "\($0)" } ?? "no answer")")
        }
    }

    // MARK: 5. A session and an approval outlive the instance that made them

    @Test(.timeLimit(.minutes(1)))
    func aSessionAndAnApprovalSurviveAnInstanceRestart() throws {
        let bed = try Testbed.current
        let cluster = try Cluster(bed: bed, instances: 2) { _ in Kit.config() }
        let (a, b) = (cluster[0], cluster[1])
        var codes = Kit.Codes()
        let token = try Kit.login(a)
        let txid = try Kit.approvedTransfer(a, token: token, codes: &codes)

        a.process.terminate()
        #expect(a.process.waitForExit(timeout: 15) == 0, "A's exit after SIGTERM; stderr:\n\(a.process.stderrTail())")
        // While A is down, B serves the session.
        try Magic.expectSession(b, token, uid: "demo")

        // A new process on A's port, in a new, empty directory: nothing comes from A's disk.
        let a2 = try cluster.startInstance(name: "A2", port: a.port)
        try Magic.expectSession(a2, token, uid: "demo")
        let accounts = try a2.fetch("GET", "/accounts", headers: [("iPlanetDirectoryPro", token)])
        #expect(accounts.status == 200, "the session made by the old A, on the new A:\n\(accounts)")
        let cookie = try a2.fetch("GET", "/accounts", headers: [("Cookie", "iPlanetDirectoryPro=\(token)")])
        #expect(cookie.status == 200, "the same as a cookie:\n\(cookie)")

        // The approval made on the old A is used once, on the new A.
        let retry = try Kit.transfer(a2, token: token, body: Kit.transferBody, query: "?_txid=\(txid)")
        #expect(retry.status == 201, "retry on the new A with the old A's approval:\n\(retry)")
        #expect((try? retry.json())?["sequence"] as? NSNumber == 1, "\(retry)")
        let again = try Kit.transfer(b, token: token, body: Kit.transferBody, query: "?_txid=\(txid)")
        #expect(again.status == 401, "the consumed TxId on B:\n\(again)")
        #expect(try Kit.challengeTxid(again) != txid)

        // Logout on the new A ends the session on B too, within B's session cache bound (1 s).
        let logout = try Magic.post(a2, "/am/json/realms/root/sessions?_action=logout", nil, headers: [("iPlanetDirectoryPro", token)])
        #expect(logout.status == 200, "\(logout)")
        Timing.sleep(1.1)
        let validate = try Magic.post(b, Magic.validatePath, nil, headers: [("iPlanetDirectoryPro", token)])
        #expect((try? validate.json())?["valid"] as? Bool == false, "the session after logout on another instance: \(validate)")
        let afterLogout = try b.fetch("GET", "/accounts", headers: [("x-authenticate-response", "header"), ("iPlanetDirectoryPro", token)])
        #expect(afterLogout.status == 401, "the logged-out session on B:\n\(afterLogout)")
    }

    // MARK: 6. What Redis holds: everything under keyPrefix, no token or link id in clear

    @Test(.timeLimit(.minutes(1)))
    func redisHoldsOnlyPrefixedKeysAndNoTokensOrLinkIdsInClear() throws {
        let bed = try Testbed.current
        let outbox = bed.dir.url.appendingPathComponent("outbox", isDirectory: true)
        let prefix = "it-\(UUID().uuidString.prefix(8).lowercased()):"
        let cluster = try Cluster(bed: bed, instances: 1, keyPrefix: prefix) { pub in
            Magic.config(pub, email: ["outbox": outbox.path])
        }
        let a = cluster[0]

        Magic.expectSuspended(try Magic.requestLink(a, user: "demo"))
        let (_, id) = try #require(try MailTools.waitForOutbox(outbox).last?.magicLink())
        let password = try Magic.passwordLogin(a, user: "other")
        let token = try Magic.expectSignedIn(try Magic.resume(a, id))
        try Magic.expectSession(a, password, uid: "other")

        let keys = try cluster.redis.keys()
        #expect(!keys.isEmpty, "nothing in Redis after two logins")
        #expect(keys.allSatisfy { $0.hasPrefix(prefix) }, "keys outside keyPrefix '\(prefix)': \(keys.filter { !$0.hasPrefix(prefix) })")
        let values = try cluster.redis.dumpValues()
        for secret in [token, password, id] {
            #expect(!keys.contains { $0.contains(secret) }, "a key holds a token or link id in clear")
            #expect(!values.contains { String(decoding: $0.bytes, as: UTF8.self).contains(secret) },
                    "the value of \(values.first { String(decoding: $0.bytes, as: UTF8.self).contains(secret) }?.key ?? "") holds a token or link id in clear")
        }
        // The SQLite store was not used: no database next to the instance's configuration.
        let local = a.configURL.deletingLastPathComponent().appendingPathComponent("var/txgate.db")
        #expect(!FileManager.default.fileExists(atPath: local.path), "a SQLite store was created at \(local.path)")
    }
}

// MARK: - The cluster harness

/// One redis-server, one demo-bank and N txgate instances with the same configuration apart from
/// `listen`: the same `publicUrl` (the load balancer's URL, so that a transaction's resource is
/// the same whichever instance sees the request), the same Redis and the same
/// TXGATE_SIGNING_KEY. Each instance runs from its own directory, so nothing is shared through
/// the file system (no signing key file, no SQLite file).
final class Cluster: @unchecked Sendable {
    // @unchecked: `processes` is only touched under `lock`; `instances` and `build` are only
    // written in init, by the test's own thread.
    let bed: Testbed
    let redis: RedisServer
    let bank: DemoBankInstance
    let signingKey: String
    let keyPrefix: String
    /// What a load balancer in front of the instances would be; never connected to.
    let publicUrl = "http://txgate-cluster.test:8080"
    private let build: (String) -> [String: Any]
    private let lock = NSLock()
    private var processes: [SpawnedProcess] = []
    private(set) var instances: [GatewayInstance] = []

    /// `config` gets `publicUrl` and returns the configuration (users, journeys, policies, ...);
    /// listen, upstream, store, publicUrl and workers (2) are set here.
    init(bed: Testbed, instances count: Int, keyPrefix: String = "txgate:",
         config: @escaping (String) -> [String: Any]) throws {
        self.bed = bed
        self.keyPrefix = keyPrefix
        build = config
        signingKey = Base64URL.encode(Crypto.randomBytes(48))
        redis = try RedisServer.start(in: bed.dir.url)
        bank = try bed.startDemoBank()
        // Instances first, then Redis, when the test ends (the testbed would kill them in any order).
        bed.onCleanup { self.cleanup() }
        for i in 0..<count {
            instances.append(try startInstance(name: String(UnicodeScalar(UInt8(ascii: "A") + UInt8(i)))))
        }
    }

    deinit { cleanup() }

    subscript(_ i: Int) -> GatewayInstance { instances[i] }

    /// Kills every instance, then Redis (demo-bank is the testbed's).
    func cleanup() {
        lock.lock()
        let all = processes
        processes.removeAll()
        lock.unlock()
        for p in all { p.kill() }
        redis.kill()
    }

    func config(port: Int) -> [String: Any] {
        Testbed.gatewayConfig(port: port, upstream: bank.url, overrides: deepMerge(build(publicUrl), [
            "publicUrl": publicUrl,
            "workers": 2,
            "store": ["type": "redis", "url": redis.url, "keyPrefix": keyPrefix, "timeoutMs": 1000],
        ]))
    }

    /// Starts one more instance (on `port`, or a free one), from a new directory, and waits for
    /// it to accept connections.
    func startInstance(name: String, port fixed: Int? = nil) throws -> GatewayInstance {
        let dir = bed.dir.url.appendingPathComponent("txgate-\(name)-\(UUID().uuidString.prefix(6))", isDirectory: true)
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let instance = try bed.startGateway(name: "txgate-\(name)", port: fixed, directory: dir,
                                            environment: ["TXGATE_SIGNING_KEY": signingKey]) { config(port: $0) }
        lock.lock()
        processes.append(instance.process)
        lock.unlock()
        return instance
    }

    /// The Login journey started on `start` and answered on `finish`; returns the session token.
    static func login(start: GatewayInstance, finish: GatewayInstance, user: String = "demo") throws -> String {
        let first = try TransactionKit.post(start, TransactionKit.authPath, nil)
        guard first.status == 200 else { throw HarnessError("login start failed:\n\(first)") }
        let done = try TransactionKit.post(finish, TransactionKit.authPath,
                                           TransactionKit.answer(try first.json(), [user, TransactionKit.password]))
        guard done.status == 200, let token = (try? done.json())?["tokenId"] as? String else {
            throw HarnessError("login as \(user), started on port \(start.port) and finished on port \(finish.port), failed:\n\(done)")
        }
        return token
    }

    /// Throws unless `g` serves state again: its health says the store is up, a login works,
    /// and the new session opens /accounts on several fresh connections (which the kernel
    /// spreads over the instance's workers, each with its own Redis connection).
    static func expectServing(_ g: GatewayInstance) throws {
        let health = try g.fetch("GET", "/-/health", timeout: 5)
        guard health.status == 200, (try? health.json())?["store"] as? String == "up" else {
            throw HarnessError("/-/health:\n\(health)")
        }
        let token = try TransactionKit.login(g)
        for _ in 0..<6 {
            let r = try g.fetch("GET", "/accounts", headers: [("iPlanetDirectoryPro", token)], timeout: 5)
            guard r.status == 200 else { throw HarnessError("GET /accounts with a new session:\n\(r)") }
        }
        for _ in 0..<4 {
            let h = try g.fetch("GET", "/-/health", timeout: 5)
            guard h.status == 200 else { throw HarnessError("/-/health again:\n\(h)") }
        }
    }

    typealias Request = (port: Int, method: String, target: String, headers: [(String, String)], body: [UInt8])

    /// `n` requests, each on its own connection opened beforehand, released at the same moment;
    /// the results in request order.
    static func race(_ n: Int, timeout: Double, _ request: @escaping @Sendable (Int) -> Request) throws -> [Result<HTTPResponse, Error>] {
        let burst = Burst.simultaneous(n, within: timeout + 5, connect: { i in
            try RawHTTPClient(port: request(i).port, timeout: timeout)
        }) { i, client in
            let r = request(i)
            return try client.request(r.method, r.target, headers: r.headers, body: r.body)
        }
        guard burst.finished else {
            throw HarnessError("the \(n) concurrent requests did not finish within \(timeout + 5) s")
        }
        return burst.results
    }
}

/// Requests in a loop on several threads until `stop()`; each one timed.
final class Traffic: @unchecked Sendable {
    // @unchecked: `running` and `samples` are only touched under `lock`.
    struct Sample {
        let start: Double
        let end: Double
        let result: Result<HTTPResponse, Error>
    }

    private let lock = NSLock()
    private var running = true
    private var samples: [Sample] = []
    private let finished = DispatchGroup()

    init(threads: Int, _ request: @escaping @Sendable (Int) throws -> HTTPResponse) {
        for k in 0..<threads {
            finished.enter()
            Thread { [self] in
                defer { finished.leave() }
                var i = k
                while isRunning {
                    let start = Timing.now()
                    let r = Result { try request(i) }
                    let s = Sample(start: start, end: Timing.now(), result: r)
                    lock.lock(); samples.append(s); lock.unlock()
                    i += threads
                    Timing.sleep(0.02)
                }
            }.start()
        }
    }

    private var isRunning: Bool {
        lock.lock()
        defer { lock.unlock() }
        return running
    }

    /// Stops the loops, waits for the requests in flight and returns every sample.
    func stop() -> [Sample] {
        lock.lock(); running = false; lock.unlock()
        _ = finished.wait(timeout: .now() + 30)
        lock.lock()
        defer { lock.unlock() }
        return samples
    }
}
