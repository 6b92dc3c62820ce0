// swift-tools-version:6.0
import PackageDescription

// The git commit baked into the binaries (`txgate --version`, the start-up log, /-/health).
// `make build` sets TXGATE_COMMIT from git; a plain `swift build` says "unknown".
// Only ASCII letters, digits and "-._" are kept, so the value is always a safe C string literal.
let buildCommit: String = {
    let raw = Context.environment["TXGATE_COMMIT"] ?? ""
    let kept = String(raw.filter { $0.isASCII && ($0.isLetter || $0.isNumber || "-._".contains($0)) }.prefix(64))
    return kept.isEmpty ? "unknown" : kept
}()

// EventHTTP, HTTPCore and TxGate (the request phases), the per-request layers, are built for
// release without the run-time exclusivity checks (bench/RESULTS.md: ~1.6k and ~0.8k
// instructions per proxied request). The compile-time checks stay; debug builds (the test
// suite) and the fuzz targets (scripts/fuzz.sh sets TXGATE_EXCLUSIVITY_CHECKS=1) keep the
// run-time ones. SwiftPM accepts
// unsafe flags in a root, local or branch/revision dependency (docs/CLIENT.md's form), not in
// one pinned to a version; the TxGateClient product depends on none of these targets.
let hotPathSettings: [SwiftSetting] = Context.environment["TXGATE_EXCLUSIVITY_CHECKS"] == "1"
    ? [] : [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]

