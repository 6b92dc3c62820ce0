import EventHTTP
import Foundation
import TestSupport
@testable import demo_bank

/// demo-bank's bank (`Bank`: transfers and their sequence, Idempotency-Key, /echo, /accounts),
/// served on its own loop in the test process, as `demo-bank --listen` serves it: the backend
/// of `GatewayForm`'s gateways, without a process to spawn.
final class InProcessBank: Sendable {
    private let server: LoopServer

    init() throws {
        // Built on the server's loop by its first request (a Bank belongs to one loop).
        final class Lazy { var bank: Bank? }
        let lazy = Lazy()
        server = try LoopServer(limits: ServerLimits(maxBodyBytes: 64 << 20, maxConnectionsPerClient: 0)) { exchange in
            let bank = lazy.bank ?? Bank(loop: exchange.loop)
            lazy.bank = bank
            // As demo-bank: the bank answers once the body is complete.
            exchange.whenBodyComplete { complete in if complete { bank.handle(exchange) } }
        }
    }

    var url: String { "http://127.0.0.1:\(server.port)" }

    func stop() { server.stop() }
}
