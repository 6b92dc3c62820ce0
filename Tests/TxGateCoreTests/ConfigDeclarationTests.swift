import Foundation
import Testing
@testable import TxGate
@testable import TxGateCore

/// Issue 25 item 4: each object of gateway.json declares its keys once (`Key`), the strict
/// decoder refuses every other key with that list, and what a reload does with each top-level
/// key is said once (`GatewayConfig.reload`), from which `ConfigReload` derives the rest.
@Suite struct ConfigDeclarationTests {
    /// Every type decoded through `StrictObject`.
    static var objects: [any ConfigObject.Type] { [
        WebAuthnConfig.self, SecurePaymentConfirmationConfig.self, OAuthResource.self, DynamicRegistrationConfig.self,
        CIBAConfig.self, CIBAClientConfig.self, AuthorizationDetailsType.self, DetailsMappingConfig.self, ClientIDMetadataConfig.self,
        GatewayConfig.self, UpstreamConfig.self, LimitsConfig.self, PathsConfig.self, TLSConfig.self, HSTSConfig.self,
        LogConfig.self, ReadinessConfig.self, LoginPageConfig.self, CORSConfig.self, MetricsConfig.self, AuditConfig.self,
        PDPConfig.self, AgentConfig.self, ForwardAuthConfig.self, SessionConfig.self, SecurityConfig.self, SecretsConfig.self,
        StoreConfig.self, CacheConfig.self, ChallengeConfig.self, EmailConfig.self, SMTPConfig.self, OAuth2Config.self,
        OAuthClient.self, TxnTokenConfig.self, BearerConfig.self, ExternalIssuer.self, UserRecord.self, PolicyConfig.self,
        StepUpConfig.self, TransactionConfig.self, BindConfig.self, FieldTypeConfig.self, ApprovalsConfig.self, WebhookConfig.self, ApprovalEmailConfig.self,
    ] }

    /// The errors of decoding `json` as `type` alone (not inside a gateway.json).
    static func errors<Object: ConfigObject>(_ type: Object.Type, _ json: String) -> [String] {
        let issues = ConfigIssues()
        let decoder = JSONDecoder()
        decoder.userInfo[ConfigIssues.userInfoKey] = issues
        do { _ = try decoder.decode(Object.self, from: Data(json.utf8)) } catch { issues.add(error, at: []) }
        return issues.errors.map(\.description)
    }

    static func keys<Object: ConfigObject>(_ type: Object.Type) -> [String] { Object.Key.allCases.map(\.rawValue) }

