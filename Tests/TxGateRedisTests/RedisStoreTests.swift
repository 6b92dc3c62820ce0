import EventHTTP
import Foundation
import Logging
import Testing
import TxGateCore
import TxGateRedis
import TestSupport

/// The Store protocol on a real redis-server: the same semantics as the SQLite store, each
/// operation atomic across connections (which stand in for workers and gateway instances).
@Suite(.serialized) struct RedisStoreTests {
    @Test func operationsKeepTheStoreContract() async throws {
        let fixture = try RedisFixture()
        defer { fixture.close() }
        let (redis, store, loop) = (fixture.redis, fixture.store, fixture.loop)

        try await call(on: loop) { store.ping(on: $0, $1) }.get()
        // Binary values, with NULs and bytes that are not UTF-8.
        let blob: [UInt8] = [0, 255, 13, 10, 0x80, 36, 0]
        #expect(try await call(on: loop) { store.create("k", value: blob, ttlMs: 60_000, on: $0, $1) }.get() == true)
        #expect(try await call(on: loop) { store.create("k", value: [1], ttlMs: 60_000, on: $0, $1) }.get() == false)
        #expect(try await call(on: loop) { store.get("k", on: $0, $1) }.get() == blob)
        try await call(on: loop) { store.put("k", value: bytes("v2"), ttlMs: 60_000, on: $0, $1) }.get()
        #expect(try await call(on: loop) { store.get("k", on: $0, $1) }.get() == bytes("v2"))
        #expect(try await call(on: loop) { store.get("absent", on: $0, $1) }.get() == nil)
        #expect(try await call(on: loop) { store.touch("k", ttlMs: 600_000, on: $0, $1) }.get() == true)
        #expect(try await call(on: loop) { store.touch("absent", ttlMs: 60_000, on: $0, $1) }.get() == false)

        // compare-and-swap: a mismatch changes nothing; a match replaces, keeps or sets the expiry, or deletes.
        #expect(try await call(on: loop) { store.compareAndSwap("k", expected: bytes("nope"), new: [9], ttlMs: nil, on: $0, $1) }.get() == false)
        #expect(try await call(on: loop) { store.get("k", on: $0, $1) }.get() == bytes("v2"))
        #expect(try await call(on: loop) { store.compareAndSwap("k", expected: bytes("v2"), new: blob, ttlMs: nil, on: $0, $1) }.get() == true)
        #expect(try await call(on: loop) { store.get("k", on: $0, $1) }.get() == blob)
        let ttl = try redis.pttl("t:k")
        #expect(ttl > 500_000, "KEEPTTL kept the expiry: \(ttl)")
        #expect(try await call(on: loop) { store.compareAndSwap("absent", expected: [], new: [1], ttlMs: 1000, on: $0, $1) }.get() == false)
        #expect(try await call(on: loop) { store.compareAndSwap("k", expected: blob, new: nil, ttlMs: nil, on: $0, $1) }.get() == true)
        #expect(try await call(on: loop) { store.get("k", on: $0, $1) }.get() == nil)

        // take returns the value once.
        try await call(on: loop) { store.put("once", value: bytes("x"), ttlMs: 60_000, on: $0, $1) }.get()
        #expect(try await call(on: loop) { store.take("once", on: $0, $1) }.get() == bytes("x"))
        #expect(try await call(on: loop) { store.take("once", on: $0, $1) }.get() == nil)

        #expect(try await call(on: loop) { store.increment("n", ttlMs: 600_000, on: $0, $1) }.get() == 1)
        #expect(try await call(on: loop) { store.increment("n", ttlMs: 600_000, on: $0, $1) }.get() == 2)
        #expect(try await call(on: loop) { store.get("n", on: $0, $1) }.get() == bytes("2"))
        #expect(try await call(on: loop) { store.decrement("n", on: $0, $1) }.get() == true)
        #expect(try await call(on: loop) { store.get("n", on: $0, $1) }.get() == bytes("1"))
        #expect(try redis.pttl("t:n") > 500_000, "the expiry is kept")
        #expect(try await call(on: loop) { store.decrement("n", on: $0, $1) }.get() == true)
        #expect(try await call(on: loop) { store.decrement("n", on: $0, $1) }.get() == false, "never below 0")
        #expect(try await call(on: loop) { store.decrement("absent", on: $0, $1) }.get() == false)
        #expect(try await call(on: loop) { store.get("absent", on: $0, $1) }.get() == nil)
        #expect(try await call(on: loop) { store.delete("n", on: $0, $1) }.get() == true)
        #expect(try await call(on: loop) { store.delete("n", on: $0, $1) }.get() == false)

        // takeIf: the same rule as ConditionalTake.matches, on a real record as the gateway
        // encodes it (escaped slashes, non-ASCII display text).
        let rule = TransactionRule(journey: "J", bindFields: ["/amount"])
        let binding = TransactionBinding(realm: "/", resource: "http://gw/transfer?x=1", method: "POST", subject: "démo",
                                         rule: rule, body: bytes(#"{"amount":"1 → €"}"#))
        var tx = TransactionRecord(txid: "t", realm: "/", resource: binding.resource, method: "POST", subject: "démo", journey: "J",
                                   bodyDigest: binding.bodyDigest, bound: binding.bound, display: "Pay \"1\" → /x?", expires: 1)
        let created = tx.encoded   // JSONEncoder's key order may differ from one encoding to the next
        try await call(on: loop) { store.put("tx", value: created, ttlMs: 60_000, on: $0, $1) }.get()
        let fields = TransactionRecord.consumable(by: binding)
        let notCompleted = await call(on: loop) { store.takeIf("tx", fields: fields, on: $0, $1) }
        #expect(try notCompleted.get() == .kept(created), "\(notCompleted)")
        tx.state = .completed
        let completed = tx.encoded
        try await call(on: loop) { store.put("tx", value: completed, ttlMs: 60_000, on: $0, $1) }.get()
        var eve = binding
        eve.subject = "eve"
        #expect(try await call(on: loop) { store.takeIf("tx", fields: TransactionRecord.consumable(by: eve), on: $0, $1) }.get() == .kept(completed))
        #expect(try await call(on: loop) { store.takeIf("tx", fields: fields, on: $0, $1) }.get() == .taken(completed))
        #expect(try await call(on: loop) { store.takeIf("tx", fields: fields, on: $0, $1) }.get() == .absent)
        try await call(on: loop) { store.put("notjson", value: blob, ttlMs: 60_000, on: $0, $1) }.get()
        #expect(try await call(on: loop) { store.takeIf("notjson", fields: ["state": "x"], on: $0, $1) }.get() == .kept(blob))

        // Every key carries the prefix; another prefix is another namespace.
        #expect(try redis.command(["EXISTS", "t:once"]) == .integer(0))
        try await call(on: loop) { store.put("shared", value: [1], ttlMs: 60_000, on: $0, $1) }.get()
        #expect(try redis.command(["EXISTS", "t:shared"]) == .integer(1))
        let other = makeStore(redis.storeURL, prefix: "other:", on: [loop])
        defer { loop.execute { other.detach(from: loop) } }
        #expect(try await call(on: loop) { other.get("shared", on: $0, $1) }.get() == nil)
    }

    /// Scripts run with EVALSHA from the server's cache; a server without them (a restart, a
    /// failover, SCRIPT FLUSH) answers NOSCRIPT, having run nothing, and the operation is sent
    /// again with the script's text: the same result, exactly once.
    @Test func scriptsRunFromTheServersCacheAndAreSentWholeWhenItLacksThem() async throws {
        let fixture = try RedisFixture()
        defer { fixture.close() }
        let (redis, store, loop) = (fixture.redis, fixture.store, fixture.loop)
        try await call(on: loop) { store.ping(on: $0, $1) }.get()   // connected, fenced
        func calls(_ command: String) throws -> Int {
            guard case .bulk(let text) = try redis.command(["INFO", "commandstats"]) else { return -1 }
            let line = String(decoding: text, as: UTF8.self).split(whereSeparator: \.isNewline)
                .first { $0.hasPrefix("cmdstat_\(command):") }
            return line.flatMap { $0.split(separator: "=").dropFirst().first?.split(separator: ",").first }.flatMap { Int($0) } ?? 0
        }
        _ = try redis.command(["CONFIG", "RESETSTAT"])
        let tx = TransactionRecord.key("script-test")   // a fenced record: the fenced scripts
        #expect(try await call(on: loop) { store.increment("n", ttlMs: 60_000, on: $0, $1) }.get() == 1)
        #expect(try await call(on: loop) { store.create(tx, value: bytes("a"), ttlMs: 60_000, on: $0, $1) }.get() == true)
        #expect(try calls("evalsha") == 2)
        #expect(try calls("eval") == 2, "the first use of each script: NOSCRIPT, then its text")

        _ = try redis.command(["SCRIPT", "FLUSH"])
        #expect(try await call(on: loop) { store.increment("n", ttlMs: 60_000, on: $0, $1) }.get() == 2, "ran once, not twice")
        #expect(try await call(on: loop) { store.compareAndSwap(tx, expected: bytes("a"), new: bytes("b"), ttlMs: nil, on: $0, $1) }.get() == true)
        #expect(try await call(on: loop) { store.take(tx, on: $0, $1) }.get() == bytes("b"))
        #expect(try calls("eval") == 5)

        // Cached again: no more script text on the wire.
        #expect(try await call(on: loop) { store.increment("n", ttlMs: 60_000, on: $0, $1) }.get() == 3)
        #expect(try await call(on: loop) { store.take(tx, on: $0, $1) }.get() == nil)
        #expect(try calls("eval") == 5)
        #expect(try calls("evalsha") == 7)
    }

    /// Steps sent from one loop without waiting for each other's answers take effect in the
    /// order sent (one connection per loop, pipelined): a promise for tidiness
    /// only (`Store`): a challenge still waits for its record before it claims the index naming
    /// it (`PolicyDecider.Plan.open`).
    @Test func stepsSentWithoutWaitingTakeEffectInTheOrderSent() async throws {
        let fixture = try RedisFixture()
        defer { fixture.close() }
        let (store, loop) = (fixture.store, fixture.loop)
        for round in 0..<50 {
            let (record, index) = ("record:\(round)", "index:\(round)")
            let claimed = await call(on: loop) { executor, done in
                store.create(record, value: bytes("r\(round)"), ttlMs: 60_000, on: executor) { _ in }
                store.create(index, value: bytes("first"), ttlMs: 60_000, on: executor) { _ in }
                store.compareAndSwap(index, expected: bytes("first"), new: bytes(record), ttlMs: 60_000, on: executor, done)
            }
            #expect(try claimed.get(), "round \(round): the swap ran after the create sent before it")
            let read = await call(on: loop) { executor, done in
                store.put(record, value: bytes("changed"), ttlMs: 60_000, on: executor) { _ in }
                store.get(record, on: executor, done)
            }
            #expect(try read.get() == bytes("changed"), "round \(round)")
        }
    }

    @Test func keysExpireOnTheServer() async throws {
        let fixture = try RedisFixture()
        defer { fixture.close() }
        let (redis, store, loop) = (fixture.redis, fixture.store, fixture.loop)

        // Only expiries that can come early on a slow machine are timed; the rest read the TTL.
        try await call(on: loop) { store.put("short", value: [1], ttlMs: 100, on: $0, $1) }.get()
        #expect(try await call(on: loop) { store.create("created", value: [1], ttlMs: 100, on: $0, $1) }.get())
        // The counter's window does not slide: a later increment with a longer ttl keeps the first expiry.
        #expect(try await call(on: loop) { store.increment("window", ttlMs: 60_000, on: $0, $1) }.get() == 1)
        #expect(try await call(on: loop) { store.increment("window", ttlMs: 600_000, on: $0, $1) }.get() == 2)
        #expect(try redis.pttl("t:window") <= 60_000)
        try await call(on: loop) { store.put("long", value: [1], ttlMs: 30_000, on: $0, $1) }.get()
        #expect(try await call(on: loop) { store.touch("long", ttlMs: 600_000, on: $0, $1) }.get())
        #expect(try redis.pttl("t:long") > 60_000)
        try await Task.sleep(nanoseconds: 300_000_000)
        #expect(try await call(on: loop) { store.get("short", on: $0, $1) }.get() == nil)
        #expect(try await call(on: loop) { store.get("created", on: $0, $1) }.get() == nil)
        #expect(try await call(on: loop) { store.get("long", on: $0, $1) }.get() == [1])
        // A swap with a ttl sets that expiry.
        #expect(try await call(on: loop) { store.compareAndSwap("long", expected: [1], new: [2], ttlMs: 100, on: $0, $1) }.get())
        try await Task.sleep(nanoseconds: 300_000_000)
        #expect(try await call(on: loop) { store.get("long", on: $0, $1) }.get() == nil)
    }

    /// Four connections on two stores stand in for workers of two gateway instances.
    @Test func ofConcurrentCallersAcrossConnectionsExactlyOneWins() async throws {
        let redis = try RedisServer.start()
        defer { redis.kill() }
        let loops = RunningLoops(4)
        let a = makeStore(redis.storeURL, on: Array(loops.loops[0..<2]))
        let b = makeStore(redis.storeURL, on: Array(loops.loops[2..<4]))
        defer { loops.stop(detaching: [a, b]) }
        func store(_ loop: EventLoop) -> RedisStore { loops.loops.firstIndex { $0 === loop }! < 2 ? a : b }

        for round in 0..<10 {
            let key = "tx:\(round)"
            try await call(on: loops.loops[0]) { a.put(key, value: bytes("record \(round)"), ttlMs: 60_000, on: $0, $1) }.get()
            let taken = await concurrently(100, loops: loops.loops) { _, loop, done in store(loop).take(key, on: loop, done) }
            #expect(try taken.compactMap { try $0.get() } == [bytes("record \(round)")], "round \(round)")

            try await call(on: loops.loops[0]) { a.put(key, value: bytes("pending"), ttlMs: 60_000, on: $0, $1) }.get()
            try await call(on: loops.loops[0]) { a.put(key, value: bytes(#"{"state":"COMPLETED","seal":"s"}"#), ttlMs: 60_000, on: $0, $1) }.get()
            let consumed = await concurrently(100, loops: loops.loops) { _, loop, done in
                store(loop).takeIf(key, fields: ["state": "COMPLETED", "seal": "s"], on: loop, done)
            }
            #expect(try consumed.filter { if case .taken = try $0.get() { return true } else { return false } }.count == 1, "round \(round)")
            try await call(on: loops.loops[0]) { a.put(key, value: bytes("pending"), ttlMs: 60_000, on: $0, $1) }.get()

            let swapped = await concurrently(100, loops: loops.loops) { _, loop, done in
                store(loop).compareAndSwap(key, expected: bytes("pending"), new: nil, ttlMs: nil, on: loop, done)
            }
            #expect(try swapped.filter { try $0.get() }.count == 1, "round \(round)")

            let created = await concurrently(50, loops: loops.loops) { i, loop, done in
                store(loop).create("owner:\(round)", value: bytes("\(i)"), ttlMs: 60_000, on: loop, done)
            }
            #expect(try created.filter { try $0.get() }.count == 1, "round \(round)")
        }
        let counts = await concurrently(400, loops: loops.loops) { _, loop, done in store(loop).increment("rate", ttlMs: 60_000, on: loop, done) }
        #expect(try counts.map { try $0.get() }.sorted() == Array(1...400))
    }

    /// Issue 22, item 4: a user's last accepted TOTP step has no expiry on the server, and of
    /// concurrent logins with the same code across connections exactly one raises it.
    @Test func raisedNumbersNeverExpireAndExactlyOneRaiseWins() async throws {
        let redis = try RedisServer.start()
        defer { redis.kill() }
        let loops = RunningLoops(4)
        let a = makeStore(redis.storeURL, on: Array(loops.loops[0..<2]))
        let b = makeStore(redis.storeURL, on: Array(loops.loops[2..<4]))
        defer { loops.stop(detaching: [a, b]) }
        func store(_ loop: EventLoop) -> RedisStore { loops.loops.firstIndex { $0 === loop }! < 2 ? a : b }

        for step in UInt64(1)...10 {
            let raised = await concurrently(40, loops: loops.loops) { _, loop, done in
                store(loop).raise("totp-step:demo", to: step * 10, on: loop, done)
            }
            #expect(try raised.filter { try $0.get() }.count == 1, "step \(step)")
        }
        #expect(try redis.pttl("t:totp-step:demo") == -1, "no expiry")
        #expect(try await call(on: loops.loops[0]) { a.get("totp-step:demo", on: $0, $1) }.get() == bytes("100"))
        #expect(try await call(on: loops.loops[0]) { a.raise("totp-step:demo", to: 99, on: $0, $1) }.get() == false)
        #expect(try await call(on: loops.loops[0]) { a.raise("totp-step:demo", to: 101, on: $0, $1) }.get() == true)
        #expect(try redis.pttl("t:totp-step:demo") == -1, "still no expiry after a swap")

        // Not fenced, and not a number: refused, and left as it is.
        try await call(on: loops.loops[0]) { a.put("high", value: bytes("12x"), ttlMs: 60_000, on: $0, $1) }.get()
        let notANumber = await call(on: loops.loops[0]) { a.raise("high", to: 5, on: $0, $1) }
        #expect("\(notANumber)".contains("not a number"), "\(notANumber)")
        #expect(try await call(on: loops.loops[0]) { a.get("high", on: $0, $1) }.get() == bytes("12x"))
        // Compared as numbers, not as text; a 64-bit value is exact.
        #expect(try await call(on: loops.loops[0]) { a.raise("wide", to: 9, on: $0, $1) }.get() == true)
        #expect(try await call(on: loops.loops[0]) { a.raise("wide", to: 10, on: $0, $1) }.get() == true)
        #expect(try await call(on: loops.loops[0]) { a.raise("wide", to: UInt64.max - 1, on: $0, $1) }.get() == true)
        #expect(try await call(on: loops.loops[0]) { a.raise("wide", to: UInt64.max - 2, on: $0, $1) }.get() == false)
        #expect(try await call(on: loops.loops[0]) { a.raise("wide", to: UInt64.max, on: $0, $1) }.get() == true)
        #expect(try await call(on: loops.loops[0]) { a.get("wide", on: $0, $1) }.get() == bytes(String(UInt64.max)))
    }

    @Test func aStoppedRedisFailsFastAndIsReconnected() async throws {
        let fixture = try RedisFixture()
        defer { fixture.close() }
        let (redis, store, loop) = (fixture.redis, fixture.store, fixture.loop)
        try await call(on: loop) { store.put("k", value: [1], ttlMs: 60_000, on: $0, $1) }.get()

        redis.kill()
        // The first call may be the one that finds the connection closed; after that, calls
        // fail at once, without waiting for a timeout.
        _ = await call(on: loop) { store.get("k", on: $0, $1) }
        let started = Date()
        for _ in 0..<20 {
            let r = await call(on: loop) { store.get("k", on: $0, $1) }
            #expect(r.isUnavailable, "\(r)")
        }
        #expect(Date().timeIntervalSince(started) < 2)
        let r = await call(on: loop) { store.ping(on: $0, $1) }
        guard case .failure(.unavailable(let why)) = r else { Issue.record("ping: \(r)"); return }
        #expect(why.contains("redis://127.0.0.1:\(redis.port)/0 is down"), "\(why)")

        try redis.start()
        try await eventually(10, "reconnected") {
            if case .success = await call(on: loop, { store.ping(on: $0, $1) }) { return true }
            return false
        }
        try await call(on: loop) { store.put("k", value: [2], ttlMs: 60_000, on: $0, $1) }.get()
        #expect(try await call(on: loop) { store.get("k", on: $0, $1) }.get() == [2])
    }

    @Test func aRedisThatStopsAnsweringFailsWithinTheTimeout() async throws {
        let fixture = try RedisFixture(timeoutMs: 1000)
        defer { fixture.redis.resume(); fixture.close() }
        let (redis, store, loop) = (fixture.redis, fixture.store, fixture.loop)
        try await call(on: loop) { store.ping(on: $0, $1) }.get()

        redis.pause()
        let started = Date()
        let results = await concurrently(10, loops: [loop]) { _, loop, done in store.get("k", on: loop, done) }
        let elapsed = Date().timeIntervalSince(started)
        #expect(results.allSatisfy { $0.isUnavailable }, "\(results)")
        #expect(elapsed >= 0.9 && elapsed < 5, "failed after \(elapsed) s")
        // Once it is known to be down, calls fail at once, even while a reconnect (whose TCP
        // handshake the frozen server's kernel still completes) waits for an answer.
        for _ in 0..<5 {
            try await Task.sleep(nanoseconds: 60_000_000)
            let again = Date()
            let r = await call(on: loop) { store.get("k", on: $0, $1) }
            #expect(r.isUnavailable && Date().timeIntervalSince(again) < 0.5, "\(r) after \(Date().timeIntervalSince(again)) s")
        }

        redis.resume()
        try await eventually(10, "reconnected after the pause") {
            if case .success = await call(on: loop, { store.ping(on: $0, $1) }) { return true }
            return false
        }
    }

    /// waitReplicas: a one-shot step counts only once a replica has it; without one, it fails closed.
    @Test func oneShotStepsWaitForReplicas() async throws {
        let primary = try RedisServer.start(arguments: ["--repl-diskless-sync-delay", "0"])
        defer { primary.kill() }
        let replica = try RedisServer.start(arguments: ["--replicaof", "127.0.0.1", String(primary.port)])
        defer { replica.kill() }
        let deadline = Date().addingTimeInterval(10)
        while try !primary.command(["INFO", "replication"]).description.contains("state=online"), Date() < deadline {
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        let loops = RunningLoops(1)
        let loop = loops.loops[0]
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let store = RedisStore(url: primary.storeURL, keyPrefix: "t:", timeoutMs: 4000, waitReplicas: 1, waitTimeoutMs: 1500, logger: logger)
        store.attach(to: loop)
        defer { loops.stop(detaching: [store]) }

        try await call(on: loop) { store.put("link", value: [1], ttlMs: 60_000, on: $0, $1) }.get()
        #expect(try await call(on: loop) { store.take("link", on: $0, $1) }.get() == [1])
        #expect(try await call(on: loop) { store.create("code", value: [1], ttlMs: 60_000, on: $0, $1) }.get())

        replica.kill()
        try await Task.sleep(nanoseconds: 200_000_000)
        try await call(on: loop) { store.put("link", value: [2], ttlMs: 60_000, on: $0, $1) }.get()
        let started = Date()
        let r = await call(on: loop) { store.take("link", on: $0, $1) }
        guard case .failure(.unavailable(let why)) = r else { Issue.record("take without a replica: \(r)"); return }
        #expect(why == "only 0 of 1 redis replicas acknowledged within 1500 ms")
        #expect(Date().timeIntervalSince(started) >= 1.4)
        // The step did happen on the primary: the link is gone, the caller failed closed.
        #expect(try await call(on: loop) { store.get("link", on: $0, $1) }.get() == nil)
        // Steps that are not one-shot do not wait.
        try await call(on: loop) { store.put("session", value: [1], ttlMs: 60_000, on: $0, $1) }.get()
    }

    @Test func nothingListeningIsUnavailableNotAHang() async throws {
        let loops = RunningLoops(1)
        let url = RedisURL(host: "127.0.0.1", port: try Ports.free())
        let store = makeStore(url, on: loops.loops)
        defer { loops.stop(detaching: [store]) }
        let started = Date()
        let r = await call(on: loops.loops[0]) { store.get("k", on: $0, $1) }
        #expect(r.isUnavailable, "\(r)")
        #expect(Date().timeIntervalSince(started) < 2)
    }

    @Test func passwordAndDatabaseFromTheURL() async throws {
        let redis = try RedisServer.start(arguments: ["--requirepass", "s3cret"])
        defer { redis.kill() }
        let loops = RunningLoops(1)
        let loop = loops.loops[0]
        var url = redis.storeURL
        url.password = "s3cret"
        url.database = 3
        let store = makeStore(url, on: [loop])
        try await call(on: loop) { store.put("k", value: bytes("in db 3"), ttlMs: 60_000, on: $0, $1) }.get()
        #expect(try redis.commands([["AUTH", "s3cret"], ["SELECT", "3"], ["EXISTS", "t:k"]]).last == .integer(1))

        var wrong = redis.storeURL
        wrong.password = "guess"
        let refused = makeStore(wrong, on: [loop])
        defer { loops.stop(detaching: [store, refused]) }
        let r = await call(on: loop) { refused.get("k", on: $0, $1) }
        #expect(!((try? r.get()) != nil), "\(r)")
        try await eventually(5, "the refusal is named") {
            if case .failure(let e) = await call(on: loop, { refused.ping(on: $0, $1) }) {
                return e.description.contains("refused AUTH") && !e.description.contains("guess")
            }
            return false
        }
    }
}
