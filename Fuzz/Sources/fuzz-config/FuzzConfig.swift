// Configuration decoder (ConfigLoader.decode). It must throw ConfigErrors, never crash, on any
// bytes; errors carry a message. Relative paths resolve against an empty temporary folder, and
// no file the configuration names can be read (the files are an empty `InMemoryConfigFiles`).
import Foundation
import TxGateCore
import FuzzSupport

let folder: String = {
    let f = NSTemporaryDirectory() + "txgate-fuzz-config-\(getpid())"
    try? FileManager.default.createDirectory(atPath: f, withIntermediateDirectories: true)
    return f
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzConfig(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Data(bytes: data, count: size)
    do {
        let config = try ConfigLoader.decode(bytes, folder: folder, files: InMemoryConfigFiles())
        _ = String(describing: config).count
    } catch {
        if error.errors.isEmpty { fatalError("invariant: ConfigErrors without an error") }
        for e in error.errors where e.message.isEmpty { fatalError("invariant: an error without a message at \(e.path)") }
    }
    return 0
}

@_cdecl("fuzz_config_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt { runFuzzer(argc, argv, fuzzConfig) }
