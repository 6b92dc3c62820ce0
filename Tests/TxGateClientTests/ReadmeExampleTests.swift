import Foundation
import Testing

/// The Swift examples of the docs are compiled: a ```` ```swift file=PATH ```` block of README.md
/// or docs/**/*.md must be, character for character, the code between the markers
/// `// --- README example begins` and `// --- README example ends` of PATH, a file of this
/// package that `swift build --build-tests` compiles (docs/CLIENT.md's is
/// Tests/TxGateClientTests/ReadmeExample.swift).
@Suite struct ReadmeExampleTests {
    static let root: URL = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url
    }()

    struct CompiledBlock {
        var document: String
        var line: Int
        var file: String
        var code: String
    }

    /// The ```swift file=... blocks of `markdown`.
    static func compiledBlocks(in markdown: String, document: String) -> [CompiledBlock] {
        let lines = markdown.components(separatedBy: "\n")
        var found: [CompiledBlock] = []
        var i = 0
        while i < lines.count {
            let words = lines[i].split(separator: " ").map(String.init)
            if lines[i].hasPrefix("```swift"), words.first == "```swift", let file = words.dropFirst().first(where: { $0.hasPrefix("file=") }) {
                let start = i + 1
                var j = start
                while j < lines.count, lines[j] != "```" { j += 1 }
                found.append(CompiledBlock(document: document, line: start, file: String(file.dropFirst(5)),
                                           code: lines[start..<min(j, lines.count)].joined(separator: "\n")))
                i = j
            }
            i += 1
        }
        return found
    }

    static func documents() -> [String] {
        var docs = ["README.md"]
        if let walker = FileManager.default.enumerator(atPath: root.appendingPathComponent("docs").path) {
            for case let path as String in walker where path.hasSuffix(".md") { docs.append("docs/" + path) }
        }
        return docs
    }

    /// The code between the markers of `text`, or nil without both markers.
    static func markedCode(in text: String) -> String? {
        let lines = text.components(separatedBy: "\n")
        guard let begin = lines.firstIndex(of: "// --- README example begins"),
              let end = lines.firstIndex(of: "// --- README example ends"), begin < end else { return nil }
        return lines[(begin + 1)..<end].joined(separator: "\n")
    }

    @Test func theDocsSwiftExamplesAreTheCompiledFiles() throws {
        var blocks: [CompiledBlock] = []
        for doc in Self.documents() {
            let text = try String(contentsOf: Self.root.appendingPathComponent(doc), encoding: .utf8)
            blocks += Self.compiledBlocks(in: text, document: doc)
        }
        // The client library's example lives in docs/CLIENT.md (it was the README's, hence the names).
        #expect(blocks.contains { $0.document == "docs/CLIENT.md" && $0.file == "Tests/TxGateClientTests/ReadmeExample.swift" },
                "docs/CLIENT.md has no ```swift file=Tests/TxGateClientTests/ReadmeExample.swift block")
        for block in blocks {
            let url = Self.root.appendingPathComponent(block.file)
            guard let text = try? String(contentsOf: url, encoding: .utf8) else {
                Issue.record("\(block.document):\(block.line): ```swift file=\(block.file): no such file")
                continue
            }
            guard let compiled = Self.markedCode(in: text) else {
                Issue.record("\(block.file) lacks the lines `// --- README example begins` and `// --- README example ends`")
                continue
            }
            if compiled != block.code {
                let a = block.code.components(separatedBy: "\n"), b = compiled.components(separatedBy: "\n")
                let first = zip(a, b).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(a.count, b.count)
                Issue.record("""
                    \(block.document):\(block.line): the ```swift block differs from the code compiled in \(block.file), \
                    first at its line \(first + 1):
                      \(block.document): \(first < a.count ? a[first] : "(ends)")
                      \(block.file): \(first < b.count ? b[first] : "(ends)")
                    Make them the same (edit one, copy it into the other).
                    """)
            }
        }
    }

    @Test func aDifferenceIsFound() {
        let md = "text\n```swift file=X.swift\nlet a = 1\n```\n```swift\nnot compiled\n```\n"
        let blocks = Self.compiledBlocks(in: md, document: "t.md")
        #expect(blocks.count == 1)
        #expect(blocks.first?.code == "let a = 1")
        #expect(Self.markedCode(in: "x\n// --- README example begins\nlet a = 1\n// --- README example ends\n") == "let a = 1")
        #expect(Self.markedCode(in: "// --- README example begins\nlet a = 2\n// --- README example ends") != blocks.first?.code)
    }
}