    @Test("every object refuses a key it does not declare, and accepts each one it does")
    func declaredKeysAreTheOnlyKeys() throws {
        for type in Self.objects {
            let keys = Self.keys(type)
            #expect(!keys.isEmpty)
            // Every declared key (null: as if absent, for the value checks), and one that is not.
            let json = "{" + (keys.map { #""\#($0)": null"# } + [#""notAKey": 1"#]).joined(separator: ", ") + "}"
            let unknown = Self.errors(type, json).filter { $0.hasSuffix("unknown key") }
            #expect(unknown == ["notAKey: unknown key"], "\(type)")
        }
    }

    /// The other half of "declared once": a key declared but never read would be accepted and
    /// ignored. Each key alone, given a value no key takes, must be an error at that key.
    @Test("every declared key is read: a value no key takes is an error at that key")
    func declaredKeysAreRead() throws {
        // Read only when another key says so.
        let conditional: Set<String> = [
            "FieldTypeConfig.min", "FieldTypeConfig.max",  // only for a decimal or an integer
        ]
        for type in Self.objects {
            for key in Self.keys(type) where !conditional.contains("\(type).\(key)") {
                let errors = Self.errors(type, #"{"\#(key)": [[[]]]}"#)
                #expect(errors.contains { $0.hasPrefix(key + ":") || $0.hasPrefix(key + "[") || $0.hasPrefix(key + ".") },
                        "\(type).\(key) is declared but not read: \(errors)")
            }
        }
    }

    /// `objects` names every type that conforms to `ConfigObject` in the sources.
    @Test func theListAboveIsComplete() throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/TxGateCore")
        var declared: Set<String> = []
        let files = try #require(FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil))
        for case let url as URL in files where url.pathExtension == "swift" {
            let text = try String(contentsOf: url, encoding: .utf8)
            for match in text.matches(of: /struct (\w+): ConfigObject\b/) { declared.insert(String(match.output.1)) }
        }
        #expect(declared == Set(Self.objects.map { "\($0)" }))
    }

    // MARK: reload

    static let base = #""upstream": {"url": "http://127.0.0.1:9000"}, "journeys": {"Login": [{"type": "UsernamePassword"}]}"#

    /// The certificate files the `tls` changes name.
    static let files = InMemoryConfigFiles(["/tmp/c.pem": Data(), "/tmp/c2.pem": Data(), "/tmp/k.pem": Data()])

    /// `base` with the top-level members of `extra` (`"key": value, ...`) put in.
    static func config(_ extra: String = "") throws -> GatewayConfig {
        func object(_ members: String) throws -> [String: Any] {
            try #require(JSONSerialization.jsonObject(with: Data(("{" + members + "}").utf8)) as? [String: Any])
        }
        let merged = try object(base).merging(try object(extra)) { $1 }
        return try ConfigLoader.decode(JSONSerialization.data(withJSONObject: merged), folder: "/tmp", files: files)
    }

    /// A change to each key a reload does not apply, and the name the restart warning gives it.
    static let restartChanges: [(String, String)] = [
        (#""listen": "127.0.0.1:9999""#, "listen"),
        (#""workers": 255"#, "workers"),
        (#""upstream": {"url": "http://127.0.0.1:9000", "keepAlive": 3}"#, "upstream"),
        (#""store": {"path": "/tmp/other.db"}"#, "store"),
        (#""limits": {"maxParkedBodyBytes": 1}"#, "limits"),
        (#""secrets": {"tokenKeysFolder": "/tmp/keys"}"#, "secrets"),
        (#""readiness": {"intervalMs": 100}"#, "readiness"),
        (#""metrics": {"allowFrom": ["10.0.0.0/8"]}"#, "metrics"),
        (#""log": {"level": "debug"}"#, "log.level"),
        (#""tls": {"certificate": "c.pem", "privateKey": "k.pem"}"#, "tls (turning it on or off)"),
    ]

    /// Changes a reload applies.
    static let liveChanges = [
        #""publicUrl": "https://gw.example""#, #""paths": {"semicolon": "keep"}"#, #""shutdownTimeoutMs": 1"#,
        #""users": [{"username": "u", "passwordHash": "$scrypt$ln=15,r=8,p=1$dQtS+YK5SMUpCON4+VX/yw$eAwSg4fwRdQ4nN79S5DGHF1rREMSt30hv9lFHj5PoWI"}]"#,
        #""loginJourney": "Login2", "journeys": {"Login2": [{"type": "UsernamePassword"}]}"#, #""realms": ["r"]"#,
        #""session": {"idleTimeoutS": 60}"#, #""security": {"maxFailedAttempts": 1}"#, #""policies": []"#,
        #""cache": {"maxEntries": 1}"#, #""challenges": {"bearer": "both"}"#, #""email": {"outbox": "/tmp/outbox"}"#,
        #""trustedProxies": ["10.0.0.0/8"]"#, #""loginPage": {"title": "T"}"#, #""cors": {"maxAgeS": 1}"#,
        #""oauth2": {}"#, #""txnTokens": {"ttlS": 1}"#, #""forwardAuth": {"bodiesForwarded": true}"#,
        #""bearer": {"issuers": [{"issuer": "https://idp", "jwksUri": "https://idp/jwks", "audience": "a"}]}"#,
        #""audit": {"retentionDays": 1}"#, #""pdp": {"timeoutMs": 1}"#, #""log": {"access": false}"#, #""tls": {"certificate": "c2.pem", "privateKey": "k.pem"}"#,
    ]

    @Test("a change to each restart-only setting is named in the warning, and the running value kept")
    func restartOnlyChangesAreReported() throws {
        let running = try Self.config()
        for (change, name) in Self.restartChanges {
            let new = try Self.config(change)
            #expect(ConfigReload.restartNeeded(old: running, new: new) == [name], "\(change)")
            let effective = ConfigReload.effective(new, running: running)
            #expect(ConfigReload.restartNeeded(old: running, new: effective) == [], "\(change): not put back")
            let key = try #require(GatewayConfig.Key(rawValue: String(name.prefix { $0.isLetter || $0.isNumber })))
            #expect(ConfigReload.applied([key.rawValue], running: running, effective: effective) == [], "\(change)")
        }
    }

    @Test("a change to a live setting is applied and named as changed, not in the warning")
    func liveChangesAreApplied() throws {
        let tls = #""tls": {"certificate": "c.pem", "privateKey": "k.pem"}"#
        let running = try Self.config(tls)
        for change in Self.liveChanges {
            let new = try Self.config(change.hasPrefix(#""tls""#) ? change : tls + ", " + change)
            #expect(ConfigReload.restartNeeded(old: running, new: new) == [], "\(change)")
            let effective = ConfigReload.effective(new, running: running)
            let key = String(change.dropFirst().prefix { $0 != "\"" })
            #expect(ConfigReload.applied([key], running: running, effective: effective) == [key], "\(change)")
        }
        // `log.access` applied, `log.level` kept: one line each.
        let both = try Self.config(tls + #", "log": {"level": "debug", "access": false}"#)
        let effective = ConfigReload.effective(both, running: running)
        #expect(ConfigReload.restartNeeded(old: running, new: both) == ["log.level"])
        #expect(effective.log.level == "info" && effective.log.access == false)
        #expect(ConfigReload.applied(["log"], running: running, effective: effective) == ["log"])
    }

    @Test("the rules say what the documentation says")
    func theRestartOnlyKeysAreTheDocumentedOnes() throws {
        let modes = Dictionary(uniqueKeysWithValues: GatewayConfig.Key.allCases.map { ($0.rawValue, GatewayConfig.reload($0).mode) })
        #expect(modes.filter { $0.value == .restart }.keys.sorted()
            == ["cpuAffinity", "limits", "listen", "metrics", "readiness", "secrets", "store", "upstream", "workers"])
        #expect(modes.filter { $0.value != .restart && $0.value != .live }
            == ["log": .partly("log.level"), "tls": .partly("tls (turning it on or off)")])
        // Every key has a rule: `reload` is a switch over `Key`, which `init(from:)` reads from.
        #expect(Set(Self.keys(GatewayConfig.self)) == Set(modes.keys))
        // The warning lists them in the order it always has.
        let running = try Self.config()
        let everything = try Self.config(Self.restartChanges.map(\.0).joined(separator: ", "))
        #expect(ConfigReload.restartNeeded(old: running, new: everything)
            == ["listen", "workers", "upstream", "store", "limits", "tls (turning it on or off)", "log.level", "secrets",
                "readiness", "metrics"])
    }

    /// CONFIGURATION.md's "Reloading the configuration" names every top-level key where the rules put it.
    @Test func theDocumentedReloadListsAreTheRules() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let doc = try String(contentsOf: root.appendingPathComponent("docs/CONFIGURATION.md"), encoding: .utf8)
        func names(inBullet title: String) throws -> Set<String> {
            let start = try #require(doc.range(of: "- **" + title)).upperBound
            let end = doc[start...].range(of: "\n- **")?.lowerBound ?? doc.endIndex
            return Set(doc[start..<end].matches(of: /`([A-Za-z0-9.]+)`/).map { String($0.output.1) })
        }
        var live: Set<String> = ["log.access", "tls.hsts"], restart: Set<String> = []
        for key in GatewayConfig.Key.allCases {
            switch GatewayConfig.reload(key).mode {
            case .live: live.insert(key.rawValue)
            case .restart: restart.insert(key.rawValue)
            case .partly(let part): restart.insert(part.hasPrefix("tls") ? "tls" : part)
            }
        }
        #expect(try names(inBullet: "Applied at once:") == live)
        #expect(try names(inBullet: "Need a restart") == restart)
    }

    // MARK: files

    @Test("the loader reads the files a configuration names only through the reader it is given")
    func filesComeFromTheReader() throws {
        let json = #"{"upstream": {"url": "https://a", "caFile": "ca.pem"}, "usersFile": "users.json", "#
            + #""oauth2": {"clients": [{"clientId": "c", "redirectUris": ["https://app/cb"], "clientSecretFile": "secret"}]}, "#
            + #""journeys": {"Login": [{"type": "UsernamePassword"}]}}"#
        let users = #"[{"username": "u", "passwordHash": "$scrypt$ln=15,r=8,p=1$dQtS+YK5SMUpCON4+VX/yw$eAwSg4fwRdQ4nN79S5DGHF1rREMSt30hv9lFHj5PoWI"}]"#
        let files = InMemoryConfigFiles(["/etc/gw/ca.pem": Data("x".utf8), "/etc/gw/users.json": Data(users.utf8),
                                         "/etc/gw/secret": Data("0123456789abcdef\n".utf8), "/etc/gw/gateway.json": Data(json.utf8)])
        let c = try ConfigLoader.load(path: "/etc/gw/gateway.json", files: files)
        #expect(c.upstream.caFile == "/etc/gw/ca.pem")
        #expect(c.users.map(\.username) == ["u"])
        #expect(c.oauth2?.clients.first?.clientSecret == "0123456789abcdef")

        var missing = files
        missing.files["/etc/gw/ca.pem"] = nil
        missing.files["/etc/gw/secret"] = nil
        do {
            _ = try ConfigLoader.load(path: "/etc/gw/gateway.json", files: missing)
            Issue.record("accepted without its files")
        } catch {
            #expect(error.errors.map(\.description) == [
                "upstream.caFile: cannot read file '/etc/gw/ca.pem'",
                "oauth2.clients[0].clientSecretFile: cannot read '/etc/gw/secret', or it holds fewer than 16 characters",
            ])
        }
        do {
            _ = try ConfigLoader.load(path: "/etc/gw/other.json", files: files)
            Issue.record("read a file that is not there")
        } catch {
            #expect(error.errors.map(\.description) == ["cannot read configuration file '/etc/gw/other.json': No such file or directory"])
        }
    }

    @Test("on disk: a folder or a missing file is named as the OS says")
    func diskReaderSaysWhy() {
        let disk = DiskConfigFiles()
        guard case .failure(let folder) = disk.read(NSTemporaryDirectory()) else { Issue.record("read a folder"); return }
        #expect(folder.reason == "it is a folder")
        guard case .failure(let missing) = disk.read("/nonexistent/txgate.json") else { Issue.record("read nothing"); return }
        #expect(missing.reason == "No such file or directory")
        #expect(!disk.isReadable("/nonexistent/txgate.json"))
    }

    // MARK: retry refusals

    @Test("a refused retry's reason: the log's message and the metric's label, as before")
    func refusalMessagesAndLabels() {
        #expect(RetryRefusal.allCases.map(\.metricLabel) == ["unknown", "expired", "not_completed", "another_subject",
                                                             "another_realm", "another_resource", "body_differs", "other"])
        #expect(RetryRefusal.allCases.map(\.message) == ["unknown, expired or consumed", "expired", "not completed",
                                                         "another subject", "another realm", "another resource or method",
                                                         "the bound body fields differ", "does not match this request"])
    }
}
