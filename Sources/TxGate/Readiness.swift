import EventHTTP
import Logging
import TxGateCore

/// What `/-/ready` answers, kept up to date in the background on one worker's loop: every
/// `readiness.intervalMs`, a TCP connect to the upstream and a store ping (when there is a
/// store). A request only reads the last result; nothing is checked per request. Each worker
/// checks for itself, since each has its own upstream pool and (with Redis) its own store
/// connection: the worker that answers says whether *it* can serve.
final class Readiness {
    private let loop: EventLoop
    private let upstream: SocketAddress
    private let connectTimeoutMs: Int
    private let store: Store?
    private let intervalMs: Int
    private let logger: Logger
    private let worker: Int
    private var timer: LoopTimer?
    /// nil until the first check has completed.
    private(set) var upstreamUp: Bool?
    private(set) var storeUp: Bool?
    private var stopped = false

    init(loop: EventLoop, upstream: UpstreamEndpoint, store: Store?, intervalMs: Int, worker: Int, logger: Logger) {
        self.loop = loop
        self.upstream = upstream.address
        connectTimeoutMs = upstream.connectTimeoutMs
        self.store = store
        self.intervalMs = intervalMs
        self.worker = worker
        self.logger = logger
    }

    /// The first check, now; then one every interval after the previous one completed (so
    /// that a slow upstream never piles checks up). On the loop.
    func start() {
        loop.preconditionInEventLoop()
        timer = LoopTimer(loop: loop) { [unowned self] in check() }
        check()
    }

    func stop() {
        loop.preconditionInEventLoop()
        stopped = true
        timer?.cancel()
    }

    var isReady: Bool { upstreamUp == true && (store == nil || storeUp == true) }

    /// The answer to `/-/ready`: 200 or 503, and a JSON body in `/-/health`'s form.
    func answer(members: String) -> (status: Int, body: String) {
        guard let upstreamUp else { return (503, #"{"status":"starting",\#(members)}"#) }
        var body = #"{"status":"\#(isReady ? "ready" : "not ready")",\#(members),"upstream":"\#(upstreamUp ? "up" : "down")""#
        if let storeUp { body += #","store":"\#(storeUp ? "up" : "down")""# }
        return (isReady ? 200 : 503, body + "}")
    }

    private func check() {
        var waiting = store == nil ? 1 : 2
        var upstreamResult: Result<Void, SocketError> = .success(())
        var storeResult: String?
        let finished = { [unowned self] in
            waiting -= 1
            if waiting == 0 { record(upstreamResult, storeError: storeResult) }
        }
        ConnectProbe.run(on: loop, to: upstream, timeoutMs: connectTimeoutMs) { r in
            upstreamResult = r
            finished()
        }
        store?.ping(on: loop) { r in
            if case .failure(let e) = r { storeResult = e.description }
            finished()
        }
    }

    private func record(_ upstreamResult: Result<Void, SocketError>, storeError: String?) {
        let wasReady = upstreamUp == nil ? nil : isReady
        if case .failure(let e) = upstreamResult {
            if upstreamUp != false {
                logger.warning("readiness: the upstream refuses connections", metadata: [
                    "worker": .stringConvertible(worker), "upstream": .string(upstream.description), "error": .string(e.description),
                ])
            }
            upstreamUp = false
        } else {
            upstreamUp = true
        }
        if store != nil {
            if let storeError, storeUp != false {
                logger.warning("readiness: the store does not answer", metadata: [
                    "worker": .stringConvertible(worker), "error": .string(storeError),
                ])
            }
            storeUp = storeError == nil
        }
        if wasReady == false && isReady {
            logger.info("readiness: ready again", metadata: ["worker": .stringConvertible(worker)])
        }
        if !stopped { timer?.schedule(afterMs: intervalMs) }
    }
}
