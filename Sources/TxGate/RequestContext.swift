import EventHTTP
import HTTPCore
import Logging
import TxGateCore

/// Everything one request carries through the phases (Pingora's per-request context). The
/// phases fill it in as they go and return what they decided (`PhaseStatus`); the context runs
/// them in a loop (`run`), so that the stack stays flat however many phases there are, and an
/// asynchronous phase continues the loop from its callback through the resume token it took.
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
    private var flow = Flow.ready
    /// What a token delivered while its phase was still running (`Flow.resumedInPhase`). Kept
    /// apart so that `Flow` has no payload: setting it, twice per phase, stays a byte store.
    private var resumedOutcome: Outcome?

    /// The normalized path (no query) every phase after `CanonicalRequestPhase` works on.
    var path: String {
        // Forward-auth puts the original request's path here.
        didSet {
            applicable = nil
            pathFamily = PathFamily(path)
        }
    }
    /// Which of the gateway's own path families `path` is in: the loop skips the phases of
    /// the others without calling them (`RequestPhase.appliesTo`).
    private(set) var pathFamily = PathFamily.other
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
    /// `txid` is an access token's approval asked for ahead of the request (RFC 9396).
    var txidApprovedAhead = false
    /// The approval request an approvals endpoint or an approve-elsewhere step names (the
    /// access log writes it masked).
    var approvalId: String?
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
        // Nearly every request names none: asked first, it spares a copy of the decision and a
        // lookup of the method in its actions (twice a request, about 800 instructions each).
        guard let id = decision?.consumedTxid ?? txid, decision?.allows(method) == true else { return nil }
        return id
    }
    /// The decision as the metrics count it, for the decided method (nil: no decision). Read in
    /// place: a copy of the decision retained and released everything in it.
    var decisionCount: WorkerStats.DecisionCount? {
        switch decision {
        case nil: return nil
        case let d?: return WorkerStats.DecisionCount(d, method: method)
        }
    }
    /// The name of the policy that applied to the request, when one did.
    var policyName: String?
    /// The headers sent upstream, once the upstream request filter has built them.
    var upstreamHeaders: ForwardedFields?
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
    /// The upstream call of a proxied request (`ProxyPhase`).
    var proxying = Proxying()
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

    /// Borrowed, not copied: a copy retained and released every field of the head.
    var head: RequestHead { _read { yield exchange.head } }

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

    /// Whether the pipeline has any policy (without one, no request looks one up).
    var hasPolicies: Bool { !pipeline.policies.isEmpty }

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
        // Over the fields' bytes: iterating them as `Field`s would make every name and value a
        // String first.
        exchange.head.headers.forEachRaw { f in
            guard equalsLowercased(f.name, "content-type") else { return }
            let v = f.valueText
            value = value.map { $0 + ", " + v } ?? v
        }
        return value
    }

    // MARK: Running the phases

    /// Where the request is in its phases.
    private enum Flow {
        /// Not started.
        case ready
        /// A phase is running (`handle` has not returned).
        case inPhase
        /// The running phase's token was used before its `handle` returned: the loop goes on
        /// with `resumedOutcome`.
        case resumedInPhase
        /// A phase returned `.suspended`; its token continues the loop.
        case suspended
        /// Answered, proxied, or the client left: logged.
        case over
    }

    /// What the loop does next.
    enum Outcome {
        case next
        case reply(LocalReply)
        case fail(RequestFailure)
        /// The response was produced without a local reply (the upstream's, streamed), or cannot
        /// be (the client left, the HTTP layer answered the body's error).
        case ended(ReplyDetails)
    }

    /// Runs the phases from the first.
    func run() { drive(.next) }

    /// The loop: each phase's returned status says what comes next; a suspended phase returns
    /// here through its token (`resumed`), from its callback, at the same depth.
    private func drive(_ first: consuming Outcome) {
        var outcome = first
        while true {
            switch outcome {
            case .next:
                guard phaseIndex < pipeline.callers.count else {
                    outcome = .fail(.internalError("no phase answered the request"))
                    continue
                }
                phaseIndex += 1
                let caller = pipeline.callers[phaseIndex - 1]
                // A phase for other paths than this request's would return `.next`.
                guard caller._withUnsafeGuaranteedRef({ $0.appliesTo.contains(pathFamily) }) else { continue }
                flow = .inPhase
                // Through the phase's cell, unretained (`Pipeline.callers`): no copy of the phase.
                let status = caller._withUnsafeGuaranteedRef { $0.handle(self) }
                // The common case, on to the next phase, leaves `outcome` as it is (`.next`):
                // assigning it destroyed the old value through an outlined call, once per phase.
                if case .next = status, flow == .inPhase { continue }
                switch status {
                case .suspended:
                    guard flow == .resumedInPhase, let o = resumedOutcome.take() else {
                        flow = .suspended
                        return
                    }
                    outcome = o
                case .reply(let r) where flow == .inPhase:
                    outcome = .reply(r)
                case .fail(let f) where flow == .inPhase:
                    outcome = .fail(f)
                default:
                    // A phase took a resume token and then returned another status.
                    outcome = .fail(.internalError("phase \(pipeline.cells[phaseIndex - 1].phaseType) answered twice"))
                }
            case .reply(let r):
                flow = .over
                pipeline.reply(self, r)
                return
            case .fail(let f):
                flow = .over
                pipeline.fail(self, f)
                return
            case .ended(let details):
                flow = .over
                pipeline.log(self, details: details.rawValue)
                return
            }
        }
    }

    /// A phase that answers later: `body` gets the token, which it must use exactly once (its
    /// consuming methods), now or from a callback on this loop. Used before `handle` returns,
    /// the loop goes on from there; used later, the loop goes on from the callback.
    func suspend(_ body: (consuming PhaseResume) -> Void) -> PhaseStatus {
        body(PhaseResume(self))
        return .suspended(Suspension())
    }

    /// The proxied request goes upstream a second time (`UpstreamRequest.resendable`): logged and counted.
    func upstreamResent(after failure: UpstreamFailure) {
        pipeline.resent(self, after: failure)
    }

    /// A broken rule of the phase protocol (a bug): logged with the request id.
    func reportMisuse(_ what: String) {
        pipeline.misuse(self, what)
    }

    /// The outcome is moved through, not copied (a copy retained what it carries, and its
    /// destroy released it).
    fileprivate func resumed(_ outcome: consuming Outcome) {
        switch flow {
        case .inPhase:
            resumedOutcome = outcome
            flow = .resumedInPhase
        case .suspended:
            drive(outcome)
        case .ready, .resumedInPhase, .over:
            reportMisuse("a resume token was used when its phase was not waiting for it")
        }
    }
}

