import Dispatch
import Foundation

/// Many requests released at the same moment, to race the gateway against itself.
public enum Burst {
    /// What a burst gave back.
    public struct Outcome: Sendable {
        /// Every request finished within the time allowed.
        public let finished: Bool
        /// The results of the requests that finished, in request order.
        public let results: [Result<HTTPResponse, Error>]
    }

    /// `n` requests, each on a connection of its own opened beforehand by `connect` on its own
    /// thread, then sent by `request` all at once; waits up to `within` seconds for them.
    public static func simultaneous(_ n: Int, within: Double,
                                    connect: @escaping @Sendable (Int) throws -> RawHTTPClient,
                                    request: @escaping @Sendable (Int, RawHTTPClient) throws -> HTTPResponse) -> Outcome {
        let slots = Slots(n)
        let ready = DispatchGroup()
        let go = DispatchSemaphore(value: 0)
        let finished = DispatchGroup()
        for i in 0..<n {
            ready.enter()
            finished.enter()
            Thread {
                defer { finished.leave() }
                let client: RawHTTPClient
                do {
                    client = try connect(i)
                } catch {
                    ready.leave()
                    slots.set(i, .failure(error))
                    return
                }
                defer { client.close() }
                ready.leave()
                go.wait()
                slots.set(i, Result { try request(i, client) })
            }.start()
        }
        ready.wait()
        for _ in 0..<n { go.signal() }
        let done = finished.wait(timeout: .now() + within) == .success
        return Outcome(finished: done, results: slots.all.compactMap { $0 })
    }

    /// One result slot per request.
    private final class Slots: @unchecked Sendable {
        // @unchecked: `items` is only touched under `lock`.
        private let lock = NSLock()
        private var items: [Result<HTTPResponse, Error>?]
        init(_ n: Int) { items = Array(repeating: nil, count: n) }
        func set(_ i: Int, _ r: Result<HTTPResponse, Error>) { lock.withLock { items[i] = r } }
        var all: [Result<HTTPResponse, Error>?] { lock.withLock { items } }
    }
}
