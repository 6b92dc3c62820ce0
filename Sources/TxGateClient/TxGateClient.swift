import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TxGateWire

/// The client half of TxGate (and of AM with IG).
///
/// It runs journeys (AM's `/json/authenticate`), resumes suspended ones from an emailed link,
/// keeps the session in a ``TokenStore``, and sends requests that step up when the gateway asks
/// for it, retrying once with the approved TxId.
///
/// ```swift
/// let client = TxGateClient(configuration: ClientConfiguration(serverURL: URL(string: "https://gw.example.com")!),
///                           tokenStore: FileTokenStore(path: FileTokenStore.defaultPath))
/// ```
///
/// One client can be shared by several tasks; the journeys they run share its session.
public final class TxGateClient: Sendable {
    /// Where the client talks to, and how.
    public let configuration: ClientConfiguration
    /// Where the session token is kept.
    public let tokenStore: TokenStore
    let interceptors: [RequestInterceptor]
    let transport: Transport

    /// A client for the server `configuration` names.
    ///
    /// - Parameters:
    ///   - configuration: The server and how to talk to it.
    ///   - tokenStore: Where the session is kept; in memory by default.
    ///   - interceptors: What changes the journey and logout calls before they are sent, in order.
    public init(configuration: ClientConfiguration, tokenStore: TokenStore = MemoryTokenStore(),
                interceptors: [RequestInterceptor] = []) {
        self.configuration = configuration
        self.tokenStore = tokenStore
        self.interceptors = interceptors
        transport = Transport(timeout: configuration.timeout)
    }

    deinit { transport.invalidate() }

    /// The stored session token, if it belongs to this server.
    ///
    /// - Returns: The token, or nil when there is no session or it is another server's.
    /// - Throws: What the ``TokenStore`` threw.
    public func currentToken() throws -> String? {
        guard let s = try tokenStore.load(), let url = URL(string: s.server), configuration.isOwnOrigin(url) else { return nil }
        return s.tokenId
    }

    // MARK: Journeys

    /// Starts a journey by its name (`authIndexType=service`), e.g. to log in.
    ///
    /// - Parameter journey: The tree's name, e.g. `Login`.
    /// - Returns: The first step, or at once the journey's success or failure.
    /// - Throws: ``TxGateClientError/unexpectedResponse(status:_:)`` when the answer is not the
    ///   authentication service's, ``TxGateClientError/transport(_:)``, and what an interceptor threw.
    public func start(journey: String) async throws -> JourneyOutcome {
        try await start(type: "service", value: journey)
    }

    /// Starts the journey a step-up advice asks for (`authIndexType=composite_advice`, the
    /// advice as AM's XML), e.g. a transaction's approval.
    ///
    /// - Parameter advice: A challenge's `advices`.
    /// - Returns: The first step, or at once the journey's success or failure.
    /// - Throws: As ``start(journey:)`` does.
    public func start(advice: Advices) async throws -> JourneyOutcome {
        try await start(type: "composite_advice", value: advice.xml)
    }

    private func start(type: String, value: String) async throws -> JourneyOutcome {
        let url = try configuration.amURL("authenticate", query: [("authIndexType", type), ("authIndexValue", value)])
        let action = InterceptorAction(.startAuthenticate, payload: ["tree": value, "type": type])
        return try await authenticate(url, body: "", action: action, tree: value, treeType: type)
    }

    /// Sends a step back with its inputs filled in (no query parameters: all state is in its
    /// ``JourneyStep/authId``). A success saves the session token in the ``tokenStore``.
    ///
    /// - Parameter step: A step the server sent, with its callbacks answered.
    /// - Returns: The next step, or the journey's success or failure.
    /// - Throws: As ``start(journey:)`` does.
    public func next(_ step: JourneyStep) async throws -> JourneyOutcome {
        let action = InterceptorAction(.authenticate, payload: ["tree": step.tree, "type": step.treeType])
        return try await authenticate(try configuration.amURL("authenticate"), body: step.body, action: action,
                                      tree: step.tree, treeType: step.treeType)
    }

    /// Resumes a suspended journey from the emailed link.
    ///
    /// The link is checked before anything is sent: it must be an absolute http(s) URI on the
    /// configured server's scheme, host and port, and carry exactly one `suspendedId`.
    ///
    /// - Parameter resumeURI: The link from the email, as it is.
    /// - Returns: The journey's next step, success or failure.
    /// - Throws: ``TxGateClientError/invalidResumeURI(_:)`` for a link refused before sending,
    ///   ``TxGateClientError/suspendedSessionNotFound(_:)`` for an unknown, expired or used id,
    ///   and as ``start(journey:)`` does.
    public func resume(resumeURI: String) async throws -> JourneyOutcome {
        let id = try ResumeURI.suspendedId(resumeURI, server: configuration)
        let url = try configuration.amURL("authenticate", query: [("suspendedId", id)])
        let outcome = try await authenticate(url, body: "", action: InterceptorAction(.resumeAuthenticate), tree: "", treeType: "suspended")
        if case .failure(let f) = outcome, f.isSuspendedSessionNotFound { throw TxGateClientError.suspendedSessionNotFound(f) }
        return outcome
    }