/// A step of request handling. Phases are values built per worker, with what they need; they
/// hold no request state. Each returns what it decided; an asynchronous one returns
/// `ctx.suspend { resume in ... }` and answers through `resume` when its lookup completes.
protocol RequestPhase {
    func handle(_ ctx: RequestContext) -> PhaseStatus
    /// The paths this phase may act on: for a request whose path is in none of these families
    /// it would return `.next`, so the loop does not call it. All of them unless it says so.
    var appliesTo: PathFamily { get }
}

extension RequestPhase {
    var appliesTo: PathFamily { .all }
}

/// The gateway's own endpoints by where they live, so that a proxied request does not go
/// through each endpoint phase's own checks of its path (Envoy's route table: the path is
/// looked at once, not once per endpoint).
struct PathFamily: OptionSet {
    let rawValue: UInt8
    /// Under `/-/`: health, readiness, metrics, forward-auth.
    static let gateway = PathFamily(rawValue: 1)
    /// `/am`, under `/am/`, under `/.well-known/`: the authentication service, OAuth 2.0.
    static let auth = PathFamily(rawValue: 2)
    /// Everything else: proxied.
    static let other = PathFamily(rawValue: 4)
    static let all: PathFamily = [.gateway, .auth, .other]

    init(rawValue: UInt8) { self.rawValue = rawValue }

    /// The one family of `path`.
    init(_ path: String) {
        if path.hasASCIIPrefix("/-/") {
            self = .gateway
        } else if path.utf8.count == 3 && path == "/am" || path.hasASCIIPrefix("/am/") || path.hasASCIIPrefix("/.well-known/") {
            self = .auth
        } else {
            self = .other
        }
    }
}

/// Calls one phase (`Pipeline.callers`).
class PhaseCaller {
    /// The phase's `appliesTo`, read by the loop before it calls the phase.
    let appliesTo: PathFamily

    init(appliesTo: PathFamily) { self.appliesTo = appliesTo }

    func handle(_ ctx: RequestContext) -> PhaseStatus { preconditionFailure("PhaseCaller is abstract") }

    /// The phase's type, for a message about it.
    var phaseType: Any.Type { preconditionFailure("PhaseCaller is abstract") }

    /// The cell for an existential phase, of its dynamic type.
    static func cell(for phase: any RequestPhase) -> PhaseCaller {
        func make<P: RequestPhase>(_ p: P) -> PhaseCaller { PhaseCell<P>(p) }
        return make(phase)
    }
}

