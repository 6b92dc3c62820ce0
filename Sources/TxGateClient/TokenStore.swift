import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a login leaves: the session token and where it is valid.
public struct StoredSession: Codable, Sendable, Equatable {
    /// The server's origin (`https://gw.example.com`): the token is sent there and nowhere else.
    public var server: String
    /// The session token.
    public var tokenId: String
    /// The journey's `successUrl`, if it named one.
    public var successUrl: String?
    /// The session's realm, if the server said.
    public var realm: String?

    /// A session as it is stored.
    ///
    /// - Parameters:
    ///   - server: The server's origin: scheme, host and port.
    ///   - tokenId: The session token.
    ///   - successUrl: The journey's `successUrl`.
    ///   - realm: The session's realm.
    public init(server: String, tokenId: String, successUrl: String? = nil, realm: String? = nil) {
        self.server = server
        self.tokenId = tokenId
        self.successUrl = successUrl
        self.realm = realm
    }
}

/// Where the client keeps its session between calls.
///
/// ``MemoryTokenStore`` keeps it for the life of the process, ``FileTokenStore`` in a file. An app
/// can keep it elsewhere (the keychain) by conforming its own type.
public protocol TokenStore: Sendable {
    /// The stored session.
    ///
    /// - Returns: The session, or nil when there is none.
    /// - Throws: When the store cannot be read.
    func load() throws -> StoredSession?
    /// Stores a session in place of any other.
    ///
    /// - Parameter session: The session a journey's success left.
    /// - Throws: When the store cannot be written.
    func save(_ session: StoredSession) throws
    /// Forgets the session; nothing happens when there is none.
    ///
    /// - Throws: When the store cannot be changed.
    func remove() throws
}

/// The session in memory, for the life of the process.
public final class MemoryTokenStore: TokenStore, @unchecked Sendable {
    // @unchecked: `session` is only touched under `lock`.
    private let lock = NSLock()
    private var session: StoredSession?

    /// A store holding `session`.
    ///
    /// - Parameter session: The session to start with; none by default.
    public init(_ session: StoredSession? = nil) { self.session = session }
    /// The session in memory.
    ///
    /// - Returns: The session, or nil when there is none.
    public func load() -> StoredSession? { lock.withLock { session } }
    /// Keeps `session` in place of any other.
    ///
    /// - Parameter session: The session to keep.
    public func save(_ session: StoredSession) { lock.withLock { self.session = session } }
    /// Forgets the session.
    public func remove() { lock.withLock { session = nil } }
}

/// The session as JSON in a file that only its owner can read (0600), written whole (a
/// temporary file renamed over it), its folder created 0700 if missing.
public struct FileTokenStore: TokenStore {
    /// The session file.
    public let path: String

    /// A store in the file at `path` (nothing is read or written until the client needs it).
    ///
    /// - Parameter path: The session file, e.g. ``defaultPath``.
    public init(path: String) { self.path = path }

    /// `~/.config/txgate/session.json`.
    public static var defaultPath: String {
        let home = ProcessInfo.processInfo.environment["HOME"] ?? NSHomeDirectory()
        return home + "/.config/txgate/session.json"
    }

    /// Reads the session file.
    ///
    /// - Returns: The session, or nil when there is no file (or none this process may read).
    /// - Throws: `CocoaError(.fileReadCorruptFile)` when the file is not a session file.
    public func load() throws -> StoredSession? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        do {
            return try JSONDecoder().decode(StoredSession.self, from: data)
        } catch {
            throw CocoaError(.fileReadCorruptFile, userInfo: [NSFilePathErrorKey: path, NSLocalizedDescriptionKey: "\(path): not a session file"])
        }
    }

    /// Writes the session file whole (mode 0600, through a temporary file renamed over it),
    /// creating its folder (mode 0700) if missing.
    ///
    /// - Parameter session: The session to keep.
    /// - Throws: `POSIXError` when the folder or the file cannot be written.
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

    /// Removes the session file; nothing happens when there is none.
    ///
    /// - Throws: `POSIXError` when the file exists and cannot be removed.
    public func remove() throws {
        guard unlink(path) == 0 || errno == ENOENT else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO, path: path) }
    }
}

extension POSIXError {
    init(_ code: POSIXErrorCode, path: String) {
        self.init(code, userInfo: [NSFilePathErrorKey: path])
    }
}
