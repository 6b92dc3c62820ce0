import Foundation
import Testing
import TestSupport

/// The runnable snippets of the project's Markdown (README.md and docs/**/*.md), and how they
/// are run: the convention is documented in docs/RUNNABLE-DOCS.md.
///
/// - ```` ```sh run ```` (or `bash`): a runnable block. All runnable blocks of one document
///   run in order in one bash process (`set -euo pipefail`), so that variables set by one
///   block are there for the next. ```` ```sh run=NAME ```` puts a block in the document's
///   group NAME instead, which runs in its own bash process against its own fresh demo.
/// - ```` ```text expect ````: what the runnable block before it must print (stdout and
///   stderr together). Each line must appear, in this order; `...` in a line stands for
///   anything on that line.
/// - The demo's addresses (`127.0.0.1:8080`, `127.0.0.1:9000`, also URL-encoded) are
///   replaced everywhere (configuration, snippets, expectations) with the test's free ports.
enum RunnableDocs {
    /// One fenced block that the runner uses.
    struct Block: Sendable, CustomStringConvertible {
        var file: String
        var line: Int          // the line of the opening fence, from 1
        var heading: String    // the section it is in
        var code: String
        var expected: [String] = []
        var expectLine: Int?

        var description: String { "\(file):\(line) (\"\(heading)\")" }
    }

    /// The runnable blocks of one document that share one bash process and one demo.
    struct Group: Sendable, CustomStringConvertible, CustomTestStringConvertible {
        var file: String
        var name: String?
        var blocks: [Block]
        var description: String { name.map { "\(file) [run=\($0)]" } ?? file }
        var testDescription: String { description }
    }

    struct ParseError: Error, CustomStringConvertible {
        var description: String
    }

    static let runnableLanguages: Set<String> = ["sh", "bash"]

    /// The groups of one Markdown document, in document order (the default group first).
    static func parse(_ markdown: String, file: String) throws -> [Group] {
        var blocks: [(group: String?, block: Block)] = []
        var heading = "(top)"
        var lastRunnable: Int?          // index into `blocks` of the block an expect block may follow
        let lines = markdown.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var i = 0
        while i < lines.count {
            let line = lines[i]
            let stripped = line.drop { $0 == " " }
            let indent = line.count - stripped.count
            guard indent <= 3, stripped.hasPrefix("```") else {
                if line.hasPrefix("#") { heading = line.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces) }
                i += 1
                continue
            }
            let fence = String(stripped.prefix { $0 == "`" })
            let words = stripped.dropFirst(fence.count).split(separator: " ").map(String.init)
            let opening = i + 1
            var body: [String] = []
            i += 1
            while i < lines.count, !(lines[i].drop { $0 == " " }.hasPrefix(fence) && lines[i].trimmingCharacters(in: .whitespaces).allSatisfy { $0 == "`" }) {
                var l = lines[i]
                // A fence indented (in a list) has its content indented as much.
                var n = 0
                while n < indent, l.hasPrefix(" ") { l.removeFirst(); n += 1 }
                body.append(l)
                i += 1
            }
            guard i < lines.count else { throw ParseError(description: "\(file):\(opening): a fenced block that is never closed") }
            i += 1
            let code = body.joined(separator: "\n")
            guard let language = words.first else { continue }
            let attributes = Array(words.dropFirst())
            if runnableLanguages.contains(language) {
                let runs = attributes.filter { $0 == "run" || $0.hasPrefix("run=") }
                if let unknown = attributes.first(where: { $0 != "run" && !$0.hasPrefix("run=") }) {
                    throw ParseError(description: "\(file):\(opening): unknown word '\(unknown)' after ```\(language) (write `run` or `run=GROUP`)")
                }
                guard let run = runs.first else { lastRunnable = nil; continue }
                guard runs.count == 1 else { throw ParseError(description: "\(file):\(opening): `run` given twice") }
                let group = run == "run" ? nil : String(run.dropFirst(4))
                if group == "" { throw ParseError(description: "\(file):\(opening): `run=` names no group") }
                blocks.append((group, Block(file: file, line: opening, heading: heading, code: code)))
                lastRunnable = blocks.count - 1
            } else if language == "text", attributes.contains("expect") {
                if let unknown = attributes.first(where: { $0 != "expect" }) {
                    throw ParseError(description: "\(file):\(opening): unknown word '\(unknown)' after ```text expect")
                }
                guard let target = lastRunnable else {
                    throw ParseError(description: "\(file):\(opening): a ```text expect block must follow a ```sh run block (its expected output)")
                }
                guard blocks[target].block.expectLine == nil else {
                    throw ParseError(description: "\(file):\(opening): a second ```text expect block for the block at line \(blocks[target].block.line)")
                }
                let expected = body.filter { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
                guard !expected.isEmpty else { throw ParseError(description: "\(file):\(opening): an empty ```text expect block") }
                blocks[target].block.expected = expected
                blocks[target].block.expectLine = opening
                lastRunnable = nil
            } else {
                lastRunnable = nil
            }
        }
        var order: [String?] = []
        var byGroup: [String?: [Block]] = [:]
        for (group, block) in blocks {
            if byGroup[group] == nil { order.append(group) }
            byGroup[group, default: []].append(block)
        }
        return order.map { Group(file: file, name: $0, blocks: byGroup[$0]!) }
    }

    /// README.md and every docs/**/*.md of the package, relative paths in a stable order.
    static func documents(in root: URL) -> [String] {
        var found = ["README.md"]
        let docs = root.appendingPathComponent("docs")
        if let walker = FileManager.default.enumerator(atPath: docs.path) {
            for case let path as String in walker where path.hasSuffix(".md") {
                found.append("docs/" + path)
            }
        }
        return [found[0]] + found.dropFirst().sorted()
    }

