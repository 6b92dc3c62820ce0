import Dispatch
import EventHTTP
import HTTPCore
import Logging
import Synchronization
import TxGateCore

/// Client ID Metadata Documents (`oauth2.clientIdMetadataDocuments`): a `client_id` that is an
/// `https` URL is the client's own metadata, fetched from there and kept `cacheS`, shared by
/// the workers. The fetch never blocks a loop (the name is resolved on a background thread),
/// goes only to the address that was checked (no second lookup a DNS answer could change), to
/// a public address unless configured, over verified TLS, without following a redirect, within
/// `timeoutMs` and `maxBytes`.
final class ClientMetadataDocuments: Sendable {
    let config: ClientIDMetadataConfig
    private let tls: TLSContext
    private let allowedScopes: Set<String>
    private let logger: Logger
    private let cache = Mutex<[String: Entry]>([:])
    static let maxEntries = 1000
    static let failureCacheS = 30

    struct Entry: Sendable {
        var found: Result<(client: OAuthClient, name: String?), OAuthError>
        var expiresNanos: UInt64
    }

    init(config: ClientIDMetadataConfig, allowedScopes: Set<String>, logger: Logger) throws {
        self.config = config
        self.allowedScopes = allowedScopes
        self.logger = logger
        do { tls = try TLSContext.client(caFile: config.caFile) } catch {
            throw SocketError("oauth2.clientIdMetadataDocuments.caFile: cannot load '\(config.caFile ?? "the system's CAs")'")
        }
    }

    /// The client a fetched document describes, while it is kept.
    func client(_ id: String) -> (client: OAuthClient, name: String?)? {
        guard let e = cached(id), case .success(let c) = e.found else { return nil }
        return c
    }

    private func cached(_ id: String) -> Entry? {
        let now = EventLoop.nowNanos()
        return cache.withLock { c in c[id].flatMap { $0.expiresNanos > now ? $0 : nil } }
    }

    /// Makes sure the document of `clientId`, when it names one, has been fetched (or has failed)
    /// before the synchronous client lookups run; `then` gets the failure, if any, on `loop`.
    func resolve(_ clientId: String?, on loop: EventLoop, _ then: @escaping (OAuthError?) -> Void) {
        guard let clientId, let location = ClientMetadataDocument.location(clientId) else { then(nil); return }
        if let e = cached(clientId) {
            if case .failure(let f) = e.found { then(f) } else { then(nil) }
            return
        }
        let config = config
        let done = LoopBound(then, loop: loop)
        DispatchQueue.global().async { [self] in
            CurrentThread.unpin()
            let resolved = Result { try SocketAddress(host: location.host, port: location.port) }
            loop.execute { [self] in
                let then = done.value
                switch resolved {
                case .failure(let e): finish(clientId, .failure(.invalidClient("the client metadata document at \(clientId): \(e)")), then)
                case .success(let address):
                    if let why = ClientMetadataDocument.addressRefusal(address.numericHost, allowPrivate: config.allowPrivateAddresses) {
                        finish(clientId, .failure(.invalidClient("the client metadata document at \(clientId) is not fetched: \(why)")), then)
                        return
                    }
                    fetch(clientId, location, address, on: loop, then)
                }
            }
        }
    }

    private func fetch(_ url: String, _ location: (host: String, port: Int, target: String), _ address: SocketAddress, on loop: EventLoop,
                       _ then: @escaping (OAuthError?) -> Void) {
        let endpoint = UpstreamEndpoint(address: address, tls: tls, tlsHost: location.host, connectTimeoutMs: config.timeoutMs,
                                        responseTimeoutMs: config.timeoutMs, maxIdle: 0)
        var h = HTTPHeaders()
        h.add("Host", location.port == 443 ? location.host : "\(location.host):\(location.port)")
        h.add("Accept", "application/json")
        let pool = UpstreamPool(loop: loop, endpoint: endpoint)
        let request = UpstreamRequest(method: "GET", target: location.target, headers: h, body: Body([]), resendable: false)
        BufferedCall.send(request, on: pool, deadlineMs: config.timeoutMs, maxBytes: config.maxBytes) { [self] r in
            _ = pool  // kept until the answer
            let refused = { (why: String) in OAuthError.invalidClient("the client metadata document at \(url): \(why)") }
            switch r {
            case .failure(let f): finish(url, .failure(refused(f.description)), then)
            case .success(let resp) where resp.head.status != 200:
                finish(url, .failure(refused("answered \(resp.head.status), not 200 (redirects are not followed)")), then)
            case .success(let resp):
                finish(url, ClientMetadataDocument.client(resp.body, url: url, allowedScopes: allowedScopes).map { ($0.0, $0.name) }, then)
            }
        }
    }

    private func finish(_ url: String, _ found: Result<(client: OAuthClient, name: String?), OAuthError>, _ then: (OAuthError?) -> Void) {
        let ttl = UInt64(max(0, { if case .success = found { return config.cacheS } else { return min(config.cacheS, Self.failureCacheS) } }()))
        let now = EventLoop.nowNanos()
        cache.withLock { c in
            if c.count >= Self.maxEntries { c = c.filter { $0.value.expiresNanos > now } }
            if c.count >= Self.maxEntries, let oldest = c.min(by: { $0.value.expiresNanos < $1.value.expiresNanos })?.key { c[oldest] = nil }
            c[url] = Entry(found: found, expiresNanos: now + ttl * 1_000_000_000)
        }
        switch found {
        case .success(let c):
            logger.info("client metadata document fetched", metadata: ["client_id": .string(url), "redirect_uris": .stringConvertible(c.client.redirectUris.count)])
            then(nil)
        case .failure(let e):
            logger.warning("client metadata document refused", metadata: ["client_id": .string(url), "reason": .string(e.description)])
            then(e)
        }
    }
}
