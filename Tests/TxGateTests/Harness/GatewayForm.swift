import Foundation
import Testing
import TestSupport

/// Where a test body's gateway runs (HummingbirdTesting's `.router`/`.live`): the same body,
/// written against `GatewayUnderTest`, runs against either, as a parameterized test:
///
///     @Test(arguments: GatewayForm.allCases)
///     func aFlow(_ form: GatewayForm) throws {
///         let g = try form.start(TransactionKit.config())
///         defer { g.stop() }
///         ...
///     }
///
/// Both put the gateway in front of demo-bank's bank, run in this process (`InProcessBank`).
enum GatewayForm: String, CaseIterable, Sendable, CustomTestStringConvertible {
    /// `Gateway` in the test process (`InProcessGateway`), on a `ManualClock`.
    case inProcess
    /// `txgate serve`, spawned from TXGATE_BIN_DIR (`Testbed`).
    case live

    var testDescription: String { rawValue }

    /// For a test that moves the clock: in process, where that is instant. Against the live
    /// binary too with TXGATE_LIVE_CLOCK=1, where `advance` sleeps (seconds per test): to check
    /// that the in-process form still tells the truth about the binary.
    static var withClock: [GatewayForm] {
        ProcessInfo.processInfo.environment["TXGATE_LIVE_CLOCK"] == "1" ? allCases : [.inProcess]
    }

    /// Starts the bank, then the gateway in front of it with the configuration the integration
    /// tests start from (`Testbed.gatewayConfig`: one worker, the access log on) merged with
    /// `overrides`.
    func start(_ overrides: [String: Any] = [:]) throws -> TestGateway {
        try start(configForURL: { _ in overrides })
    }

    /// As `start`, with overrides that may name the gateway's own URL (`publicUrl`, which links
    /// and login redirects are built from): `overrides` gets `http://127.0.0.1:<port>`.
    func start(configForURL overrides: (String) -> [String: Any]) throws -> TestGateway {
        let bank = try InProcessBank()
        let config = { (port: Int) in
            Testbed.gatewayConfig(port: port, upstream: bank.url, overrides: overrides("http://127.0.0.1:\(port)"))
        }
        do {
            switch self {
            case .inProcess:
                let g = try InProcessGateway(config: config)
                return TestGateway(g, dir: g.dir.url, bank: bank) { g.stop() }
            case .live:
                let bed = try Testbed()
                do {
                    let g = try bed.startGateway(config: config)
                    return TestGateway(g, dir: bed.dir.url, bank: bank) { bed.cleanup() }
                } catch {
                    bed.cleanup()
                    throw error
                }
            }
        } catch {
            bank.stop()
            throw error
        }
    }
}

/// A started gateway of either form, with its bank; `stop()` (or the last reference going)
/// ends both.
final class TestGateway: GatewayUnderTest, @unchecked Sendable {
    // @unchecked: `inner`, `dir` and `bank` are immutable; `stopInner` is only run once, under `lock`.
    let inner: any GatewayUnderTest
    /// The gateway's folder: its configuration and what relative paths in it name (the outbox).
    let dir: URL
    let bank: InProcessBank
    private let lock = NSLock()
    private var stopInner: (() -> Void)?

    init(_ inner: any GatewayUnderTest, dir: URL, bank: InProcessBank, stop: @escaping () -> Void) {
        self.inner = inner
        self.dir = dir
        self.bank = bank
        stopInner = stop
    }

    deinit { stop() }

    var port: Int { inner.port }
    var logText: String { inner.logText }
    var nowS: Int { inner.nowS }
    func advance(seconds: Double) { inner.advance(seconds: seconds) }

    func stop() {
        let s = lock.withLock {
            defer { stopInner = nil }
            return stopInner
        }
        guard let s else { return }
        s()
        bank.stop()
    }
}
