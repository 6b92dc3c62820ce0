import Foundation
import HTTPCore
import TxGateCrypto

public struct Journey: Sendable {
    public let name: String
    public let nodes: [JourneyNode]
    public init(name: String, nodes: [JourneyNode]) { self.name = name; self.nodes = nodes }
}

/// Where a journey step leads.
public enum JourneyResult: Error, Sendable {
    /// Show these callbacks; the client posts them back with this authId.
    case step(authId: String, callbacks: [Callback])
    /// Every node passed.
    case success(JourneyState)
    /// 401 "Login failure". The reason is for the log; the kind, and the attempts left before a
    /// lockout when the failure was counted, may be told inside a live session.
    case failure(reason: String, kind: FailureKind = .other, attemptsLeft: Int? = nil)
    /// 401 with errorCode "110": the authId expired.
    case timedOut
    /// 401: the authId was forged or tampered with, or the answers do not fit the step.
    case rejected(String)
    /// 503: a backing service is down.
    case unavailable(String)
}

/// Runs journeys: which node is next, the signed authId, and checking answers against the
/// step they answer. The nodes do the work; the engine keeps the order.
public final class JourneyEngine: Sendable {
    public let journeys: [String: Journey]
    private let signingKey: [UInt8]
    private let authIdTtlS: Int

    public init(journeys: [String: Journey], signingKey: [UInt8], authIdTtlS: Int) {
        self.journeys = journeys
        self.signingKey = signingKey
        self.authIdTtlS = authIdTtlS
    }

    /// Enters the first node of `initial.journey`.
    public func start(_ initial: JourneyState, context: JourneyContext, _ done: @escaping (JourneyResult) -> Void) {
        guard let journey = journeys[initial.journey], !journey.nodes.isEmpty else {
            done(.rejected("no journey named '\(initial.journey)'"))
            return
        }
        var state = initial
        state.node = 0
        enter(state, journey, context, done)
    }

    /// Continues a journey restored from a suspended id, at the node after the suspend.
    public func resume(_ state: JourneyState, context: JourneyContext, _ done: @escaping (JourneyResult) -> Void) {
        guard let journey = journeys[state.journey] else {
            done(.rejected("the journey '\(state.journey)' is no longer configured"))
            return
        }
        if state.node >= journey.nodes.count { done(.success(state)); return }
        enter(state, journey, context, done)
    }

    /// Reads and checks an authId: signature, expiry, and that its journey still exists. One
    /// found in `issued` (signed on this worker) is read from there instead of its signature
    /// and claims; its expiry and journey are checked all the same.
    public func decode(authId: String, now: Int, issued: IssuedAuthIds? = nil) -> Result<JourneyState, JourneyResult> {
        let state: JourneyState
        if let known = issued?.take(AuthIdKey(authId)) {
            guard known.expires > now else { return .failure(.timedOut) }
            state = known.state
        } else {
            let claims: [String: JSONValue]
            do {
                claims = try JWT.verifiedClaims(authId, key: signingKey, now: now).members
            } catch {
                return .failure(error == .expired ? .timedOut : .rejected("invalid authId"))
            }
            guard claims["iss"] == .string("txgate"), let st = claims["st"].flatMap(JourneyState.init(json:)) else {
                return .failure(.rejected("invalid authId"))
            }
            state = st
        }
        guard let journey = journeys[state.journey], journey.nodes.indices.contains(state.node) else {
            return .failure(.rejected("invalid authId"))
        }
        return .success(state)
    }

    /// Marks a state whose step shows an error text; answering it enters the node again.
    static let retryMark = "retry"

