// libFuzzer's entry, shared by every target. SwiftPM links an executable target with `main`
// renamed to `<module>_main`; each target exports that name and hands its test to `runFuzzer`.

@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
                         _ test: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt) -> CInt

/// Runs libFuzzer's driver (its options, corpus and crash handling) on `test`.
public func runFuzzer(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                      _ test: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt) -> CInt {
    var argc = argc, argv = argv
    return LLVMFuzzerRunDriver(&argc, &argv, test)
}
