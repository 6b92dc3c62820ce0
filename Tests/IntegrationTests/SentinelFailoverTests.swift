import Foundation
import Testing
import TxGateCore
import TxGateCrypto
#if canImport(Glibc)
import Glibc
#endif
import TestSupport

/// Redis that survives a machine (issue 22 item 6): a primary, a replica, three real
/// redis-sentinel processes (quorum 2) and a spawned `txgate serve` with
/// `store.url: redis+sentinel://...`, in front of a backend that records every request it
/// executes. Clients run approve-and-consume cycles through the gateway (challenge, approval
/// journey, retry with `_txid`) while the primary is killed with SIGKILL; the sentinels
/// promote the replica and the gateway must follow without a restart.
///
/// Just before the kill the replica is cut off from the primary (`REPLICAOF` a dead port) and
/// more transactions are approved and consumed on the primary alone: the replica that is then
/// promoted lags behind and still holds those transactions as approved and unconsumed, which is
/// exactly the failover that used to execute an approval twice. Every consumed TxId is retried
/// after the failover; the backend counts each `Idempotency-Key` it executed.
@Suite(.serialized, .testbed) struct SentinelFailoverTests {
    typealias Kit = TransactionKit

    static func config(_ storeURL: String, upstream: String, port: Int) -> [String: Any] {
        Testbed.gatewayConfig(port: port, upstream: upstream, overrides: [
            "workers": 2,
            "publicUrl": "http://127.0.0.1:\(port)",
            "store": ["type": "redis", "url": storeURL, "timeoutMs": 1000],
            "security": ["maxPendingTransactions": 5000],
            "users": [["username": "demo", "passwordHash": Kit.hash, "email": "demo@example.com"]],
            "loginJourney": "Login",
            "journeys": [
                "Login": [["type": "UsernamePassword"]],
                // One tap: the test runs hundreds of approvals, more than TOTP's one code per 30 s.
                "Approve": [["type": "Confirm"]],
            ],
            "policies": [
                ["name": "transfer", "resources": ["/transfer"], "actions": ["POST"], "subjects": "authenticated",
                 "transaction": ["journey": "Approve", "bind": ["body": ["/amount", "/payee"]],
                                 "display": "Send {amount} to {payee}?"]],
            ],
        ])
    }

