import Foundation

/// AM's failure answer: `{"code":401,"reason":"Unauthorized","message":"Login failure","detail":{...}}`.
public struct AuthFailure: Error, Equatable, Sendable, CustomStringConvertible {
    public var code: Int
    public var reason: String
    public var message: String
    /// `detail.errorCode`: `"110"` when the journey timed out.
    public var errorCode: String?
    public var failureUrl: String?
    /// `detail.reason`: which failure ended a journey run inside a live session (an approval,
    /// a step-up): `wrong_code`, `code_used`, `locked_out`, `declined`; nil for a sign-in.
    public var failureReason: String?

    public init(code: Int, reason: String, message: String, errorCode: String? = nil, failureUrl: String? = nil,
                failureReason: String? = nil) {
        self.code = code
        self.reason = reason
        self.message = message
        self.errorCode = errorCode
        self.failureUrl = failureUrl
        self.failureReason = failureReason
    }

    /// What `failureReason` means, for a person.
    public var explanation: String? {
        switch failureReason {
        case "wrong_code": return "the code is not right"
        case "code_used": return "this code was already used: wait for the next one"
        case "locked_out": return "too many wrong codes: try again later"
        case "declined": return "declined"
        default: return nil
        }
    }

    /// AM's code for a journey whose authId expired (WIRE.md §4).
    public var isTimeout: Bool { errorCode == "110" }
    /// An unknown, expired or used suspendedId (WIRE.md §5): iOS and Android key on the class name.
    public var isSuspendedSessionNotFound: Bool { message.contains("SuspendedAuthSessionException") }

    public var description: String {
        "\(code) \(reason): \(message)" + (errorCode.map { " (errorCode \($0))" } ?? "") + (explanation.map { " (\($0))" } ?? "")
    }
}

public enum TxGateClientError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The resume URI was refused before anything was sent.
    case invalidResumeURI(String)
    /// The suspendedId is unknown, expired or already used.
    case suspendedSessionNotFound(AuthFailure)
    /// The journey ended in a failure (wrong code, timeout: see `AuthFailure.isTimeout`).
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
        }
    }
}
