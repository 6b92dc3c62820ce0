import Foundation

/// A fresh directory for one test, removed by `remove()` (call it in a `defer`) or when the
/// last reference goes.
public final class TemporaryDirectory: @unchecked Sendable {
    // @unchecked: `url` is immutable and `removed` is only touched under `lock`.
    public let url: URL
    private let lock = NSLock()
    private var removed = false

    public init(prefix: String = "txgate-test") throws {
        let base = FileManager.default.temporaryDirectory
        let name = "\(prefix)-\(getpid())-\(UUID().uuidString.prefix(8))"
        url = base.appendingPathComponent(name, isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    public var path: String { url.path }

    public func file(_ name: String) -> URL {
        url.appendingPathComponent(name)
    }

    /// The path of `name` inside the directory.
    public func path(_ name: String) -> String { file(name).path }

    @discardableResult
    public func write(_ name: String, _ text: String) throws -> URL {
        try write(name, data: Data(text.utf8))
    }

    @discardableResult
    public func write(_ name: String, data: Data) throws -> URL {
        let u = file(name)
        try data.write(to: u)
        return u
    }

    public func read(_ name: String) -> String {
        (try? String(contentsOf: file(name), encoding: .utf8)) ?? ""
    }

    /// Set TXGATE_KEEP_TMP=1 to keep the directory (logs, configs) for a post-mortem.
    public func remove() {
        lock.lock()
        defer { lock.unlock() }
        guard !removed else { return }
        removed = true
        if ProcessInfo.processInfo.environment["TXGATE_KEEP_TMP"] == "1" { return }
        try? FileManager.default.removeItem(at: url)
    }

    deinit { remove() }
}
