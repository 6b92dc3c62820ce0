import Foundation

/// What a node sees besides the state.
public struct JourneyContext {
    public let services: JourneyServices
    /// Text describing what is being approved (a transaction's `display`), if any.
    public let display: String?
    /// The gateway's public base URL, for links in emails.
    public let publicURL: String
    /// The client address of the request that runs this step.
    public let source: String
    /// The store key of the live session the journey runs in (step-up, approval), if any.
    public let session: String?
    /// Where the engine remembers the authIds it signs in this step, for the worker that
    /// reads their answers (`IssuedAuthIds`); nil: remembered nowhere.
    public let issued: IssuedAuthIds?

    public init(services: JourneyServices, display: String? = nil, publicURL: String = "", source: String = "",
                session: String? = nil, issued: IssuedAuthIds? = nil) {
        self.services = services
        self.display = display
        self.publicURL = publicURL
        self.source = source
        self.session = session
        self.issued = issued
    }

    /// Whom an attempt on `user`'s account in this step counts against.
    public func attempter(_ user: String) -> Attempter { Attempter(user: user, source: source, session: session) }
}

extension JourneyContext {
    /// A page asking for a one-time code, after what is being approved when there is one.
    func codePage(_ prompt: String) -> [Callback] {
        (display.map { [Callback.text($0)] } ?? []) + [.password(prompt)]
    }
}

/// Whom an attempt counts against: the account it names, the client address it comes from,
/// and the live session it runs in, if any. Outside a session, a source is locked after a few
/// failures and an account (distributed guessing) only after many; inside one (a step-up or a
/// transaction's approval), failures count against that session alone, so that nobody else's
/// failures can keep a logged-in user from approving.
public struct Attempter: Equatable, Sendable {
    public var user: String
    public var source: String
    /// The store key of the session the journey runs in.
    public var session: String?

    public init(user: String, source: String, session: String? = nil) {
        self.user = user
        self.source = source
        self.session = session
    }

    /// Whether `source` names one client: not `TrustedProxies.unknownClient` (every client a
    /// proxy cannot name shares that, so counting it would let one of them lock out all).
    public var hasKnownSource: Bool { source != TrustedProxies.unknownClient }
}
