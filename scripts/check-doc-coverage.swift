// `make docs`, after DocC: fails when a public symbol of a module has no doc comment of its own.
//
//     swift scripts/check-doc-coverage.swift MODULE SYMBOL_GRAPH_FILE...
//
// DocC itself warns about a broken link or a parameter documented under a wrong name, but says
// nothing about a symbol with no documentation at all; its coverage report counts those, mixed
// with what the compiler synthesizes (`!=`, `hashValue`, `init(from:)`), which nobody can document.
// The symbol graph tells them apart: a symbol declared in the module's sources has a `location`;
// a synthesized one has none. A doc comment inherited from another module (`description` from
// CustomStringConvertible says only "A textual representation of this instance") does not count:
// the symbol must be explained in this module's words. One a protocol requirement of this module
// hands down to its implementations counts, as DocC shows it.
import Foundation

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("check-doc-coverage: \(message)\n".utf8))
    exit(1)
}

let arguments = CommandLine.arguments.dropFirst()
guard let module = arguments.first, arguments.count >= 2 else {
    fail("usage: check-doc-coverage.swift MODULE SYMBOL_GRAPH_FILE...")
}

var checked = 0
var missing: [(file: String, line: Int, text: String)] = []
for file in arguments.dropFirst() {
    guard let data = FileManager.default.contents(atPath: file) else { fail("cannot read \(file)") }
    guard let graph = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
          let symbols = graph["symbols"] as? [[String: Any]] else { fail("\(file) is not a symbol graph") }
    for symbol in symbols {
        guard let access = symbol["accessLevel"] as? String, access == "public" || access == "open" else { continue }
        // Declared in the sources (synthesized and inherited members have no location).
        guard let location = symbol["location"] as? [String: Any], let uri = location["uri"] as? String else { continue }
        checked += 1
        let doc = symbol["docComment"] as? [String: Any]
        let lines = (doc?["lines"] as? [[String: Any]] ?? []).compactMap { $0["text"] as? String }
        let own = doc.map { ($0["module"] as? String ?? module) == module } ?? false
        if own, lines.contains(where: { !$0.trimmingCharacters(in: .whitespaces).isEmpty }) { continue }
        let path = (symbol["pathComponents"] as? [String] ?? []).joined(separator: ".")
        let kind = (symbol["kind"] as? [String: Any])?["displayName"] as? String ?? "symbol"
        let position = location["position"] as? [String: Any]
        let line = (position?["line"] as? Int).map { $0 + 1 } ?? 0
        let source = (URL(string: uri)?.path ?? uri).replacingOccurrences(of: FileManager.default.currentDirectoryPath + "/", with: "")
        let why = doc == nil ? "no doc comment" : own ? "an empty doc comment" : "only the doc comment it inherits from \(doc?["module"] ?? "?")"
        missing.append((source, line, "\(source):\(line): \(kind) \(path) has \(why)"))
    }
}
guard checked > 0 else { fail("no public symbol of \(module) found in \(arguments.dropFirst().joined(separator: " "))") }
if !missing.isEmpty {
    fail("\(missing.count) of \(checked) public symbols of \(module) are not documented:\n  " + missing.sorted { ($0.file, $0.line) < ($1.file, $1.line) }.map(\.text).joined(separator: "\n  "))
}
print("check-doc-coverage: all \(checked) public symbols of \(module) declared in its sources have doc comments")
