// swift-tools-version:6.0
import PackageDescription

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
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
    ],
    targets: [
        // C libraries: module maps and shims only.
        .systemLibrary(name: "CLibevent", pkgConfig: "libevent", providers: [.apt(["libevent-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CHiredis", pkgConfig: "hiredis", providers: [.apt(["libhiredis-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),

        // The one thin layer over libevent: loops, HTTP/1.1 server and upstream client, TLS.
        // HTTP/1.1 message model and parsing, pure Swift (no sockets), shared by every layer.
        .target(name: "HTTPCore", swiftSettings: [.swiftLanguageMode(.v6)]),
        .target(name: "EventHTTP", dependencies: ["CLibevent", "COpenSSL", "HTTPCore"], swiftSettings: [.swiftLanguageMode(.v6)]),
        // Cryptographic building blocks over OpenSSL (hashes, HMAC, scrypt, CSPRNG, base64/base32).
        .target(name: "TxGateCrypto", dependencies: ["COpenSSL"], swiftSettings: [.swiftLanguageMode(.v6)]),
        // Pure domain logic: configuration, header rules, error bodies. No I/O.
        .target(name: "TxGateCore", dependencies: [
            "HTTPCore", "TxGateCrypto", .product(name: "Logging", package: "swift-log"),
        ], swiftSettings: [.swiftLanguageMode(.v6)]),
        // The embedded default store: the Store protocol on one SQLite file.
        .target(name: "TxGateStore", dependencies: ["TxGateCore", "CSQLite"], swiftSettings: [.swiftLanguageMode(.v6)]),
        // The cluster store: the Store protocol on Redis, through hiredis on each worker's libevent loop.
        .target(name: "TxGateRedis", dependencies: [
            "CHiredis", "EventHTTP", "TxGateCore", .product(name: "Logging", package: "swift-log"),
        ], swiftSettings: [.swiftLanguageMode(.v6)]),
        // Email delivery behind one interface: SMTP (libcurl, on its own threads) or an outbox folder.
        .target(name: "TxGateEmail", dependencies: ["CCurl", "TxGateCore"], swiftSettings: [.swiftLanguageMode(.v6)]),
        // The gateway: request phases wired onto EventHTTP.
        .target(name: "TxGate", dependencies: [
            "EventHTTP", "TxGateCore", "TxGateCrypto", "TxGateStore", "TxGateRedis", "TxGateEmail",
            .product(name: "Logging", package: "swift-log"),
        ]),
        .executableTarget(name: "txgate", dependencies: [
            "TxGate", "TxGateCore", .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        .executableTarget(name: "demo-bank", dependencies: [
            "EventHTTP", "TxGateCore", "TxGateCrypto", .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ], swiftSettings: [.swiftLanguageMode(.v6)]),

        // Helpers every test target shares: ports, temp folders, spawned processes, a raw HTTP
        // client, redis-server and SMTP sinks, a test executor, polling.
        .target(name: "TestSupport", dependencies: ["TxGateCore"], path: "Tests/TestSupport",
                swiftSettings: [.swiftLanguageMode(.v6)]),
        .testTarget(name: "TxGateCoreTests", dependencies: ["TxGateCore", "TxGateCrypto", "TestSupport"],
                    swiftSettings: [.swiftLanguageMode(.v6)]),
        .testTarget(name: "HTTPCoreTests", dependencies: ["HTTPCore", "TestSupport"],
                    swiftSettings: [.swiftLanguageMode(.v6)]),
        .testTarget(name: "TxGateCryptoTests", dependencies: ["TxGateCrypto", "TxGateCore", "TestSupport"],
                    swiftSettings: [.swiftLanguageMode(.v6)]),
        .testTarget(name: "IntegrationTests", dependencies: ["TxGateCore", "TxGateCrypto", "TestSupport"], exclude: ["browser"],
                    swiftSettings: [.swiftLanguageMode(.v6)]),
        .testTarget(name: "TxGateStoreTests", dependencies: ["TxGateStore", "TxGateCore", "TestSupport"],
                    swiftSettings: [.swiftLanguageMode(.v6)]),
        .testTarget(name: "TxGateRedisTests", dependencies: ["TxGateRedis", "EventHTTP", "TxGateCore", "TestSupport"],
                    swiftSettings: [.swiftLanguageMode(.v6)]),
        .testTarget(name: "TxGateEmailTests", dependencies: ["TxGateEmail", "TxGateCore", "TestSupport"],
                    swiftSettings: [.swiftLanguageMode(.v6)]),
    ],
    swiftLanguageModes: [.v5]
)
