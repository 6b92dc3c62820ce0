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

    public init(address: SocketAddress, tls: TLSContext?, tlsHost: String, connectTimeoutMs: Int,
                responseTimeoutMs: Int, maxIdle: Int) {
        self.address = address
        self.tls = tls
        self.tlsHost = tlsHost
        self.connectTimeoutMs = connectTimeoutMs
        self.responseTimeoutMs = responseTimeoutMs
        self.maxIdle = maxIdle
    }
}

public enum UpstreamFailure: Error, Equatable, CustomStringConvertible {
    case connectFailed(String)
    case connectTimeout(Int)
    case responseTimeout(Int)
    case protocolError(String)
    case closed(String)

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
    func upstreamResponseEnd()
    func upstreamFailed(_ failure: UpstreamFailure)
}

/// An outgoing request. The body is referenced, not consumed, so that a request on a
/// keep-alive connection the upstream had just closed can be sent again on a new one.
public struct UpstreamRequest {
    public var method: String
    public var target: String
    public var headers: HTTPHeaders
    public var body: Body?

    public init(method: String, target: String, headers: HTTPHeaders, body: Body?) {
        self.method = method
        self.target = target
        self.headers = headers
        self.body = body
    }

    func serializeHead() -> [UInt8] {
        var w = HeadWriter(capacity: 192 + headers.wireSize)
        w.write(method)
        w.write(" ")
        w.write(target)
        w.write(" HTTP/1.1\r\n")
        w.writeFields(headers)
        let n = body?.count ?? 0
        if n > 0 || method == "POST" || method == "PUT" || method == "PATCH" {
            w.write("Content-Length: ")
            w.write(n)
            w.writeCRLF()
        }
        w.writeCRLF()
        return w.bytes
    }
}

