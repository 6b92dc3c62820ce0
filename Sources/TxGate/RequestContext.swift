import EventHTTP
import HTTPCore
import TxGateCore

/// Everything one request carries through the phases (Pingora's per-request context). The
/// phases fill it in as they go; each phase reports its outcome through it: `proceed()`,
/// `respond(...)` or `fail(...)`.
final class RequestContext {
    let exchange: ServerExchange
    let requestId: String
    /// Who sent the request: the peer, or the client a trusted proxy names (`trustedProxies`).
    /// Computed once; the access log, the lockout and rate counters and `X-Forwarded-For` use it.
    let client: TrustedProxies.Client
    /// Held strongly: a reload replaces the worker's pipeline, and a request in flight keeps
    /// the one it started with.
    private let pipeline: Pipeline
    private var phaseIndex = 0

    /// The normalized path (no query) every phase after `CanonicalRequestPhase` works on.
    var path: String {
        didSet { applicable = nil }  // forward-auth puts the original request's path here
    }
    /// The target sent upstream: the normalized path with the request's query, `_txid` and
    /// `_idtoken` removed.
    var target: String
    /// Set on `/-/authz`: the proxy that asks about the original request, and that request's
    /// method (`ForwardAuthPhase`).
    var forwardedBy: ForwardedRequest.Proxy?
    var forwardedMethod: String? {
        didSet { applicable = nil }
    }
    /// The TxId a retried request names (`_txid` or `X-TxID`).
    var txid: String?
    /// The `Authorization: Bearer` token, if any.
    var bearer: String?
    /// The session the identify phase found.
    var subject: Subject?
    /// The verified access token the subject came from, when it came from one.
    var accessToken: JWS.Verified?
    /// What the policy decision point said.
    var decision: Decision?
    /// The transaction whose approval this request spends: an allowed request that named one
    /// (the embedded PDP consumed it, or the AM did). It goes upstream at most once, with
    /// `Idempotency-Key` set to it.
    var consumedTxid: String? {
        guard let d = decision, d.allows(method) else { return nil }
        return d.consumed?.txid ?? txid
    }
    /// The name of the policy that applied to the request, when one did.
    var policyName: String?
    /// The headers sent upstream, once the upstream request filter has built them.
    var upstreamHeaders: HTTPHeaders?
    /// A browser's parked request, found again to be sent as it was (WIRE-EXTENSIONS §3b): its
    /// method, content type, accept and body stand for those of the GET that brought the
    /// browser back.
    var replay: ParkedRequest? {
        didSet { applicable = nil }  // its method decides which policy applies
    }
    /// Added to whatever answers the request, the gateway or the upstream (CORS headers).
    var responseHeaders = HTTPHeaders()
    /// Time from sending upstream to the response head, when the request was proxied.
    var upstreamNanos: UInt64?
    private(set) var finished = false
    /// The applicable policy's index, once looked up (`policyIndex`).
    private var applicable: Int??

    init(exchange: ServerExchange, requestId: String, pipeline: Pipeline) {
        self.exchange = exchange
        self.requestId = requestId
        self.pipeline = pipeline
        // X-Forwarded-For is read only from a trusted peer; without `trustedProxies`, this is one emptiness check.
        client = pipeline.trustedProxies.isEmpty ? TrustedProxies.Client(address: exchange.remoteIP, viaTrustedProxy: false)
            : pipeline.trustedProxies.client(peer: exchange.remoteIP, forwardedFor: exchange.head.headers.values("X-Forwarded-For"))
        target = exchange.head.target
        path = ""
    }

    var head: RequestHead { exchange.head }

    /// The index in the pipeline's policies of the one that applies to the normalized path and
    /// the method (nil: none, or the path is not normalized yet), looked up once per request:
    /// the phases, the access log and the metrics all ask.
    var policyIndex: Int? {
        if let a = applicable { return a }
        guard !path.isEmpty else { return nil }
        let i = pipeline.policies.applicableIndex(path: path[...], method: method)
        applicable = .some(i)
        return i
    }

    /// The policy that applies (`policyIndex`); a reference, not a copy (`Policy` is a class).
    var policy: Policy? { policyIndex.map { pipeline.policies.policies[$0] } }

    /// The method decided on and sent upstream: the parked request's, when one is replayed; the
    /// original request's on `/-/authz`.
    var method: String { replay?.method ?? forwardedMethod ?? exchange.head.method }

    /// The body decided on (a copy): the parked request's, when one is replayed.
    var bodyBytes: [UInt8] { replay?.body ?? exchange.body.bytes }

    /// The Content-Type; several are joined, so that no media type parses and binding refuses it.
    var contentType: String? {
        if let replay { return replay.contentType }
        var value: String?
        for f in exchange.head.headers where asciiCaseInsensitiveEquals(f.name, "Content-Type") {
            value = value.map { $0 + ", " + f.value } ?? f.value
        }
        return value
    }

    /// Hands the request to the next phase.
    func proceed() {
        phaseIndex += 1
        if !pipeline.run(phaseIndex - 1, self) { fail(.internalError("no phase answered the request")) }
    }

    /// Answers the request (a phase's local reply, Envoy's `sendLocalReply`).
    func respond(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8]) {
        var h = headers
        h.add("X-Request-Id", requestId)
        for f in responseHeaders { h.add(f.name, f.value) }
        exchange.respond(status: status, headers: h, body: body)
        finish()
    }

    func respondJSON(status: Int, _ json: String, headers: HTTPHeaders = HTTPHeaders()) {
        var h = headers
        h.add("Content-Type", "application/json")
        respond(status: status, headers: h, body: Array(json.utf8))
    }

    /// Ends the request with a failure: the pipeline maps it to a response and logs it, in one place.
    /// The proxied request goes upstream a second time (`UpstreamRequest.resendable`).
    func upstreamResent(after failure: UpstreamFailure) {
        pipeline.resent(self, after: failure)
    }

    func fail(_ failure: RequestFailure) {
        pipeline.fail(self, failure)
    }

    /// The request is over (answered, proxied, or the client left): the access log, once.
    func finish() {
        guard !finished else { return }
        finished = true
        pipeline.log(self)
    }
}

/// A step of request handling. It reports one outcome through the context, now or later
/// (when an asynchronous lookup completes on the same loop): `proceed()`, a response, or a
/// failure. Phases are values built per worker, with what they need; they hold no request state.
protocol RequestPhase {
    func handle(_ ctx: RequestContext)
}
