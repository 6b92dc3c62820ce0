import EventHTTP
import Foundation
import HTTPCore
import Logging
import TxGateCore

/// The remote AM as one worker sees it: a keep-alive pool on the worker's loop (HTTPS verified
/// with `pdp.caFile`), the agent's session, and requests sent as the agent. The agent logs in
/// by running its journey, and again when the AM says its token is no longer valid. Confined to
/// the worker's loop.
final class AMClient {
    let config: PDPConfig
    let pool: UpstreamPool
    private let authority: String
    private let basePath: String
    private let cookieName: String
    private let login: AgentLogin
    private let logger: Logger
    private var agentToken: String?
    /// Requests waiting for the login in progress (one login at a time per worker), each with
    /// the timer of its own deadline.
    private var waiting: [Int: (then: (Result<String, PDPError>) -> Void, timer: LoopTimer)] = [:]
    private var nextWaiter = 0
    private var loggingIn = false
    /// The longest an agent login may take, whatever `timeoutMs` is.
    static let loginTimeoutMs = 10_000

    init(config: PDPConfig, endpoint: UpstreamEndpoint, loop: EventLoop, cookieName: String, password: String, logger: Logger) {
        self.config = config
        pool = UpstreamPool(loop: loop, endpoint: endpoint)
        let url = config.url!
        authority = url.authority
        basePath = url.basePath
        self.cookieName = cookieName
        login = AgentLogin(username: config.agent.username, password: password)
        self.logger = logger
    }

    /// The pool's endpoint for `pdp.url`: connect and response time bounded by `timeoutMs`.
    static func endpoint(_ config: PDPConfig) throws -> UpstreamEndpoint {
        guard let url = config.url else { throw SocketError("pdp.url is missing") }
        let tls: TLSContext?
        do {
            tls = url.isTLS ? try TLSContext.client(caFile: config.caFile) : nil
        } catch {
            throw SocketError("\(config.caFile == nil ? "pdp.url" : "pdp.caFile"): \(error)")
        }
        do {
            return UpstreamEndpoint(address: try SocketAddress(host: url.host, port: url.port), tls: tls, tlsHost: url.host,
                                    connectTimeoutMs: config.timeoutMs,
                                    // Each call's own deadline (`BufferedCall`) is what bounds it.
                                    responseTimeoutMs: max(config.timeoutMs, loginTimeoutMs), maxIdle: 32)
        } catch {
            throw SocketError("pdp.url: \(error)")
        }
    }

    /// A deadline: `timeoutMs` from when the request arrived.
    struct Deadline {
        let endNanos: UInt64
        init(from startNanos: UInt64, ms: Int) { endNanos = startNanos + UInt64(ms) * 1_000_000 }
        var remainingMs: Int { Int((Int64(endNanos) - Int64(EventLoop.nowNanos())) / 1_000_000) }
    }

    /// POSTs `body` to `{realm path}/{path}` as the agent; a 401 (the agent's token expired or
    /// was revoked) logs in again and retries once. `resendable`: the call changes nothing at
    /// the AM (it may go again on a new connection, `UpstreamRequest.resendable`).
    func postAsAgent(_ path: String, _ body: String, deadline: Deadline, resendable: Bool, retried: Bool = false,
                     _ done: @escaping (Result<BufferedResponse, PDPError>) -> Void) {
        withAgentToken(deadline) { [self] r in
            switch r {
            case .failure(let e): done(.failure(e))
            case .success(let token):
                post(AMWire.realmPath(config.realm) + path, body, token: token, deadline: deadline, resendable: resendable) { [self] r in
                    if case .success(let resp) = r, resp.head.status == 401, !retried {
                        if agentToken == token { agentToken = nil }
                        logger.info("pdp agent token refused, logging in again", metadata: ["pdp": .string(config.url!.description)])
                        postAsAgent(path, body, deadline: deadline, resendable: resendable, retried: true, done)
                    } else {
                        done(r)
                    }
                }
            }
        }
    }

