import Foundation
#if canImport(Glibc)
import Glibc
#endif
import TxGateCore

/// The files a configuration names, read from disk: what `txgate check`, `serve` and a reload
/// give `ConfigLoader` (TxGateCore does no I/O).
public struct DiskConfigFiles: ConfigFileReader {
    public init() {}

    /// The file's bytes, or the OS's word for why not (no such file, permission denied). Read
    /// with read(2) to its end, so that a pipe (`--config <(...)`) reads like a file.
    public func read(_ path: String) -> Result<Data, ConfigFileUnreadable> {
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), isFolder.boolValue {
            return .failure(ConfigFileUnreadable(reason: "it is a folder"))
        }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return .failure(ConfigFileUnreadable(reason: String(cString: strerror(errno)))) }
        defer { close(fd) }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n == 0 { return .success(data) }
            if n < 0 {
                if errno == EINTR { continue }
                return .failure(ConfigFileUnreadable(reason: String(cString: strerror(errno))))
            }
            data.append(contentsOf: buffer[0..<n])
        }
    }

    public func isReadable(_ path: String) -> Bool { FileManager.default.isReadableFile(atPath: path) }
}

extension ConfigLoader {
    /// The configuration file at `path`, and the files it names, read from disk.
    public static func load(path: String, overrides: ConfigOverrides = ConfigOverrides()) throws(ConfigErrors) -> GatewayConfig {
        try load(path: path, overrides: overrides, files: DiskConfigFiles())
    }
}
