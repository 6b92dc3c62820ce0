import Foundation
import Testing
import TestSupport

/// Docs that cannot rot: every ```` ```sh run ```` block of README.md and docs/**/*.md runs
/// against the demo (demo-bank, and txgate with the repository's own gateway.json) as
/// `make run` starts it, and its ```` ```text expect ```` lines must appear in what it prints.
/// The convention: docs/RUNNABLE-DOCS.md.
@Suite(.testbed) struct RunnableDocsTests {
    /// The groups found when the tests are listed; a document that cannot be parsed is one
    /// failing group (named by the error), not a test run that cannot start.
    static let groups: [Result<RunnableDocs.Group, RunnableDocs.ParseError>] = {
        let root = BinaryLocator.packageRoot
        var out: [Result<RunnableDocs.Group, RunnableDocs.ParseError>] = []
        for file in RunnableDocs.documents(in: root) {
            do {
                let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
                out += try RunnableDocs.parse(text, file: file).map { .success($0) }
            } catch let e as RunnableDocs.ParseError {
                out.append(.failure(e))
            } catch {
                out.append(.failure(.init(description: "\(file): cannot read: \(error)")))
            }
        }
        return out
    }()

    static var runnable: [RunnableDocs.Group] { groups.compactMap { try? $0.get() } }

    @Test func everyDocumentParses() {
        for case .failure(let e) in Self.groups { Issue.record("\(e)") }
    }

    /// The walk-throughs each page is known for, by section: a marker that goes missing (or a
    /// section that moves without its example) would silently turn the runner off for it.
    static let walkThroughs: [String: [String]] = [
        "README.md": ["Five minutes with the demo", "With the command line"],
        "docs/AUTHENTICATION.md": ["Log in with curl", "A magic-link login through the outbox"],
        "docs/TRANSACTIONS.md": ["The whole flow with curl", "Declining, and a wrong code"],
        "docs/OAUTH.md": ["Get an access token with curl", "A bearer client approves a transfer", "Transaction Tokens to the backend"],
        "docs/CLIENT.md": ["The command line"],
        "docs/LOGS-METRICS-AUDIT.md": ["Metrics (`/-/metrics`)", "Audit trail (`txgate audit`)"],
    ]