/// A phase of concrete type `P`, held by a class so that the loop calls it through a plain
/// virtual call on a reference it does not retain, and the phase is read in place.
final class PhaseCell<P: RequestPhase>: PhaseCaller {
    let phase: P

    init(_ phase: P) {
        self.phase = phase
        super.init(appliesTo: phase.appliesTo)
    }

    override func handle(_ ctx: RequestContext) -> PhaseStatus { phase.handle(ctx) }

    override var phaseType: Any.Type { P.self }
}

/// What a phase decided (Pingora's and Envoy's filter statuses).
enum PhaseStatus {
    /// The next phase takes over.
    case next
    /// The gateway answers the request itself (Envoy's `sendLocalReply`).
    case reply(LocalReply)
    /// The request ends with an error answer (`Pipeline.fail`, the one exit for failures).
    case fail(RequestFailure)
    /// The phase answers later through its token; only `RequestContext.suspend` makes this.
    case suspended(Suspension)
}

/// The proof that a phase handed out a resume token (`RequestContext.suspend`).
struct Suspension {
    fileprivate init() {}
}

/// An answer the gateway gives itself, with why (`details`, Envoy's response code details),
/// which the access log records.
struct LocalReply {
    var status: Int
    var headers: HTTPHeaders
    var body: [UInt8]
    var details: ReplyDetails

    init(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = [], details: ReplyDetails) {
        self.status = status
        self.headers = headers
        self.body = body
        self.details = details
    }

    static func json(_ status: Int, _ json: String, headers: HTTPHeaders = HTTPHeaders(), details: ReplyDetails) -> LocalReply {
        self.json(status, Array(json.utf8), headers: headers, details: details)
    }

    static func json(_ status: Int, _ json: [UInt8], headers: consuming HTTPHeaders = HTTPHeaders(), details: ReplyDetails) -> LocalReply {
        headers.add("Content-Type", "application/json")
        return LocalReply(status: status, headers: headers, body: json, details: details)
    }
}

/// Why a request ended the way it did, as the access log's `details` says it.
enum ReplyDetails: String {
    /// The upstream's response, streamed to its end.
    case viaUpstream = "via_upstream"
    /// The client left before its answer was complete.
    case clientGone = "client_gone"
    /// The request body failed (too large, too slow, cut off): the HTTP layer answered.
    case bodyFailed = "body_failed"
    /// A 401 with advices (SSOADVICE, RFC 9470) or a redirect to the login page.
    case challenge
    /// A browser's request parked for its approval, and the browser sent to sign in (303).
    case challengeParked = "challenge_parked"
    /// A parked request visited by another user than the one who sent it.
    case parkedElsewhere = "parked_elsewhere"
    /// A CORS preflight, answered by the gateway.
    case corsPreflight = "cors_preflight"
    /// `/-/authz` allowed the original request.
    case forwardAuthAllowed = "forward_auth_allowed"
    /// `/-/health`, `/-/ready`, `/-/metrics`.
    case gatewayEndpoint = "gateway_endpoint"
    /// An answer of the authentication service (`/am/json/...`, the login page, OAuth 2.0).
    case authService = "auth_service"
    /// The authentication service's own refusal in AM's form (a 4xx such as `401 Unauthorized`).
    case authServiceRefused = "auth_service_refused"
}

/// A phase's way back into the loop, used exactly once: its methods consume it, so the
/// compiler refuses a second use in the same flow and its use in a closure that could run
/// twice; one let go of unused fails the request (its `deinit`), so a forgotten callback never
/// leaves a client waiting. To carry it into a callback, keep it in an optional and `take()` it.
struct PhaseResume: ~Copyable {
    private var ctx: RequestContext?

    fileprivate init(_ ctx: RequestContext) { self.ctx = ctx }

    var request: RequestContext { ctx! }

    consuming func next() { go(.next) }
    consuming func reply(_ r: LocalReply) { go(.reply(r)) }
    consuming func fail(_ f: RequestFailure) { go(.fail(f)) }
    consuming func ended(_ details: ReplyDetails) { go(.ended(details)) }

    /// Continues with what a phase would have returned.
    consuming func resume(_ status: PhaseStatus) {
        switch status {
        case .next: go(.next)
        case .reply(let r): go(.reply(r))
        case .fail(let f): go(.fail(f))
        case .suspended: go(.fail(.internalError("a resumed phase cannot suspend again")))
        }
    }

    private mutating func go(_ outcome: consuming RequestContext.Outcome) {
        ctx.take()?.resumed(outcome)
    }

    deinit {
        ctx?.resumed(.fail(.internalError("a phase let go of the request without answering it")))
    }
}
