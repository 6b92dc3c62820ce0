/// Who is asking: the session behind the request.
///
/// Its members in one immutable box: every request copies its subject a few times (into the
/// request, for the decision cache's key, into the query), and a copy of its members was
/// six retains and releases; it is now one.
public struct Subject: Equatable, Sendable {
    private struct Members: Equatable {
        var uid: String
        var realm: String
        var journeys: [String]
        var attributes: [String: String]
        var token: String
        var authTime: Int?
    }

    private var box: Boxed<Members>

    public var uid: String { get { box.members.uid } set { box.update { $0.uid = newValue } } }
    public var realm: String { get { box.members.realm } set { box.update { $0.realm = newValue } } }
    /// Journeys the session has completed (for step-up policies).
    public var journeys: [String] { get { box.members.journeys } set { box.update { $0.journeys = newValue } } }
    public var attributes: [String: String] { get { box.members.attributes } set { box.update { $0.attributes = newValue } } }
    /// The session token (or the bearer access token), to answer a completed journey with the same session.
    public var token: String { get { box.members.token } set { box.update { $0.token = newValue } } }
    /// When the subject last authenticated (unix seconds): a session's last journey, a token's
    /// `auth_time`; a step-up policy's `maxAgeS` counts from it.
    public var authTime: Int? { get { box.members.authTime } set { box.update { $0.authTime = newValue } } }

    public init(uid: String, realm: String, journeys: [String], attributes: [String: String], token: String, authTime: Int? = nil) {
        box = Boxed(Members(uid: uid, realm: realm, journeys: journeys, attributes: attributes, token: token, authTime: authTime))
    }

    /// Whether `entry` (a username or an `attribute=value` pair) names this subject.
    public func isNamed(by entry: String) -> Bool {
        guard let eq = entry.firstIndex(of: "=") else { return entry == uid }
        return attributes[String(entry[..<eq])] == String(entry[entry.index(after: eq)...])
    }
}

/// One question to a policy decision point (AM's evaluate request).
public struct DecisionQuery {
    public var realm: String
    /// The path (no query) the policies match against.
    public var path: Substring
    /// The resource as AM names it: the gateway's public URL of the request, `_txid` removed.
    public var resource: String
    public var method: String
    public var subject: Subject?
    /// The TxId a retried request names (AM's `environment.TxId`).
    public var txid: String?
    /// `txid` is an approval asked for ahead of the request (RFC 9396): the `txn` of an access
    /// token carrying `authorization_details`.
    public var txidApprovedAhead = false
    /// Reads the request body, for binding a transaction to what is approved (only
    /// transactional policies pay for the copy); nil when the PDP is asked without the request
    /// (AM's REST evaluate has resources, no body).
    public var body: (() -> [UInt8])?
    /// The request's `Content-Type` (several joined with ", ", which no media type parses).
    public var contentType: String?
    /// When the gateway received the request (monotonic ns): a remote PDP's timeout counts
    /// from there, so that looking up the session and deciding share one time budget.
    public var receivedNanos: UInt64?
    /// The gateway's request id, for the audit trail (`AuditEvent.requestId`).
    public var requestId: String?

    public init(realm: String, path: Substring, resource: String, method: String, subject: Subject?,
                txid: String? = nil, body: (() -> [UInt8])? = nil, contentType: String? = nil) {
        self.realm = realm
        self.path = path
        self.resource = resource
        self.method = method
        self.subject = subject
        self.txid = txid
        self.body = body
        self.contentType = contentType
    }
}

/// Why a PDP could not answer with a decision.
public enum PDPError: Error, Equatable, Sendable {
    /// The store (or a remote PDP) cannot be reached: fail closed.
    case unavailable(String)
    /// A remote PDP (AM) did not answer, or answered something that is not a decision: fail closed.
    case remoteUnavailable(String)
    case tooManyTransactions(Int)
    case badRequest(String)
    /// The body's media type cannot be bound (415).
    case unsupportedMediaType(String)
}

/// A source of decisions in AM's shape: the embedded engine, or a remote AM (`RemotePDP`). The PEP
/// does not care which one it talks to.
public protocol PolicyDecisionPoint: AnyObject, Sendable {
    /// Whether deciding needs the subject; if not, the PEP skips the session lookup (so that
    /// open routes keep working when the store is down). `applicable`: the configuration's
    /// policy for the request, which the gateway finds once per request.
    func needsSubject(applicable: Policy?) -> Bool
    /// Decides; `done` runs on `executor`.
    func evaluate(_ q: DecisionQuery, on executor: CallbackExecutor, _ done: @escaping (Result<Decision, PDPError>) -> Void)
    /// Who a cached decision is for: the user and the journeys done (embedded), or the session
    /// itself (remote: only the AM knows what else the session carries).
    func cacheKey(for subject: Subject) -> SubjectKey
    /// The PDP one worker asks, deciding with `policies`: that worker's own objects for the
    /// configuration's policies (`PolicySet.copiedForWorker`), so that what a decision retains
    /// is not written from every core. A PDP that holds no policies answers itself.
    func forWorker(policies: PolicySet) -> PolicyDecisionPoint
}

extension PolicyDecisionPoint {
    public func cacheKey(for subject: Subject) -> SubjectKey { SubjectKey(id: subject.uid, journeys: subject.journeys) }
    public func forWorker(policies: PolicySet) -> PolicyDecisionPoint { self }
}

/// Who a cached decision is for (`PolicyDecisionPoint.cacheKey`): a user and the journeys their
/// session has done, or a session token.
public struct SubjectKey: Hashable, Sendable {
    public var id: String
    public var journeys: [String]

    public init(id: String, journeys: [String] = []) {
        self.id = id
        self.journeys = journeys
    }
}
