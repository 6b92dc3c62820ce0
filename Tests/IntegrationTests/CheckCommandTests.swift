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
    }
}
