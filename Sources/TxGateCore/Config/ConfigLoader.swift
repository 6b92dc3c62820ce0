import Foundation

/// Command-line values that override the file.
public struct ConfigOverrides: Sendable {
    public var listen: String?
    public var upstream: String?
    public var workers: Int?
    public init(listen: String? = nil, upstream: String? = nil, workers: Int? = nil) {
        self.listen = listen
        self.upstream = upstream
        self.workers = workers
    }
}

/// How the loader reads the files a configuration names (and the configuration file itself):
/// given to it, since TxGateCore does no I/O. `txgate` gives it the disk (`DiskConfigFiles`, in
/// TxGate); a test or the fuzz target can give it files held in memory (`InMemoryConfigFiles`).
public protocol ConfigFileReader: Sendable {
    /// The file's bytes, or why not in the OS's words ("No such file or directory", "it is a folder").
    func read(_ path: String) -> Result<Data, ConfigFileUnreadable>
    /// Whether the file exists and this process may read it, without reading it.
    func isReadable(_ path: String) -> Bool
}

/// Why a file could not be read, in the OS's words.
public struct ConfigFileUnreadable: Error, Sendable {
    public let reason: String
    public init(reason: String) { self.reason = reason }
}

/// Files held in memory, by absolute path; every other file is missing.
public struct InMemoryConfigFiles: ConfigFileReader {
    public var files: [String: Data]

    public init(_ files: [String: Data] = [:]) { self.files = files }

    public func read(_ path: String) -> Result<Data, ConfigFileUnreadable> {
        files[path].map { .success($0) } ?? .failure(ConfigFileUnreadable(reason: "No such file or directory"))
    }

    public func isReadable(_ path: String) -> Bool { files[path] != nil }
}

/// decode → override → validate, as `txgate check` and `txgate serve` both need.
public enum ConfigLoader {
    public static func load(path: String, overrides: ConfigOverrides = ConfigOverrides(),
                            files: any ConfigFileReader) throws(ConfigErrors) -> GatewayConfig {
        let data: Data
        switch files.read(path) {
        case .success(let d): data = d
        case .failure(let why):
            throw ConfigErrors(errors: [ConfigError(path: "", message: "cannot read configuration file '\(path)': \(why.reason)")])
        }
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        return try decode(data, folder: folder, overrides: overrides, files: files)
    }

    /// `folder`: what relative paths are relative to (the configuration file's folder);
    /// `files`: how the files the configuration names are read.
    public static func decode(_ data: Data, folder: String, overrides: ConfigOverrides = ConfigOverrides(),
                              files: any ConfigFileReader) throws(ConfigErrors) -> GatewayConfig {
        // Our own strict parser first: it refuses what JSONDecoder lets through (a repeated key,
        // of which JSONDecoder keeps one copy) and says where a syntax error is.
        if let e = syntaxError(data, under: "") { throw ConfigErrors(errors: [e]) }
        let issues = ConfigIssues()
        let decoder = JSONDecoder()
        decoder.userInfo[ConfigIssues.userInfoKey] = issues
        var config: GatewayConfig
        do {
            config = try decoder.decode(GatewayConfig.self, from: data)
        } catch let e as DecodingError {
            if case .dataCorrupted(let ctx) = e, ctx.codingPath.isEmpty {
                let detail = (ctx.underlyingError as NSError?)?.userInfo[NSDebugDescriptionErrorKey] as? String
                throw ConfigErrors(errors: [ConfigError(path: "", message: "invalid JSON: \(detail ?? ctx.debugDescription)")])
            }
            issues.add(e, at: [])
            throw ConfigErrors(errors: issues.errors)
        } catch {
            throw ConfigErrors(errors: [ConfigError(path: "", message: "\(error)")])
        }
        apply(overrides, to: &config, issues: issues)
        if HTTPURL(parsing: "http://\(config.listen)") == nil {
            issues.errors.append(ConfigError(path: "listen", message: "'\(config.listen.host)' is not a host name or an IP address"))
        }
        resolvePaths(&config, folder: folder, files: files, issues: issues)
        loadUsers(&config, files: files, issues: issues)
        checkAuth(config, issues: issues)
        checkPDP(&config, folder: folder, files: files, issues: issues)
        if !issues.errors.isEmpty { throw ConfigErrors(errors: issues.errors) }
        return config
    }

