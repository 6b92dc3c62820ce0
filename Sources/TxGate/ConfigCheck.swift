import EventHTTP
import Foundation
import TxGateCore
import TxGateEmail

/// decode → validate, the one way `txgate check` and `txgate serve` read a configuration:
/// the file itself (`ConfigLoader`), then everything start-up would refuse about what it
/// names (addresses, TLS files, the signing key, email delivery, the store's file), without
/// creating or starting anything. `serve` then provisions (`Gateway`).
public enum ConfigCheck {
    public static func load(path: String, overrides: ConfigOverrides = ConfigOverrides(),
                            environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigErrors) -> GatewayConfig {
        let config = try ConfigLoader.load(path: path, overrides: overrides)
        let errors = errors(in: config, environment: environment)
        guard errors.isEmpty else { throw ConfigErrors(errors: errors) }
        return config
    }

    /// Every problem start-up would have with a decoded configuration; creates nothing.
    public static func errors(in config: GatewayConfig,
                              environment: [String: String] = ProcessInfo.processInfo.environment) -> [ConfigError] {
        var errors: [ConfigError] = []
        func check(_ path: String, _ body: () throws -> Void) {
            do { try body() } catch { errors.append(Self.configError(error, path: path)) }
        }
        check("listen") { _ = try SocketAddress(host: config.listen.host, port: config.listen.port) }
        check("upstream.url") { _ = try SocketAddress(host: config.upstream.url.host, port: config.upstream.url.port) }
        if let tls = config.tls {
            check("tls") { _ = try TLSContext.server(certificateFile: tls.certificate, privateKeyFile: tls.privateKey) }
        }
        if config.upstream.url.isTLS {
            check(config.upstream.caFile == nil ? "upstream.url" : "upstream.caFile") { _ = try TLSContext.client(caFile: config.upstream.caFile) }
        }
        for (i, issuer) in config.bearer.issuers.enumerated() {
            let u = issuer.jwksUri
            check("bearer.issuers[\(i)].jwksUri") { _ = try SocketAddress(host: u.host, port: u.port) }
            if u.isTLS { check("bearer.issuers[\(i)].caFile") { _ = try TLSContext.client(caFile: issuer.caFile) } }
        }
        // A remote PDP: its address resolves, its CA bundle loads (the password file is read by
        // the loader).
        if config.pdp.type == .am, config.pdp.url != nil {
            check("pdp.url") { _ = try AMClient.endpoint(config.pdp) }
        }
        // The authentication service exists when there are journeys: its key, store and email.
        if !config.journeys.isEmpty {
            if let e = SigningKey.problem(file: config.secrets.signingKeyFile, environment: environment) { errors.append(e) }
            if config.store.redis == nil, let why = FileCreation.problem(config.store.path) {
                errors.append(ConfigError(path: "store.path", message: "cannot open or create '\(config.store.path)': \(why)"))
            }
            switch config.email?.delivery {
            case .outbox(let folder)?:
                if let why = FileCreation.folderProblem(folder) {
                    errors.append(ConfigError(path: "email.outbox", message: "cannot create files in '\(folder)': \(why)"))
                }
            case .smtp(let smtp)?:
                check("email.smtp") { _ = try SharedState.smtpSender(smtp) }
            case nil:
                break
            }
            let keys = config.secrets.tokenKeysFolder
            if config.oauth2 != nil || config.txnTokens.enabled, let why = FileCreation.folderProblem(keys) {
                errors.append(ConfigError(path: TokenKeys.folderKey, message: "cannot create keys in '\(keys)': \(why)"))
            }
        }
        return errors
    }

    /// Whether `listen` can be bound now, for `txgate check`: nil, or why not. A warning, not an
    /// error: `check` also vets a file before a reload of the gateway that holds the address
    /// (and so reloads fine), and a port below 1024 that the checking user may not bind is
    /// often bound by a service that holds CAP_NET_BIND_SERVICE. Binds a throw-away socket
    /// and closes it at once; never used by `serve` or a reload, which bind for real.
    public static func listenProblem(_ config: GatewayConfig) -> String? {
        let listen = config.listen
        do {
            try probeListenAddress(SocketAddress(host: listen.host, port: listen.port))
            return nil
        } catch let e as SocketError where e.code == EADDRINUSE {
            return "listen address \(listen) is in use (another process listens on it): `txgate serve` with this file "
                + "would not start; if that process is the gateway running this file, a reload (SIGHUP) is fine"
        } catch let e as SocketError where e.code == EACCES {
            return "listen address \(listen) cannot be bound by this user (\(String(cString: strerror(EACCES)))): "
                + "ports below 1024 need CAP_NET_BIND_SERVICE (the systemd unit grants it) or root"
        } catch {
            return "listen address \(listen): \(error)"
        }
    }

    /// The error as a `ConfigError` at `path`, or at the key its text starts with (TLS and
    /// SMTP errors name their key themselves: `tls.privateKey: does not match tls.certificate`).
    static func configError(_ error: Error, path: String) -> ConfigError {
        let text = "\(error)"
        for key in ["tls.certificate", "tls.privateKey", "upstream.caFile", "email.smtp.passwordFile", "pdp.url", "pdp.caFile", path] where text.hasPrefix(key + ": ") {
            return ConfigError(path: key, message: String(text.dropFirst(key.count + 2)))
        }
        return ConfigError(path: path, message: text)
    }
}

/// Whether the gateway could create a file or folder it needs, asked without creating it.
enum FileCreation {
    /// Why `file` could not be opened for writing, or created (with its folders), or nil.
    static func problem(_ file: String) -> String? {
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: file, isDirectory: &isFolder) {
            if isFolder.boolValue { return "it is a folder" }
            return access(file, R_OK | W_OK) == 0 ? nil : String(cString: strerror(errno))
        }
        return folderProblem(URL(fileURLWithPath: file).deletingLastPathComponent().path)
    }

    /// Why files could not be created in `folder` (made with its parents if missing), or nil.
    static func folderProblem(_ folder: String) -> String? {
        var p = folder
        while true {
            var isFolder: ObjCBool = false
            if FileManager.default.fileExists(atPath: p, isDirectory: &isFolder) {
                guard isFolder.boolValue else { return "'\(p)' is not a folder" }
                return access(p, W_OK | X_OK) == 0 ? nil : "cannot write in '\(p)': \(String(cString: strerror(errno)))"
            }
            let parent = URL(fileURLWithPath: p).deletingLastPathComponent().path
            if parent == p || parent.isEmpty { return "no folder on its path exists" }
            p = parent
        }
    }
}
