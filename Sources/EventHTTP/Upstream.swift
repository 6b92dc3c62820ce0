import CLibevent
import HTTPCore

/// Where and how to reach one upstream.
public struct UpstreamEndpoint: Sendable {
    public let address: SocketAddress
    /// Set for `https://` upstreams.
    public let tls: TLSContext?
    /// The host name for SNI and certificate verification.
    public let tlsHost: String
    public let connectTimeoutMs: Int
    public let responseTimeoutMs: Int
    /// Idle keep-alive connections kept per loop (0 disables reuse).
    public let maxIdle: Int
    /// A connection idle for longer than this is not reused: set it below the upstream's own
    /// keep-alive timeout, so that the upstream never closes a connection just as a request
    /// goes out on it (the race that would otherwise call for a re-send).
    public let idleTimeoutMs: Int

    public init(address: SocketAddress, tls: TLSContext?, tlsHost: String, connectTimeoutMs: Int,
                responseTimeoutMs: Int, maxIdle: Int, idleTimeoutMs: Int = 4_000) {
        self.address = address
        self.tls = tls
        self.tlsHost = tlsHost
        self.connectTimeoutMs = connectTimeoutMs
        self.responseTimeoutMs = responseTimeoutMs
        self.maxIdle = maxIdle
        self.idleTimeoutMs = idleTimeoutMs
    }
}

public enum UpstreamFailure: Error, Equatable, CustomStringConvertible {
    case connectFailed(String)
    case connectTimeout(Int)
    case responseTimeout(Int)
    case protocolError(String)
    case closed(String)

    /// Whether the request may have reached the upstream, and so may have been processed:
    /// everything but a connection that never opened. The client is told that the outcome is
    /// unknown.
    public var requestMayHaveBeenProcessed: Bool {
        switch self {
        case .connectFailed, .connectTimeout: return false
        case .responseTimeout, .protocolError, .closed: return true
        }
    }

    /// 504 for a slow upstream, 502 for everything else.
    public var status: Int {
        if case .responseTimeout = self { return 504 }
        return 502
    }

    public var description: String {
        switch self {
        case .connectFailed(let why): return "cannot connect to the upstream: \(why)"
        case .connectTimeout(let ms): return "the upstream did not accept a connection within \(ms) ms"
        case .responseTimeout(let ms): return "the upstream did not respond within \(ms) ms"
        case .protocolError(let why): return "the upstream sent an invalid response: \(why)"
        case .closed(let why): return why
        }
    }
}

public protocol UpstreamResponseHandler: AnyObject {
    func upstreamResponseHead(_ head: ResponseHead, framing: BodyFraming)
    /// Must take all of `body` (e.g. move it to the client); what is left is dropped.
    func upstreamResponseBody(_ body: Body)
    /// Body bytes read straight into the loop's read buffer (a response read whole), valid only
    /// during the call. By default, they are copied into a `Body` for `upstreamResponseBody(_:)`.
    func upstreamResponseBody(bytes: UnsafeRawBufferPointer)
    func upstreamResponseEnd()
    func upstreamFailed(_ failure: UpstreamFailure)
    /// The request is about to be sent again on a new connection: a kept-alive connection
    /// failed before any byte of the response, and the request is `resendable`.
    func upstreamWillResend(after failure: UpstreamFailure)
}

extension UpstreamResponseHandler {
    public func upstreamWillResend(after failure: UpstreamFailure) {}

    public func upstreamResponseBody(bytes: UnsafeRawBufferPointer) {
        let body = Body()
        body.append(bytes)
        upstreamResponseBody(body)
    }
}

/// An outgoing request. The body is referenced, not consumed, so that a `resendable` request
/// on a keep-alive connection the upstream had just closed can be sent again on a new one.
public struct UpstreamRequest {
    public var method: String
    public var target: String
    public var headers: HTTPHeaders
    public var body: Body?
    /// Whether the request may be sent a second time, on a new connection, when a kept-alive
    /// connection fails before any byte of its response. That failure cannot tell "never
    /// processed" from "processed, then the connection was lost", so only a request whose
    /// repetition changes nothing may be re-sent (RFC 9110 §9.2.2): by default, one with an
    /// idempotent method. Never one that carries an approval: it opens one execution.
    public var resendable: Bool

    public init(method: String, target: String, headers: HTTPHeaders, body: Body?, resendable: Bool? = nil) {
        self.method = method
        self.target = target
        self.headers = headers
        self.body = body
        self.resendable = resendable ?? Self.isIdempotent(method)
    }

    /// RFC 9110 §9.2.2's idempotent methods.
    public static func isIdempotent(_ method: String) -> Bool {
        switch method {
        case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE": return true
        default: return false
        }
    }
}

