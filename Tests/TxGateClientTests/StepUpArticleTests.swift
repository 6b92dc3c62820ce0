import Foundation
import Testing

/// The DocC article's Swift code is the code StepUpArticleExample.swift compiles: a block edited
/// in one place and not the other fails here, so the article cannot drift from the API.
@Suite struct StepUpArticleTests {
    static let testsFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    static let article = testsFolder.appendingPathComponent("../../Sources/TxGateClient/TxGateClient.docc/ApprovingATransfer.md").standardized
    static let example = testsFolder.appendingPathComponent("StepUpArticleExample.swift")

    /// The fenced blocks of `markdown` whose info string is `language`, each as its lines.
    static func codeBlocks(_ markdown: String, language: String) -> [[String]] {
        var blocks: [[String]] = []
        var current: [String]?
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if current == nil, trimmed == "```" + language {
                current = []
            } else if current != nil, trimmed == "```" {
                blocks.append(current!)
                current = nil
            } else if current != nil {
                current!.append(line)
            }
        }
        return blocks
    }

    /// Whether `lines` occur in `text` one after the other, whole lines.
    static func contains(_ text: String, _ lines: [String]) -> Bool {
        let all = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard !lines.isEmpty, lines.count <= all.count else { return false }
        return (0...(all.count - lines.count)).contains { start in Array(all[start..<start + lines.count]) == lines }
    }

    @Test func everySwiftBlockOfTheArticleIsCompiledVerbatim() throws {
        let markdown = try String(contentsOf: Self.article, encoding: .utf8)
        let source = try String(contentsOf: Self.example, encoding: .utf8)
        let blocks = Self.codeBlocks(markdown, language: "swift")
        #expect(blocks.count >= 7, "the article's walk-through: client, login, request, challenge, delegate, retry, failures, logout")
        for block in blocks {
            #expect(Self.contains(source, block), "not in StepUpArticleExample.swift, verbatim:\n\(block.joined(separator: "\n"))")
        }
    }

    @Test func theCheckSeesAChangedLine() {
        let source = "func a() {\n    print(1)\n}\n"
        #expect(Self.contains(source, ["func a() {", "    print(1)", "}"]))
        #expect(!Self.contains(source, ["func a() {", "    print(2)", "}"]))
        #expect(!Self.contains(source, ["func a() {", "print(1)", "}"]), "indentation counts")
        #expect(Self.codeBlocks("text\n```swift\nlet x = 1\n```\n```\nraw\n```\n", language: "swift") == [["let x = 1"]])
    }
}
