import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a login leaves: the session token and where it is valid.
public struct StoredSession: Codable, Sendable, Equatable {
    public var server: String
    public var tokenId: String
    public var successUrl: String?
    public var realm: String?

    public init(server: String, tokenId: String, successUrl: String? = nil, realm: String? = nil) {
        self.server = server
        self.tokenId = tokenId
        self.successUrl = successUrl
        self.realm = realm
    }
}

/// Where the client keeps its session between calls.
public protocol TokenStore: Sendable {
    func load() throws -> StoredSession?
    func save(_ session: StoredSession) throws
    func remove() throws
}

/// The session in memory, for the life of the process.
public final class MemoryTokenStore: TokenStore, @unchecked Sendable {
    // @unchecked: `session` is only touched under `lock`.
    private let lock = NSLock()
    private var session: StoredSession?

    public init(_ session: StoredSession? = nil) { self.session = session }
    public func load() -> StoredSession? { lock.withLock { session } }
    public func save(_ session: StoredSession) { lock.withLock { self.session = session } }
    public func remove() { lock.withLock { session = nil } }
}

/// The session as JSON in a file that only its owner can read (0600), written whole (a
/// temporary file renamed over it), its folder created 0700 if missing.
public struct FileTokenStore: TokenStore {
    public let path: String

    public init(path: String) { self.path = path }

    /// `~/.config/txgate/session.json`.
    public static var defaultPath: String {
        let home = ProcessInfo.processInfo.environment["HOME"] ?? NSHomeDirectory()
        return home + "/.config/txgate/session.json"
    }

    public func load() throws -> StoredSession? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        do {
            return try JSONDecoder().decode(StoredSession.self, from: data)
        } catch {
            throw CocoaError(.fileReadCorruptFile, userInfo: [NSFilePathErrorKey: path, NSLocalizedDescriptionKey: "\(path): not a session file"])
        }
    }

    public func save(_ session: StoredSession) throws {
        let folder = (path as NSString).deletingLastPathComponent
        if !folder.isEmpty, !FileManager.default.fileExists(atPath: folder) {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let bytes = Array(try encoder.encode(session))
        let temporary = path + ".tmp\(getpid())"
        unlink(temporary)  // a leftover of a crashed save; O_EXCL then refuses anything put back in its place
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_EXCL, 0o600)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO, path: temporary) }
        defer { close(fd) }
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == bytes.count, fchmod(fd, 0o600) == 0, rename(temporary, path) == 0 else {
            let code = errno
            unlink(temporary)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO, path: path)
        }
    }

    public func remove() throws {
        guard unlink(path) == 0 || errno == ENOENT else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO, path: path) }
    }
}

extension POSIXError {
    init(_ code: POSIXErrorCode, path: String) {
        self.init(code, userInfo: [NSFilePathErrorKey: path])
    }
}
