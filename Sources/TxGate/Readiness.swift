import EventHTTP
import Logging
import TxGateCore
import TxGateCrypto

/// What `/-/ready` answers, kept up to date in the background on one worker's loop: every
/// `readiness.intervalMs`, a TCP connect to the upstream and, when there is a store, a ping and
/// a small keyed write (`create` with a short TTL: a store that answers but refuses writes, such
/// as Redis out of memory, a replica count `waitReplicas` cannot reach, or SQLite on a full disk,
/// fails every stateful request, so it is not ready). A request only reads the last result;
/// nothing is checked per request. Each worker checks for itself, since each has its own
/// upstream pool and (with Redis) its own store connection: the worker that answers says whether
/// *it* can serve.
final class Readiness {
    /// What the last store check found.
    enum StoreState: String {
        case up
        /// It does not answer (the ping failed).
        case down
        /// It answers, but the write was refused.
        case notWritable = "not writable"
    }

    /// What the last upstream check found.
    enum UpstreamState: String {
        case up
        case down
        /// Not known: the probe found no file descriptor to connect with.
        case unknown
    }

    private let loop: EventLoop
    private let upstreamAddress: SocketAddress
    private let connectTimeoutMs: Int
    private let store: Store?
    private let intervalMs: Int
    private let logger: Logger
    private let worker: Int
    private var timer: LoopTimer?
    /// nil until the first check has completed.
    private(set) var upstream: UpstreamState?
    private(set) var storeState: StoreState?
    /// The last upstream check failed for want of a file descriptor (EMFILE, ENFILE).
    private(set) var outOfDescriptors = false
    private var stopped = false
    /// The write probe's keys: this process and worker, then a sequence number, so that each
    /// probe creates a key of its own (a `create`, which is what `waitReplicas` waits for).
    private let probePrefix: String
    private var probes = 0

    init(loop: EventLoop, upstream: UpstreamEndpoint, store: Store?, intervalMs: Int, worker: Int, logger: Logger) {
        self.loop = loop
        self.upstreamAddress = upstream.address
        connectTimeoutMs = upstream.connectTimeoutMs
        self.store = store
        self.intervalMs = intervalMs
        self.worker = worker
        self.logger = logger
        probePrefix = "ready:" + Crypto.randomBytes(6).map { String($0, radix: 16) }.joined() + ":\(worker):"
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

    var isReady: Bool { upstream == .up && (store == nil || storeState == .up) }

    /// The answer to `/-/ready`: 200 or 503, and a JSON body in `/-/health`'s form that names
    /// what is down (the details are in the log, not in the public answer).
    func answer(members: String) -> (status: Int, body: String) {
        guard let upstream else { return (503, #"{"status":"starting",\#(members)}"#) }
        var body = #"{"status":"\#(isReady ? "ready" : "not ready")",\#(members),"upstream":"\#(upstream.rawValue)""#
        if let storeState { body += #","store":"\#(storeState.rawValue)""# }
        if outOfDescriptors { body += #","fds":"exhausted""# }
        return (isReady ? 200 : 503, body + "}")
    }

    private func check() {
        var waiting = store == nil ? 1 : 3
        var upstreamResult: Result<Void, SocketError> = .success(())
        var pingError: String?
        var writeError: String?
        let finished = { [unowned self] in
            waiting -= 1
            if waiting == 0 { record(upstreamResult, pingError: pingError, writeError: writeError) }
        }
        ConnectProbe.run(on: loop, to: upstreamAddress, timeoutMs: connectTimeoutMs) { r in
            upstreamResult = r
            finished()
        }
        guard let store else { return }
        store.ping(on: loop) { r in
            if case .failure(let e) = r { pingError = e.description }
            finished()
        }
        probes += 1
        // Lives a few intervals: long enough not to be purged while the write is checked, short
        // enough that the probes of a busy cluster stay a handful of keys per worker.
        store.create(probePrefix + String(probes), value: [1], ttlMs: max(5_000, 3 * intervalMs), on: loop) { r in
            switch r {
            case .failure(let e): writeError = e.description
            case .success(false): writeError = "the probe key '\(self.probePrefix)\(self.probes)' already existed"
            case .success(true): break
            }
            finished()
        }
    }

    private func record(_ upstreamResult: Result<Void, SocketError>, pingError: String?, writeError: String?) {
        let wasReady = upstream == nil ? nil : isReady
        let workerMeta: Logger.MetadataValue = .stringConvertible(worker)
        switch upstreamResult {
        case .failure(let e) where e.isDescriptorExhaustion:
            if !outOfDescriptors {
                logger.error("readiness: out of file descriptors, the upstream cannot be checked (raise the limit: ulimit -n, LimitNOFILE)", metadata: [
                    "worker": workerMeta, "upstream": .string(upstreamAddress.description), "error": .string(e.description),
                ])
            }
            outOfDescriptors = true
            upstream = .unknown
        case .failure(let e):
            if upstream != .down {
                logger.warning("readiness: the upstream refuses connections", metadata: [
                    "worker": workerMeta, "upstream": .string(upstreamAddress.description), "error": .string(e.description),
                ])
            }
            outOfDescriptors = false
            upstream = .down
        case .success:
            outOfDescriptors = false
            upstream = .up
        }
        if store != nil {
            let now: StoreState = pingError != nil ? .down : writeError != nil ? .notWritable : .up
            if now != storeState {
                switch now {
                case .down:
                    logger.warning("readiness: the store does not answer", metadata: ["worker": workerMeta, "error": .string(pingError ?? "")])
                case .notWritable:
                    logger.warning("readiness: the store answers but refuses writes", metadata: ["worker": workerMeta, "error": .string(writeError ?? "")])
                case .up:
                    break
                }
            }
            storeState = now
        }
        if wasReady == false && isReady {
            logger.info("readiness: ready again", metadata: ["worker": workerMeta])
        }
        if !stopped { timer?.schedule(afterMs: intervalMs) }
    }
}
