import Foundation
import TxGateCore
import TxGateCrypto

/// The HS256 key for authIds. Every instance that should continue another's journeys needs
/// the same key: `TXGATE_SIGNING_KEY`, or the same key file.
enum SigningKey {
    enum Source: String { case environment, file, generated }

    static let minimumLength = 32

    /// Reads `TXGATE_SIGNING_KEY`, else the key file; creates the file (0600) with a random
    /// key on first start.
    static func load(file: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws(KeyError) -> ([UInt8], Source) {
        if let found = try existing(file: file, environment: environment) { return found }
        let fm = FileManager.default
        let folder = URL(fileURLWithPath: file).deletingLastPathComponent().path
        do {
            try fm.createDirectory(atPath: folder, withIntermediateDirectories: true)
        } catch {
            throw KeyError(fileKey, "cannot create folder '\(folder)': \(error.localizedDescription)")
        }
        let text = Base64URL.encode(Crypto.randomBytes(48))
        let fd = open(file, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard fd >= 0 else {
            throw KeyError(fileKey, "cannot create '\(file)': \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        let bytes = Array((text + "\n").utf8)
        guard write(fd, bytes, bytes.count) == bytes.count, fsync(fd) == 0 else {
            throw KeyError(fileKey, "cannot write '\(file)': \(String(cString: strerror(errno)))")
        }
        return (Array(text.utf8), .generated)
    }

    /// What `load` would refuse, without creating anything: for `txgate check`.
    static func problem(file: String, environment: [String: String]) -> ConfigError? {
        do {
            if try existing(file: file, environment: environment) != nil { return nil }
        } catch {
            return ConfigError(path: error.path, message: error.message)
        }
        if let why = FileCreation.problem(file) { return ConfigError(path: fileKey, message: "cannot create '\(file)': \(why)") }
        return nil
    }

    static let fileKey = "secrets.signingKeyFile"

    /// The key from `TXGATE_SIGNING_KEY` or from an existing key file; nil when the file is
    /// still to be created.
    private static func existing(file: String, environment: [String: String]) throws(KeyError) -> ([UInt8], Source)? {
        if let env = environment["TXGATE_SIGNING_KEY"] {
            let key = Array(env.utf8)
            guard key.count >= minimumLength else {
                throw KeyError("TXGATE_SIGNING_KEY", "must be at least \(minimumLength) characters (e.g. `openssl rand -base64 48`)")
            }
            return (key, .environment)
        }
        let fm = FileManager.default
        guard fm.fileExists(atPath: file) else { return nil }
        guard let data = fm.contents(atPath: file) else { throw KeyError(fileKey, "cannot read '\(file)'") }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard text.utf8.count >= minimumLength else {
            throw KeyError(fileKey, "'\(file)' holds fewer than \(minimumLength) characters")
        }
        return (Array(text.utf8), .file)
    }

    struct KeyError: Error, CustomStringConvertible {
        /// The setting at fault: `TXGATE_SIGNING_KEY` or `secrets.signingKeyFile`.
        let path: String
        let message: String
        init(_ path: String, _ message: String) { self.path = path; self.message = message }
        var description: String { "\(path): \(message)" }
    }
}
