import Foundation
import Testing
import TestSupport

/// The repository describes its own wire formats (docs/WIRE.md, and what TxGate adds on top in
/// docs/WIRE-EXTENSIONS.md): nothing it holds may send a reader to a file outside it (a clone
/// has no sibling `shared` folder), or to a section of either document that does not exist.
@Suite struct DocsReferenceTests {
    static let root = BinaryLocator.packageRoot

    /// Every file git tracks (and the untracked ones it does not ignore); outside a git checkout
    /// (a source archive), every file under the root but hidden folders and build output.
    /// git runs in a temporary folder: SpawnedProcess writes its output logs into the folder it
    /// runs in, and logs left in the checkout would be listed (and committed) as its files.
    static func files() throws -> [String] {
        let scratch = try TemporaryDirectory(prefix: "txgate-docs-refs")
        defer { scratch.remove() }
        if let r = try? SpawnedProcess.run(URL(fileURLWithPath: "/usr/bin/git"),
                                           ["-C", root.path, "ls-files", "--cached", "--others", "--exclude-standard"],
                                           directory: scratch.url),
           r.status == 0, !r.stdout.isEmpty {
            return r.stdout.split(separator: "\n").map(String.init)
                .filter { FileManager.default.fileExists(atPath: root.appendingPathComponent($0).path) }
        }
        var found: [String] = []
        let base = root.standardizedFileURL.path + "/"
        let walk = FileManager.default.enumerator(at: root, includingPropertiesForKeys: [.isRegularFileKey],
                                                  options: [.skipsHiddenFiles])
        while let url = walk?.nextObject() as? URL {
            let path = url.standardizedFileURL.path
            if url.lastPathComponent == ".build" || url.lastPathComponent == "var" { walk?.skipDescendants(); continue }
            if (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true, path.hasPrefix(base) {
                found.append(String(path.dropFirst(base.count)))
            }
        }
        return found
    }

    /// A document's section numbers: `## 3. …` / `### 3a. …` in WIRE.md, `## §3b. …` in WIRE-EXTENSIONS.md.
    static func sections(_ text: String) -> Set<String> {
        Set(text.split(separator: "\n").compactMap { line -> String? in
            line.firstMatch(of: #/^#{2,3} §?(\d+[a-z]?)\. /#).map { String($0.1) }
        })
    }

    struct Reference: Equatable, CustomStringConvertible {
        var extensions: Bool
        var section: String
        var description: String { (extensions ? "WIRE-EXTENSIONS" : "WIRE") + ".md §" + section }
    }

    /// The section references in `text`: `WIRE.md §4`, `docs/WIRE.md §2–3, §8`, `WIRE.md's §5`,
    /// `[WIRE.md](WIRE.md) §3b`, `WIRE-EXTENSIONS §7`, `[docs/WIRE-EXTENSIONS.md §9](…)`: every
    /// number of the list that follows the name (a range's two ends).
    static func references(in text: String) -> [Reference] {
        let reference = #/WIRE(-EXTENSIONS)?(?:\.md)?(?:\]\([^)\s]*\))?(?:'s)?[)\]]?,?[ \t]*(§ ?\d+[a-z]?(?: ?[–—-] ?§? ?\d+[a-z]?|,? (?:and |or )?§ ?\d+[a-z]?)*)/#
        var found: [Reference] = []
        for m in text.matches(of: reference) {
            for n in m.2.matches(of: #/\d+[a-z]?/#) {
                found.append(Reference(extensions: m.1 != nil, section: String(n.0)))
            }
        }
        return found
    }

    @Test func theReferenceParserReadsEveryFormTheRepositoryUses() {
        let text = """
            (WIRE.md §4) docs/WIRE.md §2–3, §8 (docs/WIRE.md §3–§6) WIRE.md §3a, §3b, §7, the JSON
            (WIRE.md §3 and §7) [WIRE.md](WIRE.md) §12 WIRE.md's §5 WIRE-EXTENSIONS §4b
            [docs/WIRE-EXTENSIONS.md](docs/WIRE-EXTENSIONS.md) §3b [docs/WIRE-EXTENSIONS.md §9](docs/WIRE-EXTENSIONS.md)
            WIRE.md, §1 WIRE.md describes; docs/WIRE-EXTENSIONS.md has the rest; 2 cores
            """
        let expected: [(Bool, String)] = [(false, "4"), (false, "2"), (false, "3"), (false, "8"), (false, "3"), (false, "6"),
                                          (false, "3a"), (false, "3b"), (false, "7"), (false, "3"), (false, "7"), (false, "12"),
                                          (false, "5"), (true, "4b"), (true, "3b"), (true, "9"), (false, "1")]
        #expect(Self.references(in: text) == expected.map { Reference(extensions: $0.0, section: $0.1) })
    }

    @Test func nothingPointsOutsideTheRepositoryOrAtAMissingSection() throws {
        let docs = Self.root.appendingPathComponent("docs")
        let wire = Self.sections(try String(contentsOf: docs.appendingPathComponent("WIRE.md"), encoding: .utf8))
        let extensions = Self.sections(try String(contentsOf: docs.appendingPathComponent("WIRE-EXTENSIONS.md"), encoding: .utf8))
        // The contract's numbering, 1 to 13 (the code and the tests cite it), and IG's four forms of §3.
        #expect(wire.isSuperset(of: (1...13).map(String.init) + ["3a", "3b", "3c", "3d"]), "docs/WIRE.md's sections: \(wire.sorted())")
        // WIRE-EXTENSIONS.md keeps WIRE.md's numbers: §4b adds to §4.
        let unanchored = extensions.filter { !wire.contains(String($0.prefix { $0.isNumber })) }
        #expect(unanchored.isEmpty, "WIRE-EXTENSIONS.md sections with no WIRE.md section of that number: \(unanchored.sorted())")
        #expect(!extensions.isEmpty)

        let outside = ".." + "/shared/"  // spelled in two pieces, so that this file does not name it
        var pointingOutside: [String] = []
        var missing: [String] = []
        let files = try Self.files()
        #expect(files.contains("README.md") && files.contains("docs/WIRE.md"), "\(files.count) files found")
        for file in files {
            guard let data = FileManager.default.contents(atPath: Self.root.appendingPathComponent(file).path),
                  let text = String(data: data, encoding: .utf8) else { continue }  // binary
            if text.contains(outside) { pointingOutside.append(file) }
            guard file.hasSuffix(".md") || file.hasSuffix(".swift") else { continue }
            for r in Self.references(in: text) where !(r.extensions ? extensions : wire).contains(r.section) {
                missing.append("\(file): \(r)")
            }
        }
        #expect(pointingOutside.isEmpty, "files that send readers to \(outside), which a clone does not have: \(pointingOutside)")
        #expect(missing.isEmpty, "references to sections the documents in docs/ do not have: \(missing)")
    }

    // MARK: links between the pages

    /// A Markdown document's lines outside fenced blocks (```` ``` ```` or `~~~`, closed by a
    /// fence of the same character at least as long).
    static func linesOutsideFences(_ markdown: String) -> [Substring] {
        var out: [Substring] = []
        var fence: String?
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.drop { $0 == " " }
            if let f = fence {
                if trimmed.hasPrefix(f) && trimmed.allSatisfy({ $0 == f.first! }) { fence = nil }
                continue
            }
            if trimmed.hasPrefix("```") || trimmed.hasPrefix("~~~") {
                fence = String(trimmed.prefix { $0 == trimmed.first! })
                continue
            }
            out.append(line)
        }
        return out
    }

    /// The anchors GitHub gives a Markdown document's headings: lowercased, punctuation and
    /// symbols dropped (letters, digits, `-` and `_` kept), spaces turned into `-`; a repeated
    /// heading gets `-1`, `-2`, ... Headings inside fenced blocks (a shell comment) are none.
    static func anchors(_ markdown: String) -> Set<String> {
        var found = Set<String>()
        var seen: [String: Int] = [:]
        for line in linesOutsideFences(markdown) {
            guard let m = line.firstMatch(of: #/^#{1,6}[ \t]+(.*?)[ \t#]*$/#) else { continue }
            var slug = ""
            for scalar in m.1.lowercased().unicodeScalars {
                if scalar == " " { slug += "-" }
                else if scalar == "-" || scalar == "_" || CharacterSet.alphanumerics.contains(scalar) { slug.unicodeScalars.append(scalar) }
            }
            let n = seen[slug, default: 0]
            seen[slug] = n + 1
            found.insert(n == 0 ? slug : "\(slug)-\(n)")
        }
        return found
    }

    /// The relative link targets of a Markdown document (`[text](TARGET)`), outside fenced blocks.
    static func links(_ markdown: String) -> [String] {
        var out: [String] = []
        for line in linesOutsideFences(markdown) {
            // Code spans are text, never links (`[UInt8](capacity:)` in prose).
            for m in line.replacing(#/`[^`]*`/#, with: "").matches(of: #/\]\(([^)\s]+)\)/#) {
                let target = String(m.1)
                if target.contains("://") || target.hasPrefix("mailto:") { continue }
                out.append(target)
            }
        }
        return out
    }

    @Test func theLinkParsersReadHeadingsAndLinksAsGitHubDoes() {
        let text = """
            # Logs, metrics and the audit trail
            ## Audit trail (`txgate audit`)
            ### A browser approves a POST: parked requests
            ## §3b. Browsers: parked requests and the 303
            ## Notes
            ## Notes
            ```sh
            # 1. not a heading
            [not](a-link.md)
            ```
            See [a](OAUTH.md#tokens), [b](#notes-1), [c](../README.md) and [d](https://example.com/x.md).
            A code span is not a link: `[UInt8](unsafeUninitializedCapacity:)`, nor `[e](e.md)`; [f](F.md) is.
            """
        #expect(Self.anchors(text) == ["logs-metrics-and-the-audit-trail", "audit-trail-txgate-audit",
                                       "a-browser-approves-a-post-parked-requests", "3b-browsers-parked-requests-and-the-303",
                                       "notes", "notes-1"])
        #expect(Self.links(text) == ["OAUTH.md#tokens", "#notes-1", "../README.md", "F.md"])
    }