    /// Every group of every document under `root`.
    static func groups(in root: URL) throws -> [Group] {
        try documents(in: root).flatMap { file in
            let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
            return try parse(text, file: file)
        }
    }

    /// The first of `expected` that `output` lacks (in order; `...` is anything on one line),
    /// or nil when all are there.
    static func firstMissing(_ expected: [String], in output: String) -> String? {
        var from = output.startIndex
        for line in expected {
            let pattern = line.trimmingCharacters(in: .whitespaces)
                .components(separatedBy: "...")
                .map { NSRegularExpression.escapedPattern(for: $0) }
                .joined(separator: "[^\\n]*")
            guard let regex = try? NSRegularExpression(pattern: pattern),
                  let match = regex.firstMatch(in: output, range: NSRange(from..<output.endIndex, in: output)),
                  let range = Range(match.range, in: output) else { return line }
            from = range.upperBound
        }
        return nil
    }

    /// The demo's addresses and the test's, applied to configuration, snippets and expectations.
    struct Addresses: Sendable {
        var gatewayPort: Int
        var bankPort: Int

        func apply(_ text: String) -> String {
            text.replacingOccurrences(of: "127.0.0.1:8080", with: "127.0.0.1:\(gatewayPort)")
                .replacingOccurrences(of: "127.0.0.1%3A8080", with: "127.0.0.1%3A\(gatewayPort)")
                .replacingOccurrences(of: "localhost:8080", with: "localhost:\(gatewayPort)")
                .replacingOccurrences(of: "localhost%3A8080", with: "localhost%3A\(gatewayPort)")
                .replacingOccurrences(of: "127.0.0.1:9000", with: "127.0.0.1:\(bankPort)")
                .replacingOccurrences(of: "127.0.0.1%3A9000", with: "127.0.0.1%3A\(bankPort)")
        }
    }

    /// What happened to one block.
    struct BlockResult: Sendable {
        var block: Block
        var ran: Bool          // it was started
        var finished: Bool     // it ran to its end without a failing command
        var output: String
        var missing: String?   // the first expected line its output lacks

        var passed: Bool { ran && finished && missing == nil }
    }

    /// Runs `group`'s blocks (after `transform`) in order in one `bash` in `directory` with
    /// `environment` added; a block's failing command (`set -euo pipefail`) ends the run.
    static func run(_ group: Group, in directory: URL, environment: [String: String] = [:],
                    timeout: Double = 180, transform: (String) -> String = { $0 }) throws -> [BlockResult] {
        let work = directory.appendingPathComponent(".docs-run-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        var driver = "set -euo pipefail\n"
        for (n, block) in group.blocks.enumerated() {
            let snippet = work.appendingPathComponent("\(n).sh")
            try Data((transform(block.code) + "\n").utf8).write(to: snippet)
            // A brace group with a redirection runs in this shell: what a block sets, the next sees.
            driver += """
                : > '\(work.path)/\(n).started'
                { source '\(snippet.path)'; } > '\(work.path)/\(n).out' 2>&1
                : > '\(work.path)/\(n).finished'

                """
        }
        let script = work.appendingPathComponent("driver.sh")
        try Data(driver.utf8).write(to: script)
        guard let bash = BinaryLocator.onPath("bash") else { throw HarnessError("bash is not on PATH") }
        let p = try SpawnedProcess(bash, ["--noprofile", "--norc", script.path], name: "docs-bash",
                                   directory: directory, environment: environment)
        defer { p.kill() }
        let status = p.waitForExit(timeout: timeout)
        let fm = FileManager.default
        var results: [BlockResult] = []
        for (n, block) in group.blocks.enumerated() {
            let ran = fm.fileExists(atPath: work.appendingPathComponent("\(n).started").path)
            let finished = fm.fileExists(atPath: work.appendingPathComponent("\(n).finished").path)
            var output = (try? String(contentsOf: work.appendingPathComponent("\(n).out"), encoding: .utf8)) ?? ""
            if ran, !finished {
                output += status == nil ? "\n[runner: still running after \(Int(timeout)) s; killed]"
                                        : "\n[runner: bash exited with status \(status!) in this block]"
                if !p.stderr.isEmpty { output += "\n[bash's own stderr]\n" + p.stderr }
            }
            let expected = block.expected.map(transform)
            let missing = finished ? firstMissing(expected, in: output) : nil
            results.append(BlockResult(block: block, ran: ran, finished: finished, output: output, missing: missing))
        }
        return results
    }

    /// A report a reader can act on: the block, what it printed, and what was expected.
    static func report(_ r: BlockResult, transform: (String) -> String = { $0 }) -> String {
        let why: String
        if !r.ran { why = "did not run (an earlier block failed)" }
        else if !r.finished { why = "failed: a command exited non-zero (blocks run under `set -euo pipefail`)" }
        else { why = "printed something else than documented: missing the expected line\n    \(transform(r.missing ?? ""))" }
        let expected = r.block.expected.isEmpty ? "    (no ```text expect block: it only has to succeed)"
            : r.block.expected.map { "    " + transform($0) }.joined(separator: "\n")
        return """
            runnable snippet at \(r.block) \(why)
            --- the snippet (as run):
            \(transform(r.block.code))
            --- its output (stdout and stderr):
            \(r.output.isEmpty ? "(nothing)" : r.output)
            --- expected lines (```text expect\(r.block.expectLine.map { " at line \($0)" } ?? "")):
            \(expected)
            """
    }
}
