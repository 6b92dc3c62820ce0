import EventHTTP
import Foundation
import HTTPCore
import Logging
import Synchronization
import TestSupport
import TxGateCore
@testable import TxGate

/// Phases under test on a server of their own, in the test process: every request runs through
/// `phases(loop)` as a worker runs its pipeline (`RequestContext.run`), so a phase is tested
/// alone, or with the few it needs, without a configuration, a store or an upstream. End the
/// list with `Report()` to read what the phases left in the context.
enum PhaseServer {
    static func start(limits: ServerLimits = ServerLimits(), policies: PolicySet = PolicySet([]), accessLog: AccessLog? = nil,
                      _ phases: @escaping (EventLoop) -> [RequestPhase]) throws -> LoopServer {
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let box = Mutex<Pipeline?>(nil)
        let server = try LoopServer(limits: limits) { ex in
            let pipeline = box.withLock { $0 }!
            RequestContext(exchange: ex, requestId: "r", pipeline: pipeline).run()
        }
        let loop = server.loop
        // Built on the loop, as a worker builds its phases: some (an upstream pool) belong to
        // the loop's thread, which may already be running.
        let built = DispatchSemaphore(value: 0)
        loop.execute {
            box.withLock {
                let pipeline = Pipeline(phases(loop), logger: logger, accessLog: accessLog, accessLogBuffer: AccessLogBuffer(loop: loop),
                                        upstreamDescription: "none")
                pipeline.policies = policies
                $0 = pipeline
            }
            built.signal()
        }
        built.wait()
        return server
    }
}

/// Sets what earlier phases would have found (a subject, a bearer token, a decision), then
/// goes on.
struct Given: RequestPhase {
    let set: (RequestContext) -> Void
    func handle(_ ctx: RequestContext) -> PhaseStatus {
        set(ctx)
        return .next
    }
}

/// The last phase: 200 with the context as the phases left it, as JSON (`Reported`), and the
/// response headers they added.
struct Report: RequestPhase {
    func handle(_ ctx: RequestContext) -> PhaseStatus {
        let object: [String: Any] = [
            "path": ctx.path, "target": ctx.target, "method": ctx.method, "txid": ctx.txid ?? NSNull(),
            "bodyComplete": ctx.exchange.bodyComplete, "body": String(decoding: ctx.exchange.body.bytes, as: UTF8.self),
        ]
        let json = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
        return .reply(.json(200, String(decoding: json, as: UTF8.self), details: .gatewayEndpoint))
    }
}

/// `Report`'s answer, read back.
struct Reported {
    let path: String
    let target: String
    let method: String
    let txid: String?
    let bodyComplete: Bool
    let body: String

    init(_ r: HTTPResponse) throws {
        guard r.status == 200, r.header("X-Request-Id") == "r" else { throw HarnessError("not Report's answer:\n\(r)") }
        let o = try r.json()
        path = o["path"] as? String ?? ""
        target = o["target"] as? String ?? ""
        method = o["method"] as? String ?? ""
        txid = o["txid"] as? String
        bodyComplete = o["bodyComplete"] as? Bool ?? false
        body = o["body"] as? String ?? ""
    }
}