    /// Processes the answers to the step `state` is at.
    public func proceed(_ state: JourneyState, submitted: [SubmittedCallback], context: JourneyContext,
                        _ done: @escaping (JourneyResult) -> Void) {
        guard let journey = journeys[state.journey], journey.nodes.indices.contains(state.node) else {
            done(.rejected("invalid authId"))
            return
        }
        if state.shared[Self.retryMark] != nil {
            guard submitted.map(\.type) == ["TextOutputCallback"] else {
                done(.rejected("the callbacks do not match the step"))
                return
            }
            var again = state
            again.shared[Self.retryMark] = nil
            enter(again, journey, context, done)
            return
        }
        let node = journey.nodes[state.node]
        let expected = node.callbacks(state, context)
        guard submitted.map(\.type) == expected.map(\.type) else {
            done(.rejected("the callbacks do not match the step"))
            return
        }
        node.process(submitted, state, context) { [self] outcome in
            switch outcome {
            case .failure(let reason, let kind, let attemptsLeft):
                done(.failure(reason: reason, kind: kind, attemptsLeft: attemptsLeft))
            case .unavailable(let why):
                done(.unavailable(why))
            case .again(var same):
                same.node = state.node
                done(.step(authId: sign(same, context), callbacks: node.callbacks(same, context)))
            case .next(var next):
                next.node = state.node + 1
                if next.node >= journey.nodes.count {
                    done(.success(next))
                } else {
                    enter(next, journey, context, done)
                }
            }
        }
    }

    private func enter(_ state: JourneyState, _ journey: Journey, _ context: JourneyContext,
                       _ done: @escaping (JourneyResult) -> Void) {
        let node = journey.nodes[state.node]
        node.enter(state, context) { [self] outcome in
            switch outcome {
            case .show(let s):
                done(.step(authId: sign(s, context), callbacks: node.callbacks(s, context)))
            case .suspend(let message):
                done(.step(authId: sign(state, context), callbacks: [.suspended(message)]))
            case .error(let message):
                var s = state
                s.shared[Self.retryMark] = "1"
                done(.step(authId: sign(s, context), callbacks: [.text(message, messageType: "2")]))
            case .failure(let reason, let kind):
                done(.failure(reason: reason, kind: kind))
            case .unavailable(let why):
                done(.unavailable(why))
            }
        }
    }

    private func sign(_ state: JourneyState, _ context: JourneyContext) -> String {
        let now = context.services.now
        var claims = CanonicalObjectWriter(capacity: 512)
        claims.member("exp", now + authIdTtlS)
        claims.member("iat", now)
        claims.member("iss", "txgate")
        claims.member("st", object: state.canonicalBytes)
        let authId = JWT.sign(claimsJSON: claims.finish(), key: signingKey)
        context.issued?.remember(AuthIdKey(authId), IssuedAuthId(state: state, expires: now + authIdTtlS))
        return authId
    }

    /// `{"authId":"...","callbacks":[...]}` exactly as AM shapes it.
    public static func stepJSON(authId: String, callbacks: [Callback]) -> String {
        String(decoding: stepJSONBytes(authId: authId, callbacks: callbacks), as: UTF8.self)
    }

    /// `stepJSON` written into one buffer (every step of every journey answers with one).
    public static func stepJSONBytes(authId: String, callbacks: [Callback]) -> [UInt8] {
        var out = ByteWriter(capacity: authId.utf8.count + 64 + 256 * callbacks.count)
        out.append(#"{"authId":"# as StaticString)
        JSONText.write(authId, into: &out)
        out.append(#","callbacks":["# as StaticString)
        for (i, c) in callbacks.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            c.write(id: i, into: &out)
        }
        out.append(UInt8(ascii: "]"), UInt8(ascii: "}"))
        return out.bytes
    }

    /// Builds the journeys of a configuration, reporting each bad node by its path.
    public static func build(_ configs: [String: [NodeConfig]]) -> (journeys: [String: Journey], errors: [ConfigError]) {
        var journeys: [String: Journey] = [:]
        var errors: [ConfigError] = []
        for name in configs.keys.sorted() {
            let nodeConfigs = configs[name]!
            if nodeConfigs.isEmpty { errors.append(ConfigError(path: "journeys.\(name)", message: "a journey needs at least one node")) }
            var nodes: [JourneyNode] = []
            for c in nodeConfigs {
                do { nodes.append(try JourneyNodes.make(c)) } catch {
                    errors.append(ConfigError(path: error.path, message: error.message))
                }
            }
            journeys[name] = Journey(name: name, nodes: nodes)
        }
        return (journeys, errors)
    }
}