    /// nil when `data` is one valid JSON document without repeated keys; else the problem, named
    /// by the path of the value that holds it (under `prefix`), line and column.
    static func syntaxError(_ data: Data, under prefix: String) -> ConfigError? {
        var bytes = [UInt8](data)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes.removeFirst(3) }  // a UTF-8 BOM, as JSONDecoder allows
        guard case .failure(let e) = JSONValue.parseReportingErrors(bytes) else { return nil }
        let inner = e.jsonPath
        let path = prefix.isEmpty ? inner : inner.isEmpty ? prefix : inner.hasPrefix("[") ? prefix + inner : prefix + "." + inner
        return ConfigError(path: path, message: e.description)
    }

    static func apply(_ o: ConfigOverrides, to config: inout GatewayConfig, issues: ConfigIssues) {
        if let l = o.listen {
            if let hp = HostPort(parsing: l) { config.listen = hp } else { issues.errors.append(ConfigError(path: "--listen", message: "'\(l)' is not HOST:PORT")) }
        }
        if let u = o.upstream {
            if let url = HTTPURL(parsing: u) { config.upstream.url = url } else { issues.errors.append(ConfigError(path: "--upstream", message: "'\(u)' is not an http:// or https:// URL")) }
        }
        if let w = o.workers {
            if (1...GatewayConfig.maxWorkers).contains(w) { config.workers = w } else {
                issues.errors.append(ConfigError(path: "--workers", message: "must be between 1 and \(GatewayConfig.maxWorkers)"))
            }
        }
    }

    /// Relative paths are relative to the configuration file's folder; files must be readable.
    static func resolvePaths(_ config: inout GatewayConfig, folder: String, files: any ConfigFileReader, issues: ConfigIssues) {
        func resolve(_ p: String, _ key: String) -> String {
            guard !p.isEmpty else { return p }  // already reported as missing
            return resolveReadable(p, key, folder: folder, files: files, issues: issues)
        }
        if let tls = config.tls {
            config.tls = TLSConfig(certificate: resolve(tls.certificate, "tls.certificate"),
                                   privateKey: resolve(tls.privateKey, "tls.privateKey"), hsts: tls.hsts)
        }
        if let ca = config.upstream.caFile { config.upstream.caFile = resolve(ca, "upstream.caFile") }
        if let u = config.usersFile { config.usersFile = resolve(u, "usersFile") }
        for (i, issuer) in config.bearer.issuers.enumerated() {
            config.bearer.issuers[i].caFile = issuer.caFile.map { resolve($0, "bearer.issuers[\(i)].caFile") }
        }
        if let l = config.loginPage.logoFile { config.loginPage.logoFile = resolve(l, "loginPage.logoFile") }
        if let ca = config.oauth2?.clientIdMetadataDocuments?.caFile {
            config.oauth2?.clientIdMetadataDocuments?.caFile = resolve(ca, "oauth2.clientIdMetadataDocuments.caFile")
        }
        if var hook = config.approvals.webhook {
            hook.secretFile = resolve(hook.secretFile, "approvals.webhook.secretFile")
            hook.caFile = hook.caFile.map { resolve($0, "approvals.webhook.caFile") }
            if !hook.secretFile.isEmpty, case .success(let data) = files.read(hook.secretFile), WebhookConfig.secret(data).count < 16 {
                issues.errors.append(ConfigError(path: "approvals.webhook.secretFile", message: "the secret must be at least 16 bytes"))
            }
            config.approvals.webhook = hook
        }
        if case .smtp(var smtp)? = config.email?.delivery {
            smtp.passwordFile = smtp.passwordFile.map { resolve($0, "email.smtp.passwordFile") }
            smtp.caFile = smtp.caFile.map { resolve($0, "email.smtp.caFile") }
            config.email = EmailConfig(delivery: .smtp(smtp))
        } else if case .outbox(let outbox)? = config.email?.delivery {
            config.email = EmailConfig(delivery: .outbox(folder: absolute(outbox, folder: folder)))
        }
        // Files the gateway creates: resolved, not required to exist.
        config.store.path = absolute(config.store.path, folder: folder)
        config.secrets.signingKeyFile = absolute(config.secrets.signingKeyFile, folder: folder)
        config.secrets.tokenKeysFolder = absolute(config.secrets.tokenKeysFolder, folder: folder)
        OAuthClientSecrets.read(&config, folder: folder, files: files, issues: issues)
    }

    static func absolute(_ p: String, folder: String) -> String {
        p.hasPrefix("/") ? p : URL(fileURLWithPath: folder).appendingPathComponent(p).standardized.path
    }

    /// `p` made absolute; an error at `key` unless that file can be read.
    static func resolveReadable(_ p: String, _ key: String, folder: String, files: any ConfigFileReader, issues: ConfigIssues) -> String {
        let full = absolute(p, folder: folder)
        if !files.isReadable(full) {
            issues.errors.append(ConfigError(path: key, message: "cannot read file '\(full)'"))
        }
        return full
    }

    /// `usersFile` holds a JSON array of users, in the same form as `users`.
    static func loadUsers(_ config: inout GatewayConfig, files: any ConfigFileReader, issues: ConfigIssues) {
        // An unreadable file is already reported (`resolvePaths`).
        guard let path = config.usersFile, case .success(let data) = files.read(path) else { return }
        if let e = syntaxError(data, under: "usersFile") {
            issues.errors.append(ConfigError(path: e.path, message: "'\(path)': \(e.message)"))
            return
        }
        let fileIssues = ConfigIssues()
        let decoder = JSONDecoder()
        decoder.userInfo[ConfigIssues.userInfoKey] = fileIssues
        do {
            config.users += try decoder.decode([UserRecord].self, from: data)
        } catch {
            fileIssues.add(error, at: [])
        }
        for e in fileIssues.errors {
            issues.errors.append(ConfigError(path: "usersFile" + (e.path.hasPrefix("[") ? e.path : (e.path.isEmpty ? "" : "." + e.path)),
                                             message: e.path.isEmpty ? "'\(path)': \(e.message)" : e.message))
        }
    }

    static func checkAuth(_ config: GatewayConfig, issues: ConfigIssues) {
        var seen = Set<String>()
        for (i, u) in config.users.enumerated() where !u.username.isEmpty {
            if !seen.insert(u.username).inserted {
                issues.errors.append(ConfigError(path: "users[\(i)].username", message: "duplicate user '\(u.username)'"))
            }
        }
        var policyNames: [String: Int] = [:]
        for (i, p) in (config.policies ?? []).enumerated() where !p.name.isEmpty {
            if let first = policyNames[p.name] {
                issues.errors.append(ConfigError(path: "policies[\(i)].name", message: "duplicate policy name '\(p.name)' (also policies[\(first)])"))
            } else {
                policyNames[p.name] = i
            }
        }
        issues.errors += JourneyEngine.build(config.journeys).errors
        for (i, p) in (config.policies ?? []).enumerated() {
            let journey: String
            switch p.requirement {
            case .none: continue
            case .stepUp(let j, _): journey = j
            case .transaction(let r): journey = r.journey
            }
            if config.journeys[journey] == nil {
                issues.errors.append(ConfigError(path: "policies[\(i)]", message: "journey '\(journey)' is not in journeys"))
            }
        }
        if config.policies?.isEmpty == false && config.journeys.isEmpty {
            issues.errors.append(ConfigError(path: "journeys", message: "policies need journeys to log users in"))
        }
        let emailNodes = config.journeys.values.joined().filter { ["EmailOTP", "EmailSuspend"].contains($0.type) }
        if let first = emailNodes.first, config.email == nil {
            issues.errors.append(ConfigError(path: first.path, message: "\(first.type) needs `email` (an outbox folder or smtp)"))
        }
        checkApprovals(config, issues: issues)
        // Without a public URL (a `listen` host no URL can name, reported by `decode`), the checks
        // that compare with it wait for that to be fixed.
        if let publicURL = config.derivedPublicURL {
            if GotoPolicy(origin: publicURL).validate(config.loginPage.defaultGoto) == nil {
                issues.errors.append(ConfigError(path: "loginPage.defaultGoto",
                                                 message: "'\(config.loginPage.defaultGoto)' is not a path or a URL on the gateway's origin (\(publicURL.origin))"))
            }
            let passkeyNodes = config.journeys.values.joined().filter { PasskeyNodes.types.contains($0.type) }
            if let first = passkeyNodes.first {
                if config.webauthn == nil {
                    issues.errors.append(ConfigError(path: first.path, message: "\(first.type) needs `webauthn` (at least {} for the defaults)"))
                } else if config.webauthn?.relyingParty(publicURL: publicURL) == nil {
                    issues.errors.append(ConfigError(path: "webauthn.rpId",
                                                     message: "required: publicUrl's host \(publicURL.host) is not a domain name, and passkeys need one (such as localhost)"))
                }
            }
            if let rpId = config.webauthn?.rpId, config.webauthn?.origins.isEmpty == true,
               !WebAuthnConfig.host(publicURL.host, isWithin: rpId) {
                issues.errors.append(ConfigError(path: "webauthn.origins",
                                                 message: "required: publicUrl's host \(publicURL.host) is not on rpId '\(rpId)'; list the origins the passkey pages run on"))
            }
            if config.session.sameSite == "None" && !publicURL.isTLS {
                issues.errors.append(ConfigError(path: "session.sameSite",
                                                 message: "None needs a Secure cookie, so an https publicUrl (or tls); browsers drop a SameSite=None cookie that is not Secure"))
            }
        }
        if let consent = config.oauth2?.dynamicRegistration?.consentJourney, config.journeys[consent] == nil {
            issues.errors.append(ConfigError(path: "oauth2.dynamicRegistration.consentJourney", message: "journey '\(consent)' is not in journeys"))
        }
        if let consent = config.oauth2?.clientIdMetadataDocuments?.consentJourney, config.journeys[consent] == nil {
            issues.errors.append(ConfigError(path: "oauth2.clientIdMetadataDocuments.consentJourney", message: "journey '\(consent)' is not in journeys"))
        }
        if let ciba = config.oauth2?.ciba {
            if config.journeys[ciba.approverJourney] == nil {
                issues.errors.append(ConfigError(path: "oauth2.ciba.approverJourney", message: "journey '\(ciba.approverJourney)' is not in journeys"))
            }
            if ciba.channels.contains(.email) && config.email == nil {
                issues.errors.append(ConfigError(path: "oauth2.ciba.channels", message: "email needs `email` (an outbox folder or smtp)"))
            }
            if ciba.channels.contains(.webhook) && config.approvals.webhook == nil {
                issues.errors.append(ConfigError(path: "oauth2.ciba.channels", message: "webhook needs `approvals.webhook`"))
            }
        }
        checkAuthorizationDetails(config, issues: issues)
        if (config.oauth2 != nil || config.txnTokens.enabled) && config.journeys.isEmpty {
            issues.errors.append(ConfigError(path: config.oauth2 != nil ? "oauth2" : "txnTokens",
                                             message: "needs the authentication service: add journeys (and users)"))
        }
        if !config.journeys.isEmpty && config.journeys[config.loginJourney] == nil {
            issues.errors.append(ConfigError(path: "loginJourney", message: "no journey named '\(config.loginJourney)'"))
        }
    }
}