    @Test func everyPageHasItsRunnableWalkThroughs() {
        for (file, sections) in Self.walkThroughs.sorted(by: { $0.key < $1.key }) {
            let blocks = Self.runnable.filter { $0.file == file }.flatMap(\.blocks)
            for section in sections {
                #expect(blocks.contains { $0.heading == section && !$0.expected.isEmpty },
                        "no ```sh run block with its ```text expect in \(file)'s section '\(section)'")
            }
        }
    }

    @Test(.timeLimit(.minutes(4)), arguments: runnable)
    func snippetsRunAsDocumented(_ group: RunnableDocs.Group) async throws {
        let bed = try Testbed.current
        for tool in ["curl", "jq", "oathtool", "openssl"] where BinaryLocator.onPath(tool) == nil {
            throw HarnessError("\(tool) is not installed: the docs' snippets use it (scripts/install-deps.sh installs the test set)")
        }
        let demo = try DocsDemo.start(in: bed)
        // After `make install`, txgate and demo-bank are on PATH; HOME keeps the CLI's session
        // file (~/.config/txgate) in the test's folder. curl prints no progress meter on a
        // terminal, where people run these; its ~/.curlrc does the same here.
        try bed.dir.write(".curlrc", "no-progress-meter\n")
        let env = ["PATH": "\(BinaryLocator.binDirectory.path):\(ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")",
                   "HOME": bed.dir.url.path]
        let results = try RunnableDocs.run(group, in: bed.dir.url, environment: env, transform: demo.addresses.apply)
        var failed = false
        for r in results where !r.passed && !failed {
            failed = true
            Issue.record(Comment(rawValue: RunnableDocs.report(r, transform: demo.addresses.apply)
                + "\n--- txgate's log (last lines):\n" + demo.gateway.process.stderrTail(15)))
        }
    }

    // The runner itself: it fails loudly, and it checks what it says it checks.

    @Test func aFailingCommandFailsItsBlockAndStopsTheGroup() throws {
        let bed = try Testbed.current
        let groups = try RunnableDocs.parse("""
            # A
            ```sh run
            GREETING=hello
            ```
            ```sh run
            echo "$GREETING from block 2"
            false
            echo never
            ```
            ```text expect
            hello from block 2
            ```
            ```sh run
            echo three
            ```
            """, file: "t.md")
        let results = try RunnableDocs.run(try #require(groups.first), in: bed.dir.url)
        #expect(results.map(\.passed) == [true, false, false])
        #expect(results[1].ran && !results[1].finished)
        #expect(results[1].output.contains("hello from block 2"))
        #expect(!results[1].output.contains("never"))
        #expect(!results[2].ran)
        let report = RunnableDocs.report(results[1])
        #expect(report.contains("t.md:5"))
        #expect(report.contains("false"))
        #expect(report.contains("hello from block 2"))
        #expect(report.contains("exited non-zero"))
    }

    @Test func outputIsCheckedInOrderWithEllipses() throws {
        let bed = try Testbed.current
        let groups = try RunnableDocs.parse("""
            ```sh run
            printf '{"tokenId":"abc","realm":"/"}{"valid":true}\\nHTTP/1.1 201 Created\\n'
            ```
            ```text expect
            {"tokenId":"...","realm":"/"}
            {"valid":true}
            HTTP/1.1 201
            ```
            ```bash run
            echo 'HTTP/1.1 401 Unauthorized'
            ```
            ```text expect
            HTTP/1.1 201
            ```
            """, file: "t.md")
        let results = try RunnableDocs.run(try #require(groups.first), in: bed.dir.url)
        #expect(results.map(\.passed) == [true, false])
        #expect(results[1].finished && results[1].missing == "HTTP/1.1 201")
        #expect(RunnableDocs.firstMissing(["b", "a"], in: "a b") == "a")
        #expect(RunnableDocs.firstMissing(["a...c"], in: "a b\nc") == "a...c")
        #expect(RunnableDocs.firstMissing(["a...c"], in: "a b c") == nil)
    }

    @Test func groupsAndMarkersAreParsedStrictly() throws {
        let groups = try RunnableDocs.parse("""
            ```sh
            not run
            ```
            ```sh run=cli
            b
            ```
            ```sh run
            a
            ```
            - a list item:
              ```sh run
              c
              ```
            """, file: "t.md")
        #expect(groups.map(\.name) == ["cli", nil])
        #expect(groups[1].blocks.map(\.code) == ["a", "c"])
        // A longer fence shows the convention without running it.
        let shown = try RunnableDocs.parse("````markdown\n```sh run\nx\n```\n```text expect\ny\n```\n````\n```sh run\nz\n```", file: "t.md")
        #expect(shown.flatMap(\.blocks).map(\.code) == ["z"])
        #expect(throws: RunnableDocs.ParseError.self) { try RunnableDocs.parse("```sh rnu\nx\n```", file: "t.md") }
        #expect(throws: RunnableDocs.ParseError.self) { try RunnableDocs.parse("```sh\nx\n```\n```text expect\ny\n```", file: "t.md") }
        #expect(throws: RunnableDocs.ParseError.self) { try RunnableDocs.parse("```sh run\nx\n", file: "t.md") }
        let addresses = RunnableDocs.Addresses(gatewayPort: 1234, bankPort: 5678)
        #expect(addresses.apply("http://127.0.0.1:8080/x?r=http%3A%2F%2F127.0.0.1%3A8080%2Fcb 127.0.0.1:9000")
                == "http://127.0.0.1:1234/x?r=http%3A%2F%2F127.0.0.1%3A1234%2Fcb 127.0.0.1:5678")
    }
}

/// The demo as `make run` starts it (scripts/run-demo.sh): demo-bank, and txgate with the
/// repository's gateway.json, both on free ports, its relative paths (var/) in the test's folder.
struct DocsDemo {
    var addresses: RunnableDocs.Addresses
    var gateway: GatewayInstance
    var bank: DemoBankInstance

    static func start(in bed: Testbed) throws -> DocsDemo {
        let gatewayPort = try Ports.free()
        let text = try String(contentsOf: BinaryLocator.packageRoot.appendingPathComponent("gateway.json"), encoding: .utf8)
        let parsed = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] ?? [:]
        let txnTokens = (parsed["txnTokens"] as? [String: Any])?["enabled"] as? Bool ?? false
        let jwks = "http://127.0.0.1:\(gatewayPort)/am/oauth2/realms/root/connect/jwk_uri"
        let bank = try bed.startDemoBank(arguments: txnTokens ? ["--txn-token-jwks", jwks] : [])
        let addresses = RunnableDocs.Addresses(gatewayPort: gatewayPort, bankPort: bank.port)
        let config = try JSONSerialization.jsonObject(with: Data(addresses.apply(text).utf8)) as? [String: Any] ?? [:]
        let gateway = try bed.startGateway(port: gatewayPort) { _ in config }
        return DocsDemo(addresses: addresses, gateway: gateway, bank: bank)
    }
}