    @Test(.timeLimit(.minutes(1)))
    func aPrimaryKilledUnderLoadFailsOverWithoutAnApprovalExecutingTwice() throws {
        let bed = try Testbed.current
        let primary = try RedisServer.start(in: bed.dir.url)
        let replica = try RedisServer.start(in: bed.dir.url, arguments: ["--replicaof", "127.0.0.1", "\(primary.port)"])
        let backend = try RawUpstream(response: Array(
            "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 21\r\n\r\n{\"status\":\"executed\"}".utf8))
        defer { backend.stop(); replica.kill(); primary.kill() }
        #expect(Timing.poll(timeout: 10) { (try? replica.info("replication"))?["master_link_status"] == "up" }, "the replica never synced")
        let sentinels = try RedisSentinels.start(in: bed.dir.url, primaryPort: primary.port, replicas: 1)
        defer { sentinels.kill() }
        let g = try bed.startGateway(name: "txgate-sentinel") { Self.config(sentinels.url, upstream: backend.url, port: $0) }
        bed.onCleanup { g.process.kill() }
        func diagnostics() -> String { "gateway log:\n\(g.process.stderrTail(40))\nsentinels:\n\(sentinels.logs)" }

        let run = FailoverRun(gateway: g)
        let tokens = try (0..<2).map { _ in try Kit.login(g) }
        // A first cycle proves the gateway found the primary through the sentinels.
        #expect(run.cycle(token: tokens[0]) == .consumed, "\(diagnostics())")

        let clients = tokens.map { token in
            Thread { while !run.stopped { _ = run.cycle(token: token) } }
        }
        clients.forEach { $0.start() }
        defer { run.stop() }

        // Phase 1: cycles on a healthy primary, replicated.
        try run.waitForConsumed(150, timeout: 20, diagnostics)
        // Phase 2: approvals the replica receives, then the replica falls behind and they are
        // consumed (executed) on the primary alone.
        var approvedOnBoth: [String] = []
        while approvedOnBoth.count < 40 {
            if let txid = run.approved(token: tokens[0]) { approvedOnBoth.append(txid) }
        }
        #expect(try primary.command(["WAIT", "1", "5000"]) == .integer(1), "the replica did not acknowledge the approvals")
        let dead = try Ports.free()
        #expect(try replica.command(["REPLICAOF", "127.0.0.1", "\(dead)"]) == .simple("OK"))
        for txid in approvedOnBoth {
            let r = try Kit.transfer(g, token: tokens[0], body: FailoverRun.body(tokens[0], held: true), query: "?_txid=\(txid)")
            #expect(r.status == 201, "consuming \(txid) on the primary alone:\n\(r)")
            if r.status == 201 { run.recordConsumed(txid) }
        }
        // And a few approved, not yet consumed, transactions.
        var held: [String] = []
        for _ in 0..<5 {
            if let txid = run.approved(token: tokens[1]) { held.append(txid) }
        }
        let lagged = approvedOnBoth

        // Phase 3: the primary dies.
        let killedAt = Timing.now()
        run.markKill(at: killedAt)
        primary.kill()
        let consumedAtKill = run.consumedCount

        let failedOver = Timing.poll(timeout: 20, interval: 0.05) {
            (try? sentinels.primaryPort(askingSentinelAt: sentinels.ports[0])) == replica.port
        }
        #expect(failedOver, "the sentinels did not promote the replica within 20 s\n\(diagnostics())")
        let promotedAt = Timing.now()
        try run.waitForConsumed(consumedAtKill + 150, timeout: 25, diagnostics)
        run.stop()
        #expect(Timing.poll(timeout: 10) { run.activeClients == 0 }, "client threads did not stop")

        let heal = try #require(run.firstSuccessAfterKill, "no stateful request succeeded after the kill\n\(diagnostics())")
        let healMs = Int((heal - killedAt) * 1000)
        let failoverMs = Int((promotedAt - killedAt) * 1000)
        print("sentinel failover: \(run.consumedCount) approvals consumed, \(lagged.count) of them approved on both and consumed on the primary alone; "
            + "primary killed -> sentinels name the replica (polled) \(failoverMs) ms; kill -> first successful stateful request "
            + "\(healMs) ms; 503s during the outage: \(run.unavailableCount)")

        // The fence ran on the new primary: its run_id is recorded, the epoch moved on.
        let fence = try replica.command(["HGETALL", "txgate:fence"]).allBulkStrings.map { String(decoding: $0, as: UTF8.self) }
        let fields = Dictionary(uniqueKeysWithValues: stride(from: 0, to: fence.count - 1, by: 2).map { (fence[$0], fence[$0 + 1]) })
        #expect(fields["run_id"] == (try replica.info("server"))["run_id"], "fence record on the new primary: \(fields)")
        #expect((Int(fields["epoch"] ?? "") ?? 0) >= 2, "the epoch did not move on: \(fields)")

        // The scenario is real: the promoted replica still holds the consumed transactions as
        // approved (in the old epoch).
        let resurrected = try lagged.filter { try replica.command(["EXISTS", "txgate:" + TransactionRecord.key($0)]) == .integer(1) }
        #expect(resurrected.count == lagged.count, "the promoted replica did not lag: \(resurrected.count) of the \(lagged.count) consumed while it was cut off are on it")

        // Every consumed TxId, and the ones approved before the kill, once more: the promoted
        // replica still holds the lagged ones as approved. None may execute again.
        var again: [String] = []
        for txid in run.consumedSnapshot + held {
            let r = try Kit.transfer(g, token: tokens[1], body: FailoverRun.body(tokens[1], held: true), query: "?_txid=\(txid)")
            if (200..<300).contains(r.status) || r.status != 401 { again.append("\(txid): \(r.status)") }
        }
        #expect(again.isEmpty, "a retry of a consumed or pre-failover TxId was not challenged again (\(again.count)):\n\(again.prefix(5).joined(separator: "\n"))")

        // The backend: every request carried an Idempotency-Key, and no key was executed twice.
        var executions: [String: Int] = [:]
        var withoutKey = 0
        for request in backend.receivedRequests {
            guard let key = Self.idempotencyKey(request) else { withoutKey += 1; continue }
            executions[key, default: 0] += 1
        }
        let twice = executions.filter { $0.value > 1 }
        #expect(twice.isEmpty, "executed more than once: \(twice.prefix(5))")
        #expect(withoutKey == 0, "\(withoutKey) requests reached the backend without an Idempotency-Key")
        #expect(executions.count == run.consumedCount, "backend executed \(executions.count), clients saw \(run.consumedCount) consumed")
        #expect(Set(executions.keys) == Set(run.consumedSnapshot), "the backend's TxIds are not the consumed ones")
        #expect(run.unexpected.isEmpty, "unexpected answers:\n\(run.unexpected.prefix(5).joined(separator: "\n---\n"))")
        #expect(run.consumedCount >= 300)
    }

    static func idempotencyKey(_ request: String) -> String? {
        for line in request.split(separator: "\r\n") where line.lowercased().hasPrefix("idempotency-key:") {
            return line.dropFirst("idempotency-key:".count).trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        }
        return nil
    }
}

