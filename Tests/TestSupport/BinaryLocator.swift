import Foundation

/// Finds the executables built by `swift build`.
public enum BinaryLocator {
    /// The package root, derived from this file's location:
    /// <root>/Tests/TestSupport/BinaryLocator.swift.
    public static let packageRoot: URL = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url
    }()

    /// `TXGATE_BIN_DIR` if set (e.g. `$(swift build --show-bin-path)`), else `<root>/.build/debug`.
    public static var binDirectory: URL {
        if let dir = ProcessInfo.processInfo.environment["TXGATE_BIN_DIR"], !dir.isEmpty {
            return URL(fileURLWithPath: dir, isDirectory: true)
        }
        return packageRoot.appendingPathComponent(".build/debug", isDirectory: true)
    }

    /// The path of a built executable, or an error that says how to build it.
    public static func binary(_ name: String) throws -> URL {
        let url = binDirectory.appendingPathComponent(name)
        guard FileManager.default.isExecutableFile(atPath: url.path) else {
            let source = ProcessInfo.processInfo.environment["TXGATE_BIN_DIR"].map { "TXGATE_BIN_DIR=\($0)" }
                ?? "default location"
            throw HarnessError("""
                executable '\(name)' not found at \(url.path) (\(source)); \
                run `swift build` first (or set TXGATE_BIN_DIR to the folder holding txgate and demo-bank)
                """)
        }
        return url
    }

    public static var txgate: URL { get throws { try binary("txgate") } }
    public static var demoBank: URL { get throws { try binary("demo-bank") } }

    /// An executable on PATH (curl, openssl), or nil.
    public static func onPath(_ name: String) -> URL? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for dir in path.split(separator: ":") {
            let candidate = URL(fileURLWithPath: String(dir)).appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        return nil
    }
}
