import EventHTTP
import Foundation
import HTTPCore
import Synchronization
import Testing
import TestSupport

/// The upstream pool's reuse rules (issue 22 item 1): a request that may not be sent twice
/// never goes out on a kept-alive connection the upstream has already closed.
@Suite struct UpstreamPoolTests {
    /// Runs `body` on a fresh loop's thread with a pool to `port`; `body` calls `done` with
    /// what it found, once.
    static func onLoop<T: Sendable>(port: Int, idleTimeoutMs: Int = 10_000, maxIdle: Int = 8,
                                    _ body: @escaping (UpstreamPool, @escaping (T) -> Void) -> Void) throws -> T {
        let loop = EventLoop()
        let endpoint = UpstreamEndpoint(address: try SocketAddress(host: "127.0.0.1", port: port), tls: nil, tlsHost: "127.0.0.1",
                                        connectTimeoutMs: 1000, responseTimeoutMs: 2000, maxIdle: maxIdle, idleTimeoutMs: idleTimeoutMs)
        let result = Mutex<T?>(nil)
        let finished = DispatchSemaphore(value: 0)
        Thread { loop.run(); finished.signal() }.start()
        loop.execute {
            let pool = UpstreamPool(loop: loop, endpoint: endpoint)
            body(pool) { value in
                result.withLock { $0 = value }
                pool.closeIdle()
                loop.stop()
            }
        }
        guard finished.wait(timeout: .now() + 10) == .success else { throw HarnessError("the loop did not finish") }
        return try #require(result.withLock { $0 })
    }

    static func request(_ method: String) -> UpstreamRequest {
        var h = HTTPHeaders()
        h.add("Host", "upstream")
        return UpstreamRequest(method: method, target: "/", headers: h, body: nil)
    }

    @Test func aPostNeverGoesOnAConnectionTheUpstreamClosedWhileTheLoopWasBusy() throws {
        // The upstream closes a connection idle for 100 ms.
        let server = try LoopServer(limits: ServerLimits(idleTimeoutMs: 100)) { ex in
            ex.respond(status: 200, body: Array("\(ex.connectionId)".utf8))
        }
        defer { server.stop() }
        let answers: [String] = try Self.onLoop(port: server.port) { pool, done in
            BufferedCall.send(Self.request("GET"), on: pool, deadlineMs: 2000) { first in
                // The loop is busy (blocked) while the upstream closes the idle connection: its
                // end-of-file waits in the kernel, undelivered, when the POST is dispatched.
                Thread.sleep(forTimeInterval: 0.4)
                BufferedCall.send(Self.request("POST"), on: pool, deadlineMs: 2000) { second in
                    func text(_ r: Result<BufferedResponse, UpstreamFailure>) -> String {
                        switch r {
                        case .success(let resp): return "\(resp.head.status) " + String(decoding: resp.body, as: UTF8.self)
                        case .failure(let f): return "failed: \(f)"
                        }
                    }
                    done([text(first), text(second)])
                }
            }
        }
        #expect(answers.count == 2)
        #expect(answers[0].hasPrefix("200 "), "\(answers)")
        #expect(answers[1].hasPrefix("200 "), "the POST went on the closed connection: \(answers)")
        #expect(answers[0] != answers[1], "the POST was answered on the closed connection: \(answers)")
    }

