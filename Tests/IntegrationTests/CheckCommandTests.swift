import Foundation
import Testing
import TestSupport

/// `txgate check --config FILE`: validates without starting anything, names every problem.
@Suite("txgate check", .testbed)
struct CheckCommandTests {
    /// `txgate check --config` on a file holding `text`, in the test's testbed.
    static func check(_ text: String) throws -> CommandResult {
        try Testbed.current.check(configText: text)
    }

    @Test("an unknown key is named by its path; exit 1")
    func unknownKey() throws {
        let r = try Self.check(#"{"upstream": {"url": "http://127.0.0.1:1", "timeoutMS": 5}}"#)
        #expect(r.status == 1, "\(r)")
        #expect(r.stderr.contains("upstream.timeoutMS: unknown key"), "\(r)")
        #expect(!r.stdout.contains("configuration OK"), "\(r)")
    }

    @Test("a value of the wrong type names its key; exit 1")
    func wrongType() throws {
        let r = try Self.check(#"{"upstream": {"url": "http://127.0.0.1:1"}, "workers": "two"}"#)
        #expect(r.status == 1, "\(r)")
        let lines = r.stderr.split(separator: "\n")
        #expect(lines.contains { $0.hasPrefix("workers") }, "no line `workers: ...`:\n\(r)")
    }

    @Test("every error is printed, not just the first")
    func everyErrorIsReported() throws {
        let r = try Self.check("""
            {"upstream": {"url": "http://127.0.0.1:1", "timeoutMS": 5}, "listn": "127.0.0.1:1", "workers": "two"}
            """)
        #expect(r.status == 1, "\(r)")
        #expect(r.stderr.contains("upstream.timeoutMS: unknown key"), "\(r)")
        #expect(r.stderr.contains("listn: unknown key"), "\(r)")
        #expect(r.stderr.contains("workers"), "\(r)")
    }

    @Test("a missing upstream.url is an error")
    func missingUpstream() throws {
        let r = try Self.check(#"{"listen": "127.0.0.1:8080"}"#)
        #expect(r.status == 1, "\(r)")
        #expect(r.stderr.contains("upstream"), "\(r)")
    }

    @Test("a file that is not JSON is an error, not a crash")
    func notJSON() throws {
        let r = try Self.check(#"{"upstream": {"url": "http://127.0.0.1:1"},"#)
        #expect(r.status == 1, "\(r)")
        #expect(!r.stderr.isEmpty, "\(r)")
    }

    @Test("a missing file is an error that names it")
    func missingFile() throws {
        let bed = try Testbed.current
        let path = bed.dir.file("does-not-exist.json").path
        let r = try bed.runTxgate(["check", "--config", path])
        #expect(r.status == 1, "\(r)")
        #expect(r.stderr.contains("does-not-exist.json"), "\(r)")
    }

    @Test("valid configurations print 'configuration OK' and exit 0")
    func validConfig() throws {
        let bed = try Testbed.current
        let minimal = try bed.check(configText: #"{"upstream": {"url": "http://127.0.0.1:9000"}}"#, name: "minimal.json")
        #expect(minimal.status == 0, "\(minimal)")
        #expect(minimal.stdout.contains("configuration OK"), "\(minimal)")

        let full = try bed.check(configText: """
            {
              "listen": "127.0.0.1:8080",
              "workers": 2,
              "publicUrl": "http://127.0.0.1:8080",
              "upstream": {"url": "http://127.0.0.1:9000", "connectTimeoutMs": 2000, "responseTimeoutMs": 30000,
                           "keepAlive": 64},
              "limits": {"maxHeaderBytes": 16384, "maxBodyBytes": 10485760},
              "log": {"level": "info", "access": true},
              "shutdownTimeoutMs": 10000
            }
            """, name: "full.json")
        #expect(full.status == 0, "\(full)")
        #expect(full.stdout.contains("configuration OK"), "\(full)")
    }

    @Test("serve refuses a bad configuration with the same message and exit 1")
    func serveRejectsBadConfig() throws {
        let bed = try Testbed.current
        let url = try bed.dir.write("bad.json", #"{"upstream": {"url": "http://127.0.0.1:1", "timeoutMS": 5}}"#)
        let r = try bed.runTxgate(["serve", "--config", url.path], timeout: 15)
        #expect(r.status == 1, "\(r)")
        #expect(r.stderr.contains("upstream.timeoutMS: unknown key"), "\(r)")
    }

    @Test("a redis store without a shared signing key is valid, with a warning; a bad redis url is an error")
    func redisStore() throws {
        let bed = try Testbed.current
        let cluster = #"{"upstream": {"url": "http://127.0.0.1:1"}, "store": {"type": "redis", "url": "redis://127.0.0.1:6379/1"}, "#
            + #""users": [], "journeys": {"Login": [{"type": "UsernamePassword"}]}, "policies": []}"#
        let r = try bed.check(configText: cluster)
        #expect(r.status == 0, "\(r)")
        if ProcessInfo.processInfo.environment["TXGATE_SIGNING_KEY"] == nil {
            #expect(r.stderr.contains("warning: store.type is redis but no shared signing key is set"), "\(r)")
        }
        let bad = try bed.check(configText: #"{"upstream": {"url": "http://127.0.0.1:1"}, "store": {"type": "redis", "url": "redis://u:hunter2@h:x"}}"#)
        #expect(bad.status == 1, "\(bad)")
        #expect(bad.stderr.contains("store.url: port 'x' is not a number"), "\(bad)")
        #expect(!bad.stderr.contains("hunter2"), "\(bad)")
        let badSentinel = try bed.check(configText: #"{"upstream": {"url": "http://127.0.0.1:1"}, "store": {"type": "redis", "url": "redis+sentinel://u:hunter2@s1:26379,s2:2637x/mymaster"}}"#)
        #expect(badSentinel.status == 1, "\(badSentinel)")
        #expect(badSentinel.stderr.contains("store.url: sentinel 2 of 2 ('s2:2637x'): port '2637x' is not a number"), "\(badSentinel)")
        #expect(!badSentinel.stderr.contains("hunter2"), "\(badSentinel)")
        let lone = try bed.check(configText: #"{"upstream": {"url": "http://127.0.0.1:1"}, "store": {"type": "redis", "url": "redis+sentinel://s1/mymaster"}}"#)
        #expect(lone.status == 0, "\(lone)")
        #expect(lone.stderr.contains("warning: store.url lists 1 sentinel for 'mymaster'"), "\(lone)")
    }

    // MARK: issue 17 item 7: a stricter file, and every check `serve` runs

    /// A configuration with an authentication service (so a signing key, a store and email),
    /// its store and key file in `var/` next to it; `extra` is spliced in at the top level.
    static func authConfig(_ extra: String = "") -> String {
        """
        {
          "upstream": {"url": "http://127.0.0.1:1"},
          "users": [{"username": "alice", "passwordHash": "$scrypt$ln=15,r=8,p=1$dQtS+YK5SMUpCON4+VX/yw$eAwSg4fwRdQ4nN79S5DGHF1rREMSt30hv9lFHj5PoWI", "email": "alice@example.com", "totpSecret": "JBSWY3DPEHPK3PXP"}],
          "journeys": {"Login": [{"type": "UsernamePassword"}], "Confirm": [{"type": "TOTP"}],
                       "Mail": [{"type": "UsernameOnly"}, {"type": "EmailOTP"}]},
          "email": {"outbox": "var/outbox"}\(extra.isEmpty ? "" : ",\n  " + extra)
        }
        """
    }

    /// `txgate check` with TXGATE_SIGNING_KEY removed from its environment, so that the key
    /// file is what counts.
    static func checkWithoutKeyVariable(_ bed: Testbed, _ text: String) throws -> CommandResult {
        let url = try bed.dir.write("check.json", text)
        return try bed.runTool("env", ["-u", "TXGATE_SIGNING_KEY", try BinaryLocator.txgate.path, "check", "--config", url.path])
    }

    @Test("a duplicate key is an error naming its path, line and column (not: the first one wins)")
    func duplicateKey() throws {
        let r = try Self.check(#"{"upstream": {"url": "http://127.0.0.1:1", "url": "http://127.0.0.1:2"}}"#)
        #expect(r.status == 1, "\(r)")
        #expect(r.stderr.contains("upstream.url: line 1, column 44: duplicate key 'url'"), "\(r)")
        let deep = try Self.check("""
            {"upstream": {"url": "http://127.0.0.1:1"},
             "policies": [{"name": "a", "resources": ["/a"], "actions": ["GET"], "subjects": "anyone",
                           "subjects": "authenticated"}]}
            """)
        #expect(deep.status == 1, "\(deep)")
        #expect(deep.stderr.contains("policies[0].subjects: line 3, column 16: duplicate key 'subjects'"), "\(deep)")
    }

    @Test("a trailing comma is an error with its line and column")
    func trailingComma() throws {
        let r = try Self.check("{\"upstream\": {\"url\": \"http://127.0.0.1:1\"},\n}\n")
        #expect(r.status == 1, "\(r)")
        #expect(r.stderr.contains("line 2, column 1: trailing comma before '}'"), "\(r)")
        let inArray = try Self.check("{\"upstream\": {\"url\": \"http://127.0.0.1:1\"},\n \"realms\": [\"a\", \"b\",]}")
        #expect(inArray.status == 1, "\(inArray)")
        #expect(inArray.stderr.contains("realms: line 2, column 22: trailing comma before ']'"), "\(inArray)")
    }

    @Test("a syntax error names line and column and what was expected")
    func syntaxErrorPosition() throws {
        let r = try Self.check("""
            {
              "upstream": {"url": "http://127.0.0.1:1"}
              "workers": 2
            }
            """)
        #expect(r.status == 1, "\(r)")
        #expect(r.stderr.contains("line 3, column 3: expected ',' or '}' after the value of 'upstream', found '\"'"), "\(r)")
        #expect(!r.stderr.contains("The given data was not valid JSON"), "\(r)")
    }

    @Test("a short TXGATE_SIGNING_KEY fails check as it fails serve")
    func shortSigningKey() throws {
        let bed = try Testbed.current
        let url = try bed.dir.write("check.json", Self.authConfig())
        let r = try bed.runTxgate(["check", "--config", url.path], environment: ["TXGATE_SIGNING_KEY": "short"])
        #expect(r.status == 1, "\(r)")
        #expect(r.stderr.contains("TXGATE_SIGNING_KEY: must be at least 32 characters"), "\(r)")
        let serve = try bed.runTxgate(["serve", "--config", url.path], timeout: 15, environment: ["TXGATE_SIGNING_KEY": "short"])
        #expect(serve.status == 1, "\(serve)")
        #expect(serve.stderr.contains("TXGATE_SIGNING_KEY: must be at least 32 characters"), "\(serve)")

        let long = try bed.runTxgate(["check", "--config", url.path], environment: ["TXGATE_SIGNING_KEY": String(repeating: "k", count: 32)])
        #expect(long.status == 0, "\(long)")
    }

    @Test("check creates nothing: the key file, the store and the outbox are only checked")
    func checkCreatesNothing() throws {
        let bed = try Testbed.current
        let r = try Self.checkWithoutKeyVariable(bed, Self.authConfig())
        #expect(r.status == 0, "\(r)")
        #expect(r.stdout.contains("configuration OK"), "\(r)")
        #expect(!FileManager.default.fileExists(atPath: bed.dir.file("var").path), "check created var/")
    }

    @Test("a signing key file that cannot be read or is too short is an error")
    func badSigningKeyFile() throws {
        let bed = try Testbed.current
        try FileManager.default.createDirectory(at: bed.dir.file("keydir"), withIntermediateDirectories: true)
        let folder = try Self.checkWithoutKeyVariable(bed, Self.authConfig(#""secrets": {"signingKeyFile": "keydir"}"#))
        #expect(folder.status == 1, "\(folder)")
        #expect(folder.stderr.contains("secrets.signingKeyFile: cannot read '\(bed.dir.file("keydir").path)'"), "\(folder)")

        _ = try bed.dir.write("short.key", "abc\n")
        let short = try Self.checkWithoutKeyVariable(bed, Self.authConfig(#""secrets": {"signingKeyFile": "short.key"}"#))
        #expect(short.status == 1, "\(short)")
        #expect(short.stderr.contains("secrets.signingKeyFile: '\(bed.dir.file("short.key").path)' holds fewer than 32 characters"), "\(short)")

        _ = try bed.dir.write("plain-file", "x")
        let blocked = try Self.checkWithoutKeyVariable(bed, Self.authConfig(#""secrets": {"signingKeyFile": "plain-file/signing.key"}"#))
        #expect(blocked.status == 1, "\(blocked)")
        #expect(blocked.stderr.contains("secrets.signingKeyFile: cannot create"), "\(blocked)")
    }

    @Test("files named in the config must be readable; TLS files must parse")
    func unreadableFiles() throws {
        let bed = try Testbed.current
        let missing = try bed.check(configText: #"{"upstream": {"url": "http://127.0.0.1:1"}, "usersFile": "nope.json"}"#)
        #expect(missing.status == 1, "\(missing)")
        #expect(missing.stderr.contains("usersFile: cannot read file '\(bed.dir.file("nope.json").path)'"), "\(missing)")

        _ = try bed.dir.write("cert.pem", "not a certificate\n")
        _ = try bed.dir.write("key.pem", "not a key\n")
        let tls = try bed.check(configText: #"{"upstream": {"url": "http://127.0.0.1:1"}, "tls": {"certificate": "cert.pem", "privateKey": "key.pem"}}"#)
        #expect(tls.status == 1, "\(tls)")
        #expect(tls.stderr.contains("tls.certificate: cannot load '\(bed.dir.file("cert.pem").path)'"), "\(tls)")

        let ca = try bed.check(configText: #"{"upstream": {"url": "https://127.0.0.1:1", "caFile": "cert.pem"}}"#)
        #expect(ca.status == 1, "\(ca)")
        #expect(ca.stderr.contains("upstream.caFile: cannot load '\(bed.dir.file("cert.pem").path)'"), "\(ca)")

        let password = try bed.check(configText: Self.authConfig().replacingOccurrences(
            of: #""email": {"outbox": "var/outbox"}"#,
            with: #""email": {"smtp": {"url": "smtp://127.0.0.1:1", "from": "gw@example.com", "passwordFile": "pw.txt"}}"#))
        #expect(password.status == 1, "\(password)")
        #expect(password.stderr.contains("email.smtp.passwordFile: cannot read file '\(bed.dir.file("pw.txt").path)'"), "\(password)")
    }

    @Test("a display placeholder that names no bound field is an error naming its path")
    func displayPlaceholderTypo() throws {
        let r = try Self.check(Self.authConfig("""
            "policies": [{"name": "transfer", "resources": ["/transfer"], "actions": ["POST"],
                          "transaction": {"journey": "Confirm", "bind": {"body": ["/amount", "/payee"]},
                                          "display": "Approve {amount} to {payeee}?"}}]
            """))
        #expect(r.status == 1, "\(r)")
        #expect(r.stderr.contains("policies[0].transaction.display: unknown placeholder '{payeee}'"), "\(r)")
    }

    @Test("an email template placeholder that is not a known variable is an error naming its path")
    func emailPlaceholderTypo() throws {
        let r = try Self.check(Self.authConfig().replacingOccurrences(
            of: #"{"type": "EmailOTP"}"#, with: #"{"type": "EmailOTP", "body": "Your code is {cdoe}"}"#))
        #expect(r.status == 1, "\(r)")
        #expect(r.stderr.contains("journeys.Mail[1].body: unknown placeholder '{cdoe}'"), "\(r)")
    }

    @Test("two policies with one name: the second is named")
    func duplicatePolicyName() throws {
        let r = try Self.check(Self.authConfig("""
            "policies": [{"name": "p", "resources": ["/a"], "actions": ["GET"]},
                         {"name": "q", "resources": ["/b"], "actions": ["GET"]},
                         {"name": "p", "resources": ["/c"], "actions": ["GET"]}]
            """))
        #expect(r.status == 1, "\(r)")
        #expect(r.stderr.contains("policies[2].name: duplicate policy name 'p'"), "\(r)")
    }
}

/// The OAuth 2.0 provider's and the Transaction Tokens' settings, checked before anything starts.
@Suite("txgate check: oauth2 and txnTokens", .testbed)
struct OAuthConfigCheckTests {
    static let auth = #""users": [], "journeys": {"Login": [{"type": "UsernamePassword"}]}"#

    @Test("a client that is neither public nor has a secret, or both, and a txnTokens without audience, are named")
    func clientAndTxnTokenErrors() throws {
        let r = try Testbed.current.check(configText: """
            {"upstream": {"url": "http://127.0.0.1:1"}, \(Self.auth),
             "oauth2": {"clients": [{"clientId": "a", "redirectUris": ["https://a.example/cb"]},
                                    {"clientId": "b", "public": true, "clientSecretFile": "s", "redirectUris": ["https://b.example/cb"]},
                                    {"clientId": "c", "public": true, "redirectUris": ["not a uri"]}]},
             "txnTokens": {"enabled": true}}
            """)
        #expect(r.status == 1, "\(r)")
        #expect(r.stderr.contains("oauth2.clients[0].public"), "\(r)")
        #expect(r.stderr.contains("oauth2.clients[1].clientSecretFile: a public client has no secret"), "\(r)")
        #expect(r.stderr.contains("oauth2.clients[2].redirectUris: 'not a uri'"), "\(r)")
        #expect(r.stderr.contains("txnTokens.audience"), "\(r)")
    }

    @Test("oauth2 needs the authentication service; a confidential client's secret file must be readable")
    func needsJourneysAndSecret() throws {
        let bare = try Testbed.current.check(configText: """
            {"upstream": {"url": "http://127.0.0.1:1"}, "oauth2": {"clients": []}}
            """)
        #expect(bare.status == 1 && bare.stderr.contains("oauth2: needs the authentication service"), "\(bare)")
        let secret = try Testbed.current.check(configText: """
            {"upstream": {"url": "http://127.0.0.1:1"}, \(Self.auth),
             "oauth2": {"clients": [{"clientId": "api", "clientSecretFile": "missing.secret", "redirectUris": ["https://a.example/cb"]}]}}
            """)
        #expect(secret.status == 1 && secret.stderr.contains("oauth2.clients[0].clientSecretFile: cannot read"), "\(secret)")
    }
}
