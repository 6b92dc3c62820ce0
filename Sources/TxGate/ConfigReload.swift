import Foundation
import Logging
import TxGateCore

/// Where `serve` read its configuration, so that SIGHUP can read it again the same way.
public struct ConfigSource: Sendable {
    public var path: String
    public var overrides: ConfigOverrides

    public init(path: String, overrides: ConfigOverrides = ConfigOverrides()) {
        self.path = path
        self.overrides = overrides
    }

    func load() throws(ConfigErrors) -> GatewayConfig {
        try ConfigCheck.load(path: path, overrides: overrides)
    }

    /// The file's top-level members, to name what a reload changed (nil if it does not parse).
    func topLevel() -> [String: JSONValue]? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return try? JSONDecoder().decode([String: JSONValue].self, from: data)
    }
}

/// A reload that cannot be applied while running; the old configuration stays.
struct ReloadRefused: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// What a reload may change while running, and what needs a restart: all of it derived from
/// `GatewayConfig.reload(_:)`, the one place that says it for each top-level key.
enum ConfigReload {
    /// Settings bound to what the process opened at start-up (sockets, threads, the store, the
    /// upstream pools, the log handler): a change is reported and not applied.
    static func restartNeeded(old: GatewayConfig, new: GatewayConfig) -> [String] {
        GatewayConfig.Key.allCases.compactMap { key in
            let rule = GatewayConfig.reload(key)
            guard rule.needsRestart(running: old, new: new) else { return nil }
            switch rule.mode {
            case .live: return nil
            case .restart: return key.rawValue
            case .partly(let part): return part
            }
        }
    }

    /// `new` with the settings that need a restart put back to the running ones, so that
    /// everything derived from the configuration (links from `listen`, say) stays consistent.
    static func effective(_ new: GatewayConfig, running old: GatewayConfig) -> GatewayConfig {
        var c = new
        for key in GatewayConfig.Key.allCases { GatewayConfig.reload(key).keepRunning(&c, running: old) }
        return c
    }

    /// Of the keys that changed in the file, those the reload applied (`effective`): not the
    /// restart-only ones, nor a partly applied key whose change is all in its restart part.
    static func applied(_ changed: [String], running: GatewayConfig, effective: GatewayConfig) -> [String] {
        changed.filter { name in
            guard let key = GatewayConfig.Key(rawValue: name) else { return true }
            return GatewayConfig.reload(key).applies(running: running, effective: effective)
        }
    }

    /// The top-level keys whose value differs between two versions of the file, plus `users`
    /// when `usersFile`'s content changed.
    static func changedKeys(old: [String: JSONValue]?, new: [String: JSONValue]?, oldConfig: GatewayConfig,
                            newConfig: GatewayConfig) -> [String] {
        var keys = Set<String>()
        if let old, let new {
            for k in Set(old.keys).union(new.keys) where old[k] != new[k] { keys.insert(k) }
        }
        if oldConfig.users != newConfig.users { keys.insert("users") }
        return keys.sorted()
    }
}

extension Gateway {
    /// SIGHUP, on the main loop: read the configuration again; if it is valid, every worker
    /// switches to it for new requests (requests in flight finish with the pipeline they
    /// started with); if not, nothing changes. Either way, the outcome is logged.
    func reload() {
        let logger = shared.logger
        guard let source = configSource else {
            logger.warning("SIGHUP ignored: no configuration file to reload")
            return
        }
        let running = shared.config
        let loaded: GatewayConfig
        do {
            loaded = try source.load()
        } catch {
            for e in error.errors {
                logger.error("config reload failed", metadata: ["file": .string(source.path), "error": .string(e.description)])
            }
            logger.error("config reload failed: still running the previous configuration", metadata: [
                "file": .string(source.path), "errors": .stringConvertible(error.errors.count),
            ])
            return
        }
        let restart = ConfigReload.restartNeeded(old: running, new: loaded)
        let config = ConfigReload.effective(loaded, running: running)
        let next: SharedState
        do {
            next = try SharedState(config: config, resources: shared.resources, logger: logger, clock: shared.clock)
        } catch {
            logger.error("config reload failed", metadata: ["file": .string(source.path), "error": .string("\(error)")])
            logger.error("config reload failed: still running the previous configuration", metadata: [
                "file": .string(source.path), "errors": .stringConvertible(1),
            ])
            return
        }
        let newTop = source.topLevel()
        let changed = ConfigReload.changedKeys(old: loadedTopLevel, new: newTop, oldConfig: running, newConfig: loaded)
        shared = next
        loadedTopLevel = newTop
        for w in workers { w.switchTo(next) }
        if !restart.isEmpty {
            logger.warning("config reload: these changes need a restart and are not applied", metadata: [
                "file": .string(source.path), "restart_needed": .string(restart.joined(separator: ",")),
            ])
        }
        let applied = ConfigReload.applied(changed, running: running, effective: config)
        logger.info("config reloaded", metadata: [
            "file": .string(source.path),
            "changed": .string(applied.isEmpty ? "nothing" : applied.joined(separator: ",")),
            "policies": .stringConvertible(config.policies?.count ?? 0), "users": .stringConvertible(config.users.count),
            "journeys": .string(config.journeys.keys.sorted().joined(separator: ",")),
            "tls_reloaded": .stringConvertible(config.tls != nil),
        ])
    }
}