    /// On an idle kept-alive connection a request's head goes out with one `send` (no output
    /// buffer); a head the socket takes only in part has its rest, and then the body, follow
    /// in order.
    @Test func aHeadTheSocketTakesInPartsArrivesWholeAndBeforeItsBody() throws {
        let server = try LoopServer(limits: ServerLimits(maxHeaderBytes: 32 << 20, maxBodyBytes: 8 << 20)) { ex in
            ex.whenBodyComplete { complete in
                let big = ex.head.headers.first("X-Big") ?? ""
                let body = ex.body.bytes
                let intact = big.utf8.allSatisfy { $0 == 0x61 } && body.indices.allSatisfy { body[$0] == UInt8($0 % 251) }
                ex.respond(status: complete ? 200 : 400, body: Array("\(ex.connectionId) \(big.utf8.count) \(body.count) \(intact)".utf8))
            }
        }
        defer { server.stop() }
        // 6 MB: more than a Linux socket's send buffer grows to (net.ipv4.tcp_wmem, 4 MB).
        var post = Self.request("POST")
        post.headers.add("X-Big", String(repeating: "a", count: 6 << 20))
        post.body = Body((0..<(1 << 20)).map { UInt8($0 % 251) })
        let answers: [String] = try Self.onLoop(port: server.port) { pool, done in
            func text(_ r: Result<BufferedResponse, UpstreamFailure>) -> String {
                switch r {
                case .success(let resp): return "\(resp.head.status) " + String(decoding: resp.body, as: UTF8.self)
                case .failure(let f): return "failed: \(f)"
                }
            }
            BufferedCall.send(Self.request("GET"), on: pool, deadlineMs: 5000) { first in
                BufferedCall.send(post, on: pool, deadlineMs: 5000) { second in
                    BufferedCall.send(Self.request("GET"), on: pool, deadlineMs: 5000) { third in
                        done([text(first), text(second), text(third)])
                    }
                }
            }
        }
        let connection = answers[0].split(separator: " ").dropFirst().first.map(String.init) ?? "?"
        #expect(answers == ["200 \(connection) 0 0 true", "200 \(connection) \(6 << 20) \(1 << 20) true",
                            "200 \(connection) 0 0 true"])
    }

    static func text(_ r: Result<BufferedResponse, UpstreamFailure>) -> String {
        switch r {
        case .success(let resp): return "\(resp.head.status) " + String(decoding: resp.body, as: UTF8.self)
        case .failure(let f): return "failed: \(f)"
        }
    }

    /// A response that arrives whole into an empty input is parsed from the loop's read buffer
    /// and its `Content-Length` body handed on from there; every other shape goes through the
    /// input. Each reads as it always did, and bytes beyond a response keep its connection
    /// from being reused (the next request then gets its own answer on a new one).
    @Test(arguments: [
        ("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", "GET", "200 hello"),
        ("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "GET", "200 ok"),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", "GET", "200 hello"),
        ("HTTP/1.1 204 No Content\r\n\r\n", "GET", "204 "),
        ("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", "HEAD", "200 "),
        ("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloEXTRA", "GET", "200 hello"),
        ("HTTP/1.1 204 No Content\r\n\r\nEXTRA", "GET", "204 "),
        ("HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\nhello", "GET", "failed"),
    ])
    func responsesReadWholeReadAsThroughTheInput(response: String, method: String, expected: String) throws {
        let upstream = try RawUpstream(responses: [Array(response.utf8), Array("HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond".utf8)])
        defer { upstream.stop() }
        let answers: [String] = try Self.onLoop(port: upstream.port) { pool, done in
            BufferedCall.send(Self.request(method), on: pool, deadlineMs: 2000) { first in
                BufferedCall.send(Self.request("GET"), on: pool, deadlineMs: 2000) { second in
                    done([Self.text(first), Self.text(second)])
                }
            }
        }
        #expect(answers[0].hasPrefix(expected), "\(answers)")
        #expect(answers[1] == "200 second", "\(answers)")
        // Reused only after a response that ended exactly where its bytes did.
        let clean = !response.hasSuffix("EXTRA") && expected != "failed"
        #expect(upstream.connectionCount == (clean ? 1 : 2), "\(upstream.connectionCount) connections")
    }

    /// A head and the start of its body read whole, the rest later: the start goes on from the
    /// read buffer, the rest through the input, in order.
    @Test func aBodyWhoseStartCameWithItsHeadEndsThroughTheInput() throws {
        final class Timers: @unchecked Sendable { var held: [LoopTimer] = [] }  // touched on the loop only
        let timers = Timers()
        let server = try LoopServer(limits: ServerLimits()) { ex in
            ex.startResponse(status: 200, headers: HTTPHeaders(), framing: .contentLength(10))
            ex.writeBody(Body(Array("hello".utf8)))
            let timer = LoopTimer(loop: ex.loop) {
                ex.writeBody(Body(Array("world".utf8)))
                ex.finish()
            }
            timers.held.append(timer)
            timer.schedule(afterMs: 100)
        }
        defer { server.stop() }
        let answers: [String] = try Self.onLoop(port: server.port) { pool, done in
            BufferedCall.send(Self.request("GET"), on: pool, deadlineMs: 2000) { first in
                BufferedCall.send(Self.request("GET"), on: pool, deadlineMs: 2000) { second in
                    done([Self.text(first), Self.text(second)])
                }
            }
        }
        #expect(answers == ["200 helloworld", "200 helloworld"])
    }

    @Test func aConnectionIdleLongerThanTheIdleTimeoutIsNotReused() throws {
        let server = try LoopServer(limits: ServerLimits()) { ex in ex.respond(status: 200, body: Array("\(ex.connectionId)".utf8)) }
        defer { server.stop() }
        let ids: [String] = try Self.onLoop(port: server.port, idleTimeoutMs: 150) { pool, done in
            var seen: [String] = []
            func next(_ left: Int, pause: Double) {
                BufferedCall.send(Self.request("GET"), on: pool, deadlineMs: 2000) { r in
                    seen.append((try? r.get()).map { String(decoding: $0.body, as: UTF8.self) } ?? "failed")
                    guard left > 1 else { done(seen); return }
                    Thread.sleep(forTimeInterval: pause)
                    next(left - 1, pause: 0.3)
                }
            }
            next(3, pause: 0)
        }
        // The second reuses the first's connection at once; the third follows a 300 ms idle wait.
        #expect(ids.count == 3 && !ids.contains("failed"), "\(ids)")
        #expect(ids[0] == ids[1], "\(ids)")
        #expect(ids[2] != ids[1], "\(ids)")
    }

    /// Issue 29: with more requests in flight than `maxIdle`, a connection that finishes one goes
    /// back to the pool for the next, instead of closing while another opens (before: 8 + 4 × 6
    /// connections for five waves of eight with `maxIdle` 2).
    @Test func aSteadyLoadAboveMaxIdleReusesItsConnections() throws {
        // Each answer takes 30 ms: the eight requests of a wave are in flight together.
        let server = try LoopServer(limits: ServerLimits()) { ex in
            var timer: LoopTimer?
            timer = LoopTimer(loop: ex.loop) {
                ex.respond(status: 200, body: Array("\(ex.connectionId)".utf8))
                timer = nil
            }
            timer?.schedule(afterMs: 30)
        }
        defer { server.stop() }
        let (opened, kept): (Int, Int) = try Self.onLoop(port: server.port, maxIdle: 2) { pool, done in
            var opened = 0
            pool.onDispatch = { reused in if !reused { opened += 1 } }
            func wave(_ left: Int) {
                var answered = 0
                for _ in 0..<8 {
                    BufferedCall.send(Self.request("GET"), on: pool, deadlineMs: 2000) { _ in
                        answered += 1
                        guard answered == 8 else { return }
                        if left > 1 { wave(left - 1) } else { done((opened, pool.idleCount)) }
                    }
                }
            }
            wave(5)
        }
        #expect(opened <= 10, "\(opened) connections opened for five waves of eight")
        #expect(kept == 8, "all eight stay for the next wave")
    }
}
