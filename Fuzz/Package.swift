// swift-tools-version:6.0
// libFuzzer targets for TxGate's parsers (issue 11, "Fuzzing"). Kept out of the root package so
// that a plain `swift build` never links executables that have no main of their own.
// Build: swift build -c release -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library
// Run:   make fuzz (from the repository root); see README.md.
import Foundation
import PackageDescription

// A path dependency's identity is its folder's name (the repository may be cloned under any name).
let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
let rootID = root.lastPathComponent.lowercased()

func fuzzTarget(_ name: String, _ deps: [String]) -> Target {
    .executableTarget(name: name, dependencies: ["FuzzSupport"] + deps.map { .product(name: $0, package: rootID) },
                      swiftSettings: [.swiftLanguageMode(.v6)])
}

let package = Package(
    name: "TxGateFuzz",
    platforms: [.macOS(.v13)],
    dependencies: [.package(path: root.path)],
    targets: [
        .target(name: "FuzzSupport", swiftSettings: [.swiftLanguageMode(.v6)]),
        fuzzTarget("fuzz-request-head", ["HTTPCore"]),
        fuzzTarget("fuzz-response-head", ["HTTPCore"]),
        fuzzTarget("fuzz-chunked", ["EventHTTP", "HTTPCore"]),
        fuzzTarget("fuzz-json", ["TxGateCore"]),
        fuzzTarget("fuzz-advice", ["TxGateCore", "TxGateCrypto"]),
        fuzzTarget("fuzz-path", ["TxGateCore"]),
        fuzzTarget("fuzz-form", ["TxGateCore"]),
        fuzzTarget("fuzz-config", ["TxGateCore"]),
        fuzzTarget("fuzz-cbor", ["TxGateCore"]),
        fuzzTarget("fuzz-webauthn-outcome", ["TxGateCore", "TxGateCrypto"]),
    ]
)