    private func authenticate(_ url: URL, body: String, action: InterceptorAction, tree: String, treeType: String) async throws -> JourneyOutcome {
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue(configuration.acceptAPIVersion, forHTTPHeaderField: "Accept-API-Version")
        if let token = try currentToken() { request.setValue(token, forHTTPHeaderField: configuration.sessionHeader) }
        request.httpBody = Data(body.utf8)
        let response = try await perform(request, action: action)
        let outcome = try Self.outcome(response, tree: tree, treeType: treeType)
        if case .success(let s) = outcome {
            try tokenStore.save(StoredSession(server: Origin(configuration.serverURL).text, tokenId: s.tokenId,
                                              successUrl: s.successUrl, realm: s.realm))
        }
        return outcome
    }

    static func outcome(_ r: ClientResponse, tree: String, treeType: String) throws -> JourneyOutcome {
        guard let json = JSONValue.parse(Array(r.body)), json.objectValue != nil else {
            throw TxGateClientError.unexpectedResponse(status: r.status, "not JSON: \(r.bodyText.prefix(200))")
        }
        if r.status == 200, let token = json["tokenId"]?.stringValue {
            return .success(JourneySuccess(tokenId: token, successUrl: json["successUrl"]?.stringValue, realm: json["realm"]?.stringValue))
        }
        if r.status == 200, let authId = json["authId"]?.stringValue, let list = json["callbacks"]?.arrayValue {
            let callbacks = list.compactMap(JourneyCallback.init(json:))
            guard callbacks.count == list.count else { throw TxGateClientError.unexpectedResponse(status: 200, "a callback without a type") }
            return .step(JourneyStep(authId: authId, callbacks: callbacks, tree: tree, treeType: treeType))
        }
        guard let code = json["code"]?.intValue else {
            throw TxGateClientError.unexpectedResponse(status: r.status, String(r.bodyText.prefix(200)))
        }
        let detail = json["detail"]
        return .failure(AuthFailure(code: code, reason: json["reason"]?.stringValue ?? "", message: json["message"]?.stringValue ?? "",
                                    errorCode: detail?["errorCode"].map { $0.stringValue ?? $0.canonical },
                                    failureUrl: detail?["failureUrl"]?.stringValue, failureReason: detail?["reason"]?.stringValue,
                                    attemptsLeft: detail?["attemptsLeft"]?.intValue, retryAfterS: detail?["retryAfterS"]?.intValue))
    }

    // MARK: Sessions

    /// Ends the session at the server (`sessions?_action=logout`) and forgets it locally,
    /// whatever the server answered.
    ///
    /// - Returns: Whether the server knew the session; false when there was none to end.
    /// - Throws: ``TxGateClientError/transport(_:)`` (the session is forgotten locally all the
    ///   same), what an interceptor threw, and what the ``TokenStore`` threw.
    @discardableResult
    public func logout() async throws -> Bool {
        guard let token = try currentToken() else {
            try tokenStore.remove()
            return false
        }
        defer { try? tokenStore.remove() }
        let r = try await sessionCall("logout", token: token, action: InterceptorAction(.logout))
        return r.status == 200
    }

    /// Whether the stored session is still valid at the server (`sessions?_action=validate`).
    ///
    /// - Returns: True when the server says the session is valid; false when it is not, or there
    ///   is no session.
    /// - Throws: ``TxGateClientError/transport(_:)`` and what the ``TokenStore`` threw.
    public func validate() async throws -> Bool {
        guard let token = try currentToken() else { return false }
        let r = try await sessionCall("validate", token: token, action: nil)
        return r.status == 200 && JSONValue.parse(Array(r.body))?["valid"] == .bool(true)
    }

    private func sessionCall(_ action: String, token: String, action tag: InterceptorAction?) async throws -> ClientResponse {
        var request = URLRequest(url: try configuration.amURL("sessions", query: [("_action", action)]))
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("resource=2.0, protocol=1.0", forHTTPHeaderField: "Accept-API-Version")
        request.setValue(token, forHTTPHeaderField: configuration.sessionHeader)
        request.httpBody = Data("{}".utf8)
        return try await perform(request, action: tag)
    }

    /// Runs the interceptors (in registration order) on a tagged call, then sends it.
    func perform(_ request: URLRequest, action: InterceptorAction?) async throws -> ClientResponse {
        var request = request
        if let action {
            for i in interceptors { request = try await i.intercept(request, action: action) }
        }
        return try await transport.perform(request)
    }
}

/// The checks WIRE.md §5 asks of a client before it sends a resume.
enum ResumeURI {
    static func suspendedId(_ text: String, server: ClientConfiguration) throws -> String {
        guard let c = URLComponents(string: text), let scheme = c.scheme, let host = c.host, !host.isEmpty,
              ["http", "https"].contains(scheme.lowercased()), let url = c.url else {
            throw TxGateClientError.invalidResumeURI("not an absolute http(s) URI: \(text)")
        }
        guard server.isOwnOrigin(url) else {
            throw TxGateClientError.invalidResumeURI("\(Origin(url).text) is not the configured server \(Origin(server.serverURL).text)")
        }
        let ids = (c.queryItems ?? []).filter { $0.name == "suspendedId" }
        guard ids.count == 1, let id = ids[0].value, !id.isEmpty else {
            throw TxGateClientError.invalidResumeURI(ids.count > 1 ? "more than one suspendedId" : "no suspendedId in \(text)")
        }
        guard id.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { throw TxGateClientError.invalidResumeURI("malformed suspendedId") }
        return id
    }
}