extension ConfigLoader {
    /// RFC 9396: each type's journey exists; a policy maps only a declared type, from fields its
    /// schema requires, and every policy mapping one type maps it alike.
    static func checkAuthorizationDetails(_ config: GatewayConfig, issues: ConfigIssues) {
        let types = config.oauth2?.authorizationDetailsTypes ?? [:]
        for (name, t) in types.sorted(by: { $0.key < $1.key }) where config.journeys[t.journey] == nil {
            issues.errors.append(ConfigError(path: "oauth2.authorizationDetailsTypes.\(name).journey", message: "journey '\(t.journey)' is not in journeys"))
        }
        var first: [String: (Int, DetailsMapping)] = [:]
        for (i, p) in (config.policies ?? []).enumerated() {
            guard case .transaction(let rule) = p.requirement, let m = rule.authorizationDetails else { continue }
            let path = "policies[\(i)].transaction.authorizationDetails"
            guard let type = types[m.type] else {
                issues.errors.append(ConfigError(path: path + ".type", message: "'\(m.type)' is not in oauth2.authorizationDetailsTypes"))
                continue
            }
            for field in m.fields.values.sorted() where !type.schema.requires(field) {
                issues.errors.append(ConfigError(path: path + ".fields",
                                                 message: "'\(field)' is not a field the schema of '\(m.type)' requires (each step in `required`)"))
            }
            if let (j, other) = first[m.type], other != m {
                issues.errors.append(ConfigError(path: path, message: "policies[\(j)] maps '\(m.type)' with other fields: one type binds one way"))
            } else if first[m.type] == nil {
                first[m.type] = (i, m)
            }
        }
    }