let package = Package(
    name: "TxGate",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "txgate", targets: ["txgate"]),
        .executable(name: "demo-bank", targets: ["demo-bank"]),
        // Libraries for the fuzz package (Fuzz/Package.swift), which depends on this one by path.
        .library(name: "HTTPCore", targets: ["HTTPCore"]),
        .library(name: "EventHTTP", targets: ["EventHTTP"]),
        .library(name: "TxGateCrypto", targets: ["TxGateCrypto"]),
        .library(name: "TxGateCore", targets: ["TxGateCore"]),
        .library(name: "TxGateWire", targets: ["TxGateWire"]),
        // The client: journeys, resume, step-up and retry over URLSession (docs/CLIENT.md).
        .library(name: "TxGateClient", targets: ["TxGateClient"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.11.0"),  // LogHandler.log(event:)
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // `make docs`: the DocC archive of TxGateClient (a command plugin: nothing of it is built
        // or linked by `swift build`, only by `swift package generate-documentation`).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // C libraries: module maps and shims only.
        .systemLibrary(name: "CLibevent", pkgConfig: "libevent", providers: [.apt(["libevent-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        // No pkgConfig: hiredis.pc adds -D_FILE_OFFSET_BITS=64, which SwiftPM refuses in a package
        // ("prohibited flag") and which changes nothing on the 64-bit systems TxGate builds for
        // (off_t is already 64 bits). Its other flag, -I/usr/include/hiredis, is not needed: the
        // shim includes <hiredis/...>, and the module map links the library.
        .systemLibrary(name: "CHiredis", providers: [.apt(["libhiredis-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        // The gateway's memory allocator (the txgate executable only): Debian's libmimalloc
        // exports malloc and free, and linked into the executable it serves every allocation of
        // every library in the process (the Swift runtime, libevent, SQLite, hiredis, OpenSSL).
        .systemLibrary(name: "CMimalloc", providers: [.apt(["libmimalloc-dev"])]),

        // The one thin layer over libevent: loops, HTTP/1.1 server and upstream client, TLS.
        // HTTP/1.1 message model and parsing, pure Swift (no sockets), shared by every layer.
        .target(name: "HTTPCore", swiftSettings: hotPathSettings),
        .target(name: "EventHTTP", dependencies: ["CLibevent", "COpenSSL", "HTTPCore"], swiftSettings: hotPathSettings),
        // Cryptographic building blocks over OpenSSL (hashes, HMAC, scrypt, CSPRNG, base64/base32).
        .target(name: "TxGateCrypto", dependencies: ["COpenSSL"]),
        // The git commit of the build, as a C string (C macros carry values; Swift defines do not).
        .target(name: "CTxGateBuildInfo", cSettings: [.define("TXGATE_COMMIT", to: "\"\(buildCommit)\"")]),
        // The calling thread: the CPUs it may run on, pinning it to one, its name (GNU extensions
        // Swift cannot call): the default worker count, `cpuAffinity`, threads named for `top -H`.
        .target(name: "CTxGateThread"),
        // The wire codecs both sides use (advices, callbacks, JSON, query and text escaping): pure
        // Swift on Foundation, no OpenSSL, so that the client library can share them.
        .target(name: "TxGateWire", dependencies: ["HTTPCore"]),
        // The client library: Foundation's URLSession and the wire codecs, nothing of the server.
        .target(name: "TxGateClient", dependencies: ["TxGateWire"]),
        // Pure domain logic: configuration, header rules, error bodies. No I/O.
        .target(name: "TxGateCore", dependencies: [
            "TxGateWire", "HTTPCore", "TxGateCrypto", "CTxGateBuildInfo", "CTxGateThread", .product(name: "Logging", package: "swift-log"),
        ]),
        // The embedded default store: the Store protocol on one SQLite file.
        .target(name: "TxGateStore", dependencies: ["TxGateCore", "CSQLite"]),
        // The cluster store: the Store protocol on Redis, through hiredis on each worker's libevent loop.
        .target(name: "TxGateRedis", dependencies: [
            "CHiredis", "EventHTTP", "TxGateCore", "TxGateCrypto", .product(name: "Logging", package: "swift-log"),
        ]),
        // Email delivery behind one interface: SMTP (libcurl, on its own threads) or an outbox folder.
        .target(name: "TxGateEmail", dependencies: ["CCurl", "TxGateCore"]),
        // The gateway: request phases wired onto EventHTTP.
        .target(name: "TxGate", dependencies: [
            "EventHTTP", "TxGateCore", "TxGateCrypto", "TxGateStore", "TxGateRedis", "TxGateEmail",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "Metrics", package: "swift-metrics"),
            .product(name: "Prometheus", package: "swift-prometheus"),
        ], swiftSettings: hotPathSettings),
        .executableTarget(name: "txgate", dependencies: [
            "TxGate", "TxGateCore", "HTTPCore", "TxGateClient", "CMimalloc", .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        .executableTarget(name: "demo-bank", dependencies: [
            "EventHTTP", "TxGateCore", "TxGateCrypto", .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),

        // A store alone under the step-up cycle's calls (`bench/store.sh`), on the gateway's allocator.
        .executableTarget(name: "store-bench", dependencies: [
            "TxGateStore", "TxGateRedis", "TxGateCore", "EventHTTP", "CMimalloc", .product(name: "Logging", package: "swift-log"),
        ], path: "bench/store-bench"),

        // Helpers every test target shares: ports, temp folders, spawned processes, a raw HTTP
        // client, redis-server and SMTP sinks, a test executor, polling, a manual clock; the
        // spawned gateway (Testbed) and the journeys and transactions as SDKs run them
        // (TransactionKit), over either form of gateway (GatewayUnderTest).
        .target(name: "TestSupport", dependencies: ["TxGateCore", "TxGateCrypto", "EventHTTP"], path: "Tests/TestSupport"),
        // TxGate too: the configuration tests read real files (`DiskConfigFiles`) and check the
        // reload rules (`ConfigReload`).
        .testTarget(name: "TxGateCoreTests", dependencies: ["TxGateCore", "TxGate", "TxGateCrypto", "TestSupport"]),
        .testTarget(name: "TxGateClientTests", dependencies: ["TxGateClient", "TxGateWire"]),
        .testTarget(name: "HTTPCoreTests", dependencies: ["HTTPCore", "TestSupport"]),
        .testTarget(name: "EventHTTPTests", dependencies: ["EventHTTP", "TestSupport"]),
        // The gateway's phases and flows in process (`InProcessGateway`, in front of demo-bank's
        // bank, which it imports from the executable's module) and against the binary.
        .testTarget(name: "TxGateTests", dependencies: ["TxGate", "TxGateCore", "TxGateCrypto", "TxGateStore", "EventHTTP", "HTTPCore", "TestSupport", "demo-bank",
                                                        .product(name: "Logging", package: "swift-log")]),
        .testTarget(name: "TxGateCryptoTests", dependencies: ["TxGateCrypto", "TxGateCore", "TestSupport"]),
        .testTarget(name: "IntegrationTests", dependencies: ["TxGateCore", "TxGateClient", "TxGateCrypto", "TestSupport"], exclude: ["browser", "oauth"]),
        .testTarget(name: "TxGateStoreTests", dependencies: ["TxGateStore", "TxGateCore", "TestSupport"]),
        .testTarget(name: "TxGateRedisTests", dependencies: ["TxGateRedis", "EventHTTP", "TxGateCore", "TestSupport"]),
        .testTarget(name: "TxGateEmailTests", dependencies: ["TxGateEmail", "TxGateCore", "TestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
