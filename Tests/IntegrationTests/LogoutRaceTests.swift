import Foundation
import Testing
import TxGateCore
import TestSupport

/// Issue 23 item 5: a logout is immediate on the instance that answered it, on every worker.
/// With two workers on one Redis, a session read in flight on one worker when the other
/// answered the logout must not put the session back in the process's session cache: no
/// request sent after the logout's response is let through. Looped, because it is a race.
@Suite(.testbed) struct LogoutRaceTests {
    /// The answer of `body`, run on a thread of its own.
    final class Pending<T>: @unchecked Sendable {
        // @unchecked: `result` is written once before `done` is signalled, read after.
        private var result: Result<T, Error>?
        private let done = DispatchSemaphore(value: 0)
        init(_ body: @escaping @Sendable () throws -> T) {
            Thread { [self] in result = Result { try body() }; done.signal() }.start()
        }
        func wait() throws -> T {
            guard done.wait(timeout: .now() + 15) == .success, let result else { throw HarnessError("no answer within 15 s") }
            return try result.get()
        }
    }

    typealias Kit = TransactionKit

    /// One connection per thread, kept alive (so each stays on the worker that accepted it),
    /// each sending `GET /accounts` with the session as fast as it is answered.
    final class Hammer: @unchecked Sendable {
        // @unchecked: `running` and `samples` are only touched under `lock`.
        struct Sample { let start: Double; let status: Int }
        private let lock = NSLock()
        private var running = true
        private var samples: [Sample] = []
        private let finished = DispatchGroup()

        init(port: Int, token: String, connections: Int) {
            for _ in 0..<connections {
                finished.enter()
                Thread { [self] in
                    defer { finished.leave() }
                    guard let client = try? RawHTTPClient(port: port, timeout: 5) else { record(Timing.now(), 0); return }
                    defer { client.close() }
                    while isRunning {
                        let start = Timing.now()
                        let status = (try? client.request("GET", "/accounts", headers: [
                            ("iPlanetDirectoryPro", token), ("x-authenticate-response", "header"),
                        ]))?.status ?? 0
                        record(start, status)
                        if status == 0 { return }
                    }
                }.start()
            }
        }

        private func record(_ start: Double, _ status: Int) {
            lock.lock(); samples.append(Sample(start: start, status: status)); lock.unlock()
        }

        private var isRunning: Bool {
            lock.lock()
            defer { lock.unlock() }
            return running
        }

        func stop() -> [Sample] {
            lock.lock(); running = false; lock.unlock()
            _ = finished.wait(timeout: .now() + 10)
            lock.lock()
            defer { lock.unlock() }
            return samples
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func noRequestSentAfterALogoutsResponseIsLetThroughOnAnyWorker() throws {
        let bed = try Testbed.current
        let cluster = try Cluster(bed: bed, instances: 1) { _ in Kit.config() }
        let g = cluster[0]
        let rounds = 60
        var leaked: [String] = []
        var before = 0
        for round in 1...rounds {
            let token = try Kit.login(g)
            let hammer = Hammer(port: g.port, token: token, connections: 12)
            Timing.sleep(0.03)
            // Widens the race: Redis held still while the logout's DEL and the other worker's
            // reads (its cache was just cleared) queue up, then let go, so that some reads are
            // answered (with the live session) in the same instant as the DEL.
            cluster.redis.pause()
            let logout = Pending {
                try Kit.post(g, "/am/json/realms/root/sessions?_action=logout", nil, headers: [("iPlanetDirectoryPro", token)])
            }
            Timing.sleep(0.05)
            cluster.redis.resume()
            let out = try logout.wait()
            let loggedOut = Timing.now()
            #expect(out.status == 200, "round \(round): the logout:\n\(out)")
            Timing.sleep(0.15)
            let samples = hammer.stop()
            before += samples.filter { $0.start < loggedOut && $0.status == 200 }.count
            let after = samples.filter { $0.start > loggedOut }
            #expect(after.allSatisfy { $0.status != 0 }, "round \(round): a connection failed")
            let through = after.filter { $0.status == 200 }
            if let first = through.first {
                leaked.append("round \(round): \(through.count) of \(after.count) requests sent after the logout's response got 200, "
                    + "the first \(Int((first.start - loggedOut) * 1000)) ms after it")
            }
        }
        #expect(before > rounds, "the session was not in use when it was logged out (\(before) requests got 200 before)")
        #expect(leaked.isEmpty, "a logged-out session still opened /accounts:\n\(leaked.joined(separator: "\n"))")
    }
}