/// The clients' side of the failover test: approve-and-consume cycles and what they saw.
final class FailoverRun: @unchecked Sendable {
    // @unchecked: every mutable property is only touched under `lock`.
    typealias Kit = TransactionKit
    /// One payee per session and per kind of cycle (consumed, or held approved): the transfers
    /// running at once are different requests, each with its own transaction (the same request
    /// sent twice while its transaction waits shares its TxId).
    static func body(_ token: String, held: Bool = false) -> [UInt8] {
        Array(#"{"amount":100,"payee":"Bob \#(token.prefix(8))\#(held ? " held" : "")"}"#.utf8)
    }

    enum Outcome: Equatable { case consumed, unavailable, askedAgain, unexpected }

    let gateway: GatewayInstance
    private let lock = NSLock()
    private var consumed: [String] = []
    private var unavailable = 0
    private var odd: [String] = []
    private var killedAt: Double?
    private var firstSuccess: Double?
    private var isStopped = false
    private var running = 0

    init(gateway: GatewayInstance) { self.gateway = gateway }

    var stopped: Bool { lock.withLock { isStopped } }
    var consumedCount: Int { lock.withLock { consumed.count } }
    var consumedSnapshot: [String] { lock.withLock { consumed } }
    var unavailableCount: Int { lock.withLock { unavailable } }
    var unexpected: [String] { lock.withLock { odd } }
    var firstSuccessAfterKill: Double? { lock.withLock { firstSuccess } }
    var activeClients: Int { lock.withLock { running } }

    func stop() { lock.withLock { isStopped = true } }
    func recordConsumed(_ txid: String) { lock.withLock { consumed.append(txid) } }
    func markKill(at t: Double) { lock.withLock { killedAt = t } }

    func waitForConsumed(_ n: Int, timeout: Double, _ diagnostics: () -> String) throws {
        guard Timing.poll(timeout: timeout, interval: 0.01, { consumedCount >= n }) else {
            throw HarnessError("only \(consumedCount) of \(n) approvals consumed within \(timeout) s (503s: \(unavailableCount), "
                + "unexpected: \(unexpected.prefix(3)))\n\(diagnostics())")
        }
    }

    /// One stateful request: its answer, and when it was sent (for the time to heal).
    private func send(_ request: () throws -> HTTPResponse) -> HTTPResponse? {
        let sentAt = Timing.now()
        guard let r = try? request() else { return nil }
        if r.status != 503 && r.status < 500 {
            lock.withLock {
                if let k = killedAt, sentAt > k, firstSuccess == nil { firstSuccess = Timing.now() }
            }
        }
        return r
    }

    private func note(_ r: HTTPResponse?, _ step: String) -> Outcome {
        lock.withLock {
            if r?.status == 503 || r == nil {
                unavailable += 1
                return .unavailable
            }
            if odd.count < 50 { odd.append("\(step): \(r!)") }
            return .unexpected
        }
    }

    /// Challenge, approval journey (one Confirm), and the retry. Returns the approved TxId
    /// without consuming it when `consume` is false.
    private func run(token: String, consume: Bool) -> (Outcome, String?) {
        lock.withLock { running += 1 }
        defer { lock.withLock { running -= 1 } }
        let first = send { try Kit.transfer(gateway, token: token, body: Self.body(token, held: !consume)) }
        guard let first, first.status == 401, let txid = try? Kit.challengeTxid(first) else { return (note(first, "challenge"), nil) }
        let start = send { try Kit.startComposite(gateway, txid: txid, session: .header(token)) }
        guard let start, start.status == 200, let step = try? start.json() else { return (note(start, "approval start"), nil) }
        let done = send { try Kit.post(gateway, Kit.authPath, Kit.answer(step, [0]), headers: [("iPlanetDirectoryPro", token)]) }
        guard let done, done.status == 200 else { return (note(done, "approval answer"), nil) }
        guard consume else { return (.askedAgain, txid) }
        let retry = send { try Kit.transfer(gateway, token: token, body: Self.body(token, held: !consume), query: "?_txid=\(txid)") }
        switch retry?.status {
        case 201?:
            lock.withLock { consumed.append(txid) }
            return (.consumed, txid)
        case 401?:
            // The failover came between the approval and the retry: the approval was in the
            // old epoch, so it is asked for again. Not an error; nothing ran.
            return (.askedAgain, txid)
        default:
            return (note(retry, "retry"), txid)
        }
    }

    /// One cycle; after a 503 it pauses 5 ms, as a client would, rather than spin.
    func cycle(token: String) -> Outcome {
        let outcome = run(token: token, consume: true).0
        if outcome == .unavailable { Timing.sleep(0.005) }
        return outcome
    }

    func approved(token: String) -> String? {
        let (outcome, txid) = run(token: token, consume: false)
        return outcome == .askedAgain ? txid : nil
    }
}
