import Foundation

/// A fresh directory for one test, removed when the test is done.
final class TemporaryDirectory: @unchecked Sendable {
    let url: URL
    private let lock = NSLock()
    private var removed = false

    init(prefix: String = "txgate-it") throws {
        let base = FileManager.default.temporaryDirectory
        let name = "\(prefix)-\(getpid())-\(UUID().uuidString.prefix(8))"
        url = base.appendingPathComponent(name, isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    var path: String { url.path }

    func file(_ name: String) -> URL {
        url.appendingPathComponent(name)
    }

    @discardableResult
    func write(_ name: String, _ text: String) throws -> URL {
        let u = file(name)
        try Data(text.utf8).write(to: u)
        return u
    }

    @discardableResult
    func write(_ name: String, data: Data) throws -> URL {
        let u = file(name)
        try data.write(to: u)
        return u
    }

    func read(_ name: String) -> String {
        (try? String(contentsOf: file(name), encoding: .utf8)) ?? ""
    }

    /// Set TXGATE_KEEP_TMP=1 to keep the directory (logs, configs) for a post-mortem.
    func remove() {
        lock.lock()
        defer { lock.unlock() }
        guard !removed else { return }
        removed = true
        if ProcessInfo.processInfo.environment["TXGATE_KEEP_TMP"] == "1" { return }
        try? FileManager.default.removeItem(at: url)
    }

    deinit { remove() }
}