    /// What `ApproveElsewhere` nodes need: their approver journey, and each channel's settings.
    static func checkApprovals(_ config: GatewayConfig, issues: ConfigIssues) {
        for node in config.journeys.values.joined() where node.type == "ApproveElsewhere" {
            if let j = node.settings["approverJourney"]?.stringValue, !j.isEmpty {
                if config.journeys[j] == nil {
                    issues.errors.append(ConfigError(path: node.path + ".approverJourney", message: "no journey named '\(j)'"))
                } else if config.journeys[j]!.contains(where: { $0.type == "ApproveElsewhere" }) {
                    issues.errors.append(ConfigError(path: node.path + ".approverJourney",
                                                     message: "'\(j)' approves elsewhere itself: an approver journey must be passed on the device that approves"))
                }
            }
            for (i, c) in (node.settings["channels"]?.arrayValue ?? []).enumerated() {
                if c.stringValue == "email" && config.email == nil {
                    issues.errors.append(ConfigError(path: node.path + ".channels[\(i)]", message: "the email channel needs `email` (an outbox folder or smtp)"))
                }
                if c.stringValue == "webhook" && config.approvals.webhook == nil {
                    issues.errors.append(ConfigError(path: node.path + ".channels[\(i)]", message: "the webhook channel needs approvals.webhook (url, secretFile)"))
                }
            }
        }
    }
}
