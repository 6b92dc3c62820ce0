import Foundation
import Testing
import TestSupport

/// The repository describes its own wire formats (docs/WIRE.md): nothing it holds may send a
/// reader to a file outside it, or to a section of WIRE.md that does not exist.
@Suite struct DocsReferenceTests {
    static let root = BinaryLocator.packageRoot

    /// The Markdown and Swift files git tracks (and the untracked ones it does not ignore).
    static func files() throws -> [String] {
        let r = try SpawnedProcess.run(URL(fileURLWithPath: "/usr/bin/git"),
                                       ["-C", root.path, "ls-files", "--cached", "--others", "--exclude-standard"],
                                       directory: FileManager.default.temporaryDirectory)
        return r.stdout.split(separator: "\n").map(String.init).filter { $0.hasSuffix(".md") || $0.hasSuffix(".swift") }
    }

    @Test func everyWireReferenceNamesASectionOfDocsWire() throws {
        let wire = try String(contentsOf: Self.root.appendingPathComponent("docs/WIRE.md"), encoding: .utf8)
        let sections = Set(wire.split(separator: "\n").compactMap { line -> String? in
            guard let m = line.firstMatch(of: #/^#{2,3} (\d+[a-z]?)\. /#) else { return nil }
            return String(m.1)
        })
        #expect(sections.isSuperset(of: (1...13).map(String.init)), "\(sections.sorted())")
        var missing: [String] = []
        var outside: [String] = []
        for file in try Self.files() where file != "Tests/IntegrationTests/DocsReferenceTests.swift" {
            let text = try String(contentsOf: Self.root.appendingPathComponent(file), encoding: .utf8)
            if text.contains("../shared/") { outside.append(file) }
            for m in text.matches(of: /WIRE\.md[)\]]?,? ?§ ?(\d+[a-z]?)/) where !sections.contains(String(m.1)) {
                missing.append("\(file): §\(m.1)")
            }
        }
        #expect(outside.isEmpty, "files that point outside the repository: \(outside)")
        #expect(missing.isEmpty, "references to sections docs/WIRE.md does not have: \(missing)")
    }
}