    private func post(_ path: String, _ body: String, token: String?, deadline: Deadline, resendable: Bool = false,
                      _ done: @escaping (Result<BufferedResponse, PDPError>) -> Void) {
        let ms = deadline.remainingMs
        guard ms > 0 else { done(.failure(.remoteUnavailable("the AM did not answer within \(config.timeoutMs) ms"))); return }
        var h = HTTPHeaders()
        h.add("Host", authority)
        h.add("Content-Type", "application/json")
        h.add("Accept", "application/json")
        h.add("Accept-API-Version", "resource=2.0, protocol=1.0")
        if let token { h.add(cookieName, token) }
        let request = UpstreamRequest(method: "POST", target: basePath + path, headers: h, body: Body(Array(body.utf8)),
                                    resendable: resendable)
        BufferedCall.send(request, on: pool, deadlineMs: ms) { [config] r in
            switch r {
            case .success(let resp): done(.success(resp))
            case .failure(.responseTimeout):
                done(.failure(.remoteUnavailable("the AM did not answer within \(config.timeoutMs) ms")))
            case .failure(let f): done(.failure(.remoteUnavailable("the AM: \(f.description)")))
            }
        }
    }

    /// The agent's token; logs in first when there is none (concurrent callers share one
    /// login). The login has its own time (it may hash a password on the AM), so that a slow
    /// first login still ends with a token for later requests; each caller waits only until
    /// its own deadline.
    private func withAgentToken(_ deadline: Deadline, _ then: @escaping (Result<String, PDPError>) -> Void) {
        if let agentToken { then(.success(agentToken)); return }
        let id = nextWaiter
        nextWaiter += 1
        let timer = LoopTimer(loop: pool.loop) { [weak self, config] in
            guard let self, let w = waiting.removeValue(forKey: id) else { return }
            w.then(.failure(.remoteUnavailable("the agent's login at the AM did not finish within \(config.timeoutMs) ms")))
        }
        timer.schedule(afterMs: max(deadline.remainingMs, 0))
        waiting[id] = (then, timer)
        guard !loggingIn else { return }
        loggingIn = true
        let query = "?authIndexType=service&authIndexValue=" + Query.encode(config.agent.journey)
        let loginDeadline = Deadline(from: EventLoop.nowNanos(), ms: max(config.timeoutMs, Self.loginTimeoutMs))
        step(AMWire.realmPath(config.realm) + "/authenticate" + query, "", loginDeadline) { [self] r in
            loggingIn = false
            switch r {
            case .success(let t):
                agentToken = t
                logger.info("pdp agent logged in", metadata: ["agent": .string(config.agent.username), "pdp": .string(config.url!.description)])
            case .failure(let e):
                logger.error("pdp agent login failed", metadata: ["agent": .string(config.agent.username), "error": .string("\(e)")])
            }
            let all = waiting.values
            waiting.removeAll()
            for w in all {
                w.timer.cancel()
                w.then(r)
            }
        }
    }

    /// One step of the agent's journey; the next one goes to `authenticate` without the query.
    private func step(_ path: String, _ body: String, _ deadline: Deadline, _ done: @escaping (Result<String, PDPError>) -> Void) {
        post(path, body, token: nil, deadline: deadline) { [self] r in
            switch r {
            case .failure(let e): done(.failure(e))
            case .success(let resp):
                switch login.next(status: resp.head.status, body: resp.body) {
                case .loggedIn(let token): done(.success(token))
                case .refused(let why): done(.failure(.remoteUnavailable("the agent cannot log in: \(why)")))
                case .answer(let next): step(AMWire.realmPath(config.realm) + "/authenticate", next, deadline, done)
                }
            }
        }
    }
}

/// What every worker's `AMClient` shares: the AM's endpoint (its TLS context built once) and the
/// agent's password, read from `pdp.agent.passwordFile` at start-up (never logged).
struct RemotePDPSettings: Sendable {
    let endpoint: UpstreamEndpoint
    let agentPassword: String

    init?(_ config: PDPConfig, logger: Logger) throws {
        guard config.type == .am, let url = config.url else { return nil }
        guard let data = FileManager.default.contents(atPath: config.agent.passwordFile) else {
            throw SocketError("pdp.agent.passwordFile: cannot read '\(config.agent.passwordFile)'")
        }
        agentPassword = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .newlines)
        endpoint = try AMClient.endpoint(config)
        logger.info("policy decisions from a remote AM", metadata: [
            "pdp": .string(url.description), "realm": .string(config.realm), "application": .string(config.application),
            "agent": .string(config.agent.username), "timeout_ms": .stringConvertible(config.timeoutMs),
            "am_uri": .string(config.amURI ?? ""), "ca_file": .string(config.caFile ?? "system"),
        ])
    }
}
