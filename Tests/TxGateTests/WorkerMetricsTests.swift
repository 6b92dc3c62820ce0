import Foundation
import Testing
import TestSupport
@testable import TxGate
import TxGateCore
import TxGateRedis
import TxGateStore
import EventHTTP

/// The per-request metrics kept per worker (`WorkerStats`, `RequestCounts`) and summed by
/// `GatewayMetrics.exposition()`: the text a scrape reads, without sockets.
@Suite struct WorkerMetricsTests {
    static func metrics(workers: Int, policies: String = "") throws -> GatewayMetrics {
        let json = #"{"listen": "127.0.0.1:8080", "upstream": {"url": "http://127.0.0.1:9000"}, "workers": \#(workers)"#
            + (policies.isEmpty ? "" : ", " + policies) + "}"
        let config = try ConfigLoader.decode(Data(json.utf8), folder: "/tmp", files: DiskConfigFiles())
        return GatewayMetrics(config: config)
    }

    /// `name{labels} value` lines of one scrape, by series.
    static func scrape(_ m: GatewayMetrics) -> [String: String] {
        var out: [String: String] = [:]
        for line in String(decoding: m.exposition(), as: UTF8.self).split(separator: "\n") where !line.hasPrefix("#") {
            let space = line.lastIndex(of: " ")!
            out[String(line[..<space])] = String(line[line.index(after: space)...])
        }
        return out
    }

    @Test func upstreamLatencyLandsInTheBucketWhoseBoundItDoesNotExceedAndWorkersAreSummed() throws {
        let m = try Self.metrics(workers: 2)
        let (a, b) = (m.workers[0], m.workers[1])
        a.upstreamResponded(nanos: 250_000)        // exactly the first bound: le="0.00025"
        b.upstreamResponded(nanos: 250_001)        // just above: le="0.0005"
        a.upstreamResponded(nanos: 3_000_000)      // le="0.005"
        b.upstreamResponded(nanos: 11_000_000_000) // above every bound: +Inf only
        let s = Self.scrape(m)
        let name = "txgate_upstream_response_duration_seconds"
        #expect(s[name + #"_bucket{le="0.00025"}"#] == "1", "\(s)")
        #expect(s[name + #"_bucket{le="0.0005"}"#] == "2")
        #expect(s[name + #"_bucket{le="0.002"}"#] == "2")
        #expect(s[name + #"_bucket{le="0.005"}"#] == "3")
        #expect(s[name + #"_bucket{le="10.0"}"#] == "3")
        #expect(s[name + #"_bucket{le="+Inf"}"#] == "4")
        #expect(s[name + "_count"] == "4")
        #expect(s[name + "_sum"] == "11.003500001", "\(s)")
    }

    @Test func dispatchesDecisionsAndConnectionsAreCountedPerWorkerAndSummed() throws {
        let m = try Self.metrics(workers: 3)
        m.workers[0].dispatched(reused: false)
        m.workers[1].dispatched(reused: true)
        m.workers[2].dispatched(reused: true)
        let allow = Decision(resource: "r", actions: ["GET": true])
        m.workers[0].decided(.init(allow, method: "GET"))
        m.workers[1].decided(.init(allow, method: "POST"))  // GET only: a deny for POST
        m.workers[2].decided(.init(Decision(resource: "r", advices: Advices([(Advices.transaction, ["t"])])), method: "POST"))
        m.workers[2].decided(.init(Decision(resource: "r", advices: Advices([("SomethingElseAdvice", ["x"])])), method: "GET"))
        m.workers[0].connectionsChanged(by: 1)
        m.workers[0].connectionsChanged(by: 1)
        m.workers[1].connectionsChanged(by: 1)
        m.workers[0].connectionsChanged(by: -1)
        let s = Self.scrape(m)
        #expect(s[#"txgate_upstream_requests_total{connection="new"}"#] == "1", "\(s)")
        #expect(s[#"txgate_upstream_requests_total{connection="reused"}"#] == "2")
        #expect(s[#"txgate_decisions_total{outcome="allow",advice="none"}"#] == "1")
        #expect(s[#"txgate_decisions_total{outcome="deny",advice="none"}"#] == "1")
        #expect(s[#"txgate_decisions_total{outcome="challenge",advice="TransactionConditionAdvice"}"#] == "1")
        #expect(s[#"txgate_decisions_total{outcome="challenge",advice="other"}"#] == "1")
        #expect(s[#"txgate_decisions_total{outcome="challenge",advice="AuthLevelConditionAdvice"}"#] == "0")
        #expect(s["txgate_client_connections"] == "2.0")
    }

