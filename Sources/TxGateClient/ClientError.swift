import Foundation

/// A journey's failure, as the authentication service answered it.
///
/// AM and TxGate answer a failed journey call with
/// `{"code":401,"reason":"Unauthorized","message":"Login failure","detail":{...}}`. A
/// ``JourneyOutcome/failure(_:)`` carries it, and ``TxGateClient/complete(_:answering:)`` throws
/// it as ``TxGateClientError/journeyFailed(_:)``.
public struct AuthFailure: Error, Equatable, Sendable, CustomStringConvertible {
    /// The HTTP status the failure came with (`code`), e.g. `401`.
    public var code: Int
    /// The status's reason phrase (`reason`), e.g. `Unauthorized`.
    public var reason: String
    /// What failed (`message`), e.g. `Login failure`.
    public var message: String
    /// `detail.errorCode`: `"110"` when the journey timed out.
    public var errorCode: String?
    /// `detail.failureUrl`: where a browser would be sent after the failure, if the journey names a page.
    public var failureUrl: String?
    /// `detail.reason`: which failure ended a journey run inside a live session (an approval,
    /// a step-up): `wrong_code`, `code_used`, `locked_out`, `declined`, `no_passkey`, `denied` or
    /// `expired` (an approval request made elsewhere); nil for a sign-in.
    public var failureReason: String?
    /// `detail.attemptsLeft`: after a failure that counts toward the lockout (a wrong code) inside
    /// a live session, how many more failures are allowed before approvals are locked; `0` when
    /// this one locked them. Nil when the server did not say.
    public var attemptsLeft: Int?
    /// `detail.retryAfterS`: with `locked_out`, or with ``attemptsLeft`` `0`, the longest the
    /// lockout lasts, in seconds.
    public var retryAfterS: Int?

    /// A failure with the fields of AM's answer.
    ///
    /// - Parameters:
    ///   - code: The HTTP status (`code`).
    ///   - reason: The status's reason phrase (`reason`).
    ///   - message: What failed (`message`).
    ///   - errorCode: `detail.errorCode`, `"110"` for a timed-out journey.
    ///   - failureUrl: `detail.failureUrl`.
    ///   - failureReason: `detail.reason`, which failure ended a journey inside a live session.
    ///   - attemptsLeft: `detail.attemptsLeft`, the failures still allowed before the lockout.
    ///   - retryAfterS: `detail.retryAfterS`, the longest a lockout lasts, in seconds.
    public init(code: Int, reason: String, message: String, errorCode: String? = nil, failureUrl: String? = nil,
                failureReason: String? = nil, attemptsLeft: Int? = nil, retryAfterS: Int? = nil) {
        self.code = code
        self.reason = reason
        self.message = message
        self.errorCode = errorCode
        self.failureUrl = failureUrl
        self.failureReason = failureReason
        self.attemptsLeft = attemptsLeft
        self.retryAfterS = retryAfterS
    }

    /// What ``failureReason`` means, for a person, with the attempts left after a wrong code: nil
    /// when it is absent or not one TxGate sends.
    public var explanation: String? {
        switch failureReason {
        case "wrong_code":
            switch attemptsLeft {
            case nil: return "the code is not right"
            case 0?: return "the code is not right, and that was the last attempt: try again later"
            case 1?: return "the code is not right: 1 attempt left"
            case let n?: return "the code is not right: \(n) attempts left"
            }
        case "code_used": return "this code was already used: wait for the next one"
        case "locked_out": return "too many wrong codes: try again later"
        case "declined": return "declined"
        case "denied": return "denied on the other device"
        case "expired": return "not approved in time: the approval request expired"
        default: return nil
        }
    }

    /// Whether the journey timed out: AM's `errorCode` 110, for a journey whose `authId` expired.
    public var isTimeout: Bool { errorCode == "110" }
    /// Whether a resume named an unknown, expired or used `suspendedId`: AM says so with
    /// `SuspendedAuthSessionException` in the message, the class name the iOS and Android SDKs key on.
    public var isSuspendedSessionNotFound: Bool { message.contains("SuspendedAuthSessionException") }

    /// The failure in one line: `401 Unauthorized: Login failure`, then the error code and the
    /// ``explanation`` when there are any.
    public var description: String {
        "\(code) \(reason): \(message)" + (errorCode.map { " (errorCode \($0))" } ?? "") + (explanation.map { " (\($0))" } ?? "")
    }
}

/// Why a call of ``TxGateClient`` did not come to an answer.
///
/// A journey that ran and failed is ``journeyFailed(_:)``, with the server's ``AuthFailure``; an
/// answer that is none of the authentication service's forms is ``unexpectedResponse(status:_:)``;
/// a server that cannot be reached is ``transport(_:)``.
public enum TxGateClientError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The resume URI was refused before anything was sent.
    case invalidResumeURI(String)
    /// The suspendedId is unknown, expired or already used.
    case suspendedSessionNotFound(AuthFailure)
    /// The journey ended in a failure (wrong code, timeout: see ``AuthFailure/isTimeout``).
    case journeyFailed(AuthFailure)
    /// The journey suspended (an email was sent); resume it with the emailed link.
    case journeySuspended(message: String)
    /// A step-up was needed and no delegate (or an unanswerable callback) could run it.
    case challengeNotAnswered(String)
    /// The server answered something that is not AM's format.
    case unexpectedResponse(status: Int, String)
    /// No session: log in first.
    case notLoggedIn
    /// The server could not be reached.
    case transport(String)
    /// The ``ClientConfiguration`` cannot address the authentication service: its `serverURL`
    /// is not an absolute http(s) URL with a host, or its `amPath` is not a path. Nothing was sent.
    case invalidConfiguration(String)

    /// The error in one line, for a person.
    public var description: String {
        switch self {
        case .invalidResumeURI(let why): return "resume URI refused: \(why)"
        case .suspendedSessionNotFound(let f): return "the resume link is unknown, expired or already used (\(f.message))"
        case .journeyFailed(let f): return f.isTimeout ? "the journey timed out (\(f))" : "the journey failed: \(f)"
        case .journeySuspended(let m): return "the journey is suspended: \(m)"
        case .challengeNotAnswered(let why): return "step-up not answered: \(why)"
        case .unexpectedResponse(let status, let what): return "unexpected answer (HTTP \(status)): \(what)"
        case .notLoggedIn: return "not logged in"
        case .transport(let why): return "cannot reach the server: \(why)"
        case .invalidConfiguration(let why): return "the client's configuration is not usable: \(why)"
        }
    }
}