    /// Pages moved out of the README (and sections between pages): a link to a file that is not
    /// there, or to a heading that is not in it, is a link a reader follows to nothing.
    @Test func everyLinkBetweenThePagesLeadsToAFileAndAHeading() throws {
        let files = try Self.files()
        let known = Set(files)
        var broken: [String] = []
        for file in files where file.hasSuffix(".md") {
            guard let text = try? String(contentsOf: Self.root.appendingPathComponent(file), encoding: .utf8) else { continue }
            let folder = (file as NSString).deletingLastPathComponent
            for link in Self.links(text) {
                let parts = link.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                var components: [String] = []
                for c in (folder.isEmpty ? parts[0] : folder + "/" + parts[0]).split(separator: "/") where c != "." {
                    if c == "..", !components.isEmpty { components.removeLast() } else { components.append(String(c)) }
                }
                let path = parts[0].isEmpty ? file : components.joined(separator: "/")
                guard known.contains(path) || FileManager.default.fileExists(atPath: Self.root.appendingPathComponent(path).path) else {
                    broken.append("\(file): (\(link)): no file \(path)")
                    continue
                }
                guard parts.count == 2, path.hasSuffix(".md") else { continue }
                let target = try String(contentsOf: Self.root.appendingPathComponent(path), encoding: .utf8)
                if !Self.anchors(target).contains(parts[1]) {
                    broken.append("\(file): (\(link)): \(path) has no heading with the anchor #\(parts[1])")
                }
            }
        }
        #expect(broken.isEmpty, "links that lead nowhere:\n\(broken.joined(separator: "\n"))")
    }

    /// The README is the map of docs/: every page is on it.
    @Test func theReadmeListsEveryPageOfDocs() throws {
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        let pages = try FileManager.default.contentsOfDirectory(atPath: Self.root.appendingPathComponent("docs").path)
            .filter { $0.hasSuffix(".md") }.sorted()
        #expect(pages.count > 10, "\(pages)")
        let missing = pages.filter { !readme.contains("](docs/\($0))") }
        #expect(missing.isEmpty, "docs pages the README's map does not link to: \(missing)")
    }
}
