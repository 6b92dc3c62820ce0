import EventHTTP
import Foundation
import Logging
import TxGateCore

/// The running gateway: N workers and a main thread that waits for a stop signal.
public final class Gateway {
    /// The running configuration's state; replaced by a reload (on the main loop only).
    var shared: SharedState
    let workers: [Worker]
    /// Where SIGHUP re-reads the configuration from; nil: SIGHUP is ignored (logged).
    public var configSource: ConfigSource? {
        didSet { loadedTopLevel = configSource?.topLevel() }
    }
    /// The memory allocator the process runs on, for the "txgate started" line: the `txgate`
    /// executable links mimalloc and says so; a gateway built into another program (the tests)
    /// runs on the C library's.
    public var allocator = "glibc malloc"
    /// How each worker gives back to the system the memory of large request bodies it dropped
    /// (`HTTPServer.releaseFreedMemory`, on the worker's thread); nil: glibc's `malloc_trim`. The
    /// `txgate` executable sets mimalloc's `mi_collect`.
    public var returnFreedMemory: (@Sendable () -> Void)?
    /// The file as last loaded, to name what a reload changes.
    var loadedTopLevel: [String: JSONValue]?
    /// systemd's `$NOTIFY_SOCKET` (`Type=notify`), told when the gateway serves, reloads and
    /// stops; nil when there is none.
    let serviceNotifier: ServiceNotifier?

    /// Builds everything that can fail (TLS files, addresses, the listening sockets) before
    /// any thread starts, so that a bad setup is a clear error at start-up. `clock`: the time
    /// every expiry is measured against (sessions, journeys, transactions, the SQLite store's
    /// TTLs); tests pass one they advance by hand.
    public init(config: GatewayConfig, logger: Logger, clock: WallClock = .system) throws {
        // The workers bind with SO_REUSEPORT, which would quietly share the port with another
        // txgate already there: a bind without it fails first if anyone listens (before the
        // store is opened or anything else is touched).
        try probeListenAddress(SocketAddress(host: config.listen.host, port: config.listen.port))
        serviceNotifier = try ServiceNotifier()
        shared = try SharedState(config: config, resources: try ProcessResources(config: config, logger: logger, clock: clock),
                                 logger: logger, clock: clock)
        var ws: [Worker] = []
        for i in 0..<config.workers {
            ws.append(try Worker(index: i, shared: shared))
        }
        workers = ws
    }

    /// The port the workers listen on (the real one when the config asked for port 0).
    public var port: Int { workers.first?.boundPort ?? 0 }

    /// Serves until SIGTERM or SIGINT, then drains and returns.
    public func run() {
        let logger = shared.logger
        let config = shared.config
        let exited = DispatchGroup()
        let main = EventLoop()
        var stopping = false
        var deadline: LoopTimer?
        let onSignal: (Int32) -> Void = { [workers, unowned self] sig in
            let config = self.shared.config
            if stopping {
                logger.warning("second signal: closing all connections now", metadata: ["signal": .stringConvertible(sig)])
                workers.forEach { $0.forceClose() }
                return
            }
            stopping = true
            self.notifyServiceManager { try $0.stopping() }
            logger.info("shutting down: finishing requests in flight", metadata: [
                "signal": .stringConvertible(sig), "timeout_ms": .stringConvertible(config.shutdownTimeoutMs),
            ])
            var remaining = workers.count
            for w in workers {
                w.drain {
                    main.execute {
                        remaining -= 1
                        if remaining == 0 { main.stop() }
                    }
                }
            }
            deadline = LoopTimer(loop: main) {
                logger.warning("shutdown timeout: closing the connections still open")
                workers.forEach { $0.forceClose() }
            }
            deadline?.schedule(afterMs: config.shutdownTimeoutMs)
        }
        var signals = [SIGTERM, SIGINT].map { SignalWatcher(loop: main, signal: $0, onSignal) }
        signals.append(SignalWatcher(loop: main, signal: SIGHUP) { [unowned self] _ in
            guard !stopping else { return }
            // READY=1 follows whatever the outcome: a refused reload keeps serving the old
            // configuration, and systemd must not wait for one that never comes.
            self.notifyServiceManager { try $0.reloading() }
            self.reload()
            self.notifyServiceManager { try $0.ready(status: "serving") }
        })
        // The signals are watched before the workers start and "txgate started" is logged.
        let cpus = config.cpuAffinity.plan(workers: workers.count, allowed: CPUs.allowed)
        for w in workers {
            exited.enter()
            let cpu = cpus?[w.index]
            w.start(cpu: cpu, returningFreedMemory: returnFreedMemory) { exited.leave() }
            var metadata: Logger.Metadata = [
                "address": .string("\(config.listen.host):\(w.boundPort)"), "worker": .stringConvertible(w.index),
                "tls": .stringConvertible(config.tls != nil),
            ]
            if let cpu { metadata["cpu"] = .stringConvertible(cpu) }
            logger.info("listening", metadata: metadata)
        }
        logger.info("txgate started", metadata: [
            "version": .string(TxGateVersion.current), "commit": .string(TxGateVersion.commit),
            "allocator": .string(allocator), "upstream": .string(shared.upstreamDescription), "workers": .stringConvertible(workers.count),
            "public_url": .string(config.effectivePublicURL.description),
        ])
        // The listening sockets accept from init on and every worker's loop now runs.
        notifyServiceManager { try $0.ready(status: "serving") }

        main.run()
        withExtendedLifetime((signals, deadline)) {}
        exited.wait()
        logger.info("txgate stopped")
    }

    /// Sends a notification to systemd, if it listens; a failure is logged, never fatal (the
    /// gateway serves either way; systemd then says the start or the reload timed out).
    func notifyServiceManager(_ send: (ServiceNotifier) throws -> Void) {
        guard let notifier = serviceNotifier else { return }
        do {
            try send(notifier)
        } catch {
            shared.logger.warning("cannot notify the service manager", metadata: ["error": .string("\(error)")])
        }
    }
}