    @Test func requestCountsKeepTheirPolicyNamesAcrossPipelinesAndSurviveARetiredPipeline() throws {
        let m = try Self.metrics(workers: 2)
        var before: RequestMetrics? = RequestMetrics(m, worker: 0, policyNames: ["transfer", #"odd "name"\"#])
        let other = RequestMetrics(m, worker: 1, policyNames: ["transfer", #"odd "name"\"#])
        // What a reload builds: another list, in another order.
        let after = RequestMetrics(m, worker: 0, policyNames: ["added", "transfer"])
        func count(_ r: RequestMetrics, _ policy: Int?, _ method: String, _ status: Int) {
            r.counts.count(policy: policy, method: RequestMetrics.methodIndex(method), statusClass: status / 100 - 1)
        }
        count(before!, 0, "POST", 201)
        count(before!, 1, "GET", 200)
        count(before!, nil, "DELETE", 403)
        count(other, 0, "POST", 201)
        count(after, 1, "POST", 401)
        count(after, 0, "PATCH", 200)
        count(after, nil, "BREW", 500)
        var s = Self.scrape(m)
        let name = "txgate_requests_total"
        #expect(s[name + #"{policy="transfer",method="POST",status="2xx"}"#] == "2", "\(s)")
        #expect(s[name + #"{policy="odd \"name\"\\",method="GET",status="2xx"}"#] == "1", "\(s)")
        #expect(s[name + #"{policy="none",method="DELETE",status="4xx"}"#] == "1")
        #expect(s[name + #"{policy="transfer",method="POST",status="4xx"}"#] == "1")
        #expect(s[name + #"{policy="added",method="PATCH",status="2xx"}"#] == "1")
        #expect(s[name + #"{policy="none",method="other",status="5xx"}"#] == "1")
        #expect(s.keys.filter { $0.hasPrefix(name) }.count == 6, "only series counted at least once: \(s)")

        // The old pipeline ends: its counts stay, under the same series.
        before = nil
        count(other, 0, "POST", 201)
        s = Self.scrape(m)
        #expect(s[name + #"{policy="transfer",method="POST",status="2xx"}"#] == "3", "\(s)")
        #expect(s[name + #"{policy="odd \"name\"\\",method="GET",status="2xx"}"#] == "1", "\(s)")
        #expect(s[name + #"{policy="none",method="DELETE",status="4xx"}"#] == "1")
        #expect(s.keys.filter { $0.hasPrefix(name) }.count == 6, "\(s)")
    }

    @Test func aScrapeOnAnotherThreadReadsEachCounterWholeAndNeverBackwards() async throws {
        let m = try Self.metrics(workers: 1)
        let stats = m.workers[0]
        let n = 200_000
        let writer = Thread {
            for _ in 0..<n { stats.dispatched(reused: true) }
        }
        writer.start()
        var last = 0
        while last < n {
            let v = Int(Self.scrape(m)[#"txgate_upstream_requests_total{connection="reused"}"#] ?? "") ?? -1
            #expect(v >= last && v <= n, "read \(v) after \(last)")
            if v < last { break }
            last = v
        }
    }

    /// `name{labels} value` lines of `stats` alone, by series.
    static func scrape(_ stats: [WorkerStats]) -> [String: String] {
        var text: [UInt8] = []
        WorkerStats.emit(stats, into: &text)
        var out: [String: String] = [:]
        for line in String(decoding: text, as: UTF8.self).split(separator: "\n") where !line.hasPrefix("#") {
            let space = line.lastIndex(of: " ")!
            out[String(line[..<space])] = String(line[line.index(after: space)...])
        }
        return out
    }

    @Test func storeOperationsAreKeptPerWorkerByOperationAndSummedWithThoseOffTheLoops() throws {
        let m = try Self.metrics(workers: 2)
        m.workers[0].storeOperation(.takeIf, nanos: 400_000, failed: false)   // le="0.0005"
        m.workers[1].storeOperation(.takeIf, nanos: 3_000_000, failed: true)  // le="0.005"
        m.workers[1].storeOperation(.get, nanos: 100_000, failed: false)      // le="0.00025"
        m.storeOperationOffLoop(.takeIf, nanos: 20_000_000_000, failed: true) // +Inf only
        let s = Self.scrape(m)
        let name = "txgate_store_operation_duration_seconds"
        #expect(s[name + #"_bucket{operation="take_if",le="0.00025"}"#] == "0", "\(s)")
        #expect(s[name + #"_bucket{operation="take_if",le="0.0005"}"#] == "1")
        #expect(s[name + #"_bucket{operation="take_if",le="0.005"}"#] == "2")
        #expect(s[name + #"_bucket{operation="take_if",le="10.0"}"#] == "2")
        #expect(s[name + #"_bucket{operation="take_if",le="+Inf"}"#] == "3")
        #expect(s[name + #"_count{operation="take_if"}"#] == "3")
        #expect(s[name + #"_sum{operation="take_if"}"#] == "20.0034", "\(s)")
        #expect(s[#"txgate_store_operation_failures_total{operation="take_if"}"#] == "2")
        #expect(s[name + #"_bucket{operation="get",le="0.00025"}"#] == "1")
        #expect(s[name + #"_count{operation="get"}"#] == "1")
        #expect(s[#"txgate_store_operation_failures_total{operation="get"}"#] == "0")
        // Every operation has its series, each label once.
        for op in StoreOperation.allCases {
            #expect(s[name + #"_count{operation=""# + op.label + #""}"#] != nil, "\(op)")
        }
        #expect(Set(StoreOperation.allCases.map(\.label)).count == StoreOperation.allCases.count)
        // The other families are not disturbed by the store's slots.
        #expect(s["txgate_upstream_response_duration_seconds_count"] == "0")
        #expect(s["txgate_client_connections"] == "0.0")
    }

    /// `MeasuredStore` records an operation answered on a worker's loop in that worker's share,
    /// and one answered elsewhere in the share kept off the loops: a real store (SQLite), a
    /// real loop on its own thread.
    @Test func anOperationAnsweredOnAWorkersLoopCountsInThatWorkersShare() async throws {
        let m = try Self.metrics(workers: 2)
        let folder = try TemporaryDirectory()
        let store = MeasuredStore(try SQLiteStore(path: folder.path("store.db")), metrics: m)
        let loop = EventLoop()
        let stats = m.workers[1]
        loop.setLocal(stats, for: WorkerStats.loopKey)
        let thread = Thread { loop.run() }
        thread.start()
        defer { loop.stop() }

        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            loop.execute { store.put("k", value: [1], ttlMs: 60_000, on: loop) { _ in c.resume() } }
        }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            store.get("k", on: TestExecutor()) { _ in c.resume() }
        }
        let name = "txgate_store_operation_duration_seconds"
        let worker = Self.scrape([stats]), others = Self.scrape([m.workers[0]]), all = Self.scrape(m)
        #expect(worker[name + #"_count{operation="put"}"#] == "1", "\(worker)")
        #expect(worker[name + #"_count{operation="get"}"#] == "0")
        #expect(others[name + #"_count{operation="put"}"#] == "0")
        #expect(all[name + #"_count{operation="put"}"#] == "1")
        #expect(all[name + #"_count{operation="get"}"#] == "1", "the TestExecutor's answer is kept off the loops")
    }
}
