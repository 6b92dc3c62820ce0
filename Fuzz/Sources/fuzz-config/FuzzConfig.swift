// Configuration decoder (ConfigLoader.decode). It must throw ConfigErrors, never crash, on any
// bytes; errors carry a message. Relative paths resolve against an empty temporary folder.
import Foundation
import TxGateCore

let folder: String = {
    let f = NSTemporaryDirectory() + "txgate-fuzz-config-\(getpid())"
    try? FileManager.default.createDirectory(atPath: f, withIntermediateDirectories: true)
    return f
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzConfig(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Data(bytes: data, count: size)
    do {
        let config = try ConfigLoader.decode(bytes, folder: folder)
        _ = String(describing: config).count
    } catch {
        if error.errors.isEmpty { fatalError("invariant: ConfigErrors without an error") }
        for e in error.errors where e.message.isEmpty { fatalError("invariant: an error without a message at \(e.path)") }
    }
    return 0
}

// SwiftPM links an executable target with `main` renamed to `fuzz_config_main`; hand it to libFuzzer's driver.
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
                         _ test: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt) -> CInt

@_cdecl("fuzz_config_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var argc = argc, argv = argv
    return LLVMFuzzerRunDriver(&argc, &argv, fuzzConfig)
}
