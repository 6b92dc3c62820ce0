import Foundation
import Testing
import TxGateCore

/// Magic links (WIRE.md §5) as a client runs them: the EmailSuspend journeys, the link read
/// from the outbox, its resume, and AM's exact answers. The suites that send links adopt it.
public protocol MagicLinkClient: JourneyClient {}

extension MagicLinkClient {
    public static var password: String { MagicLinkHash.password }
    public static var hash: String { MagicLinkHash.hash }
    public static var validatePath: String { "/am/json/realms/root/sessions?_action=validate" }
    public static var magicStart: String { authPath + "?authIndexType=service&authIndexValue=MagicLink" }

    public static var suspendedMessage: String { "An email has been sent to your email address. Click the link in that email to proceed." }
    /// AM's exact answer to an unknown, expired or used suspendedId (WIRE.md §5).
    public static var notFound: String { #"{"code":401,"reason":"Unauthorized","message":"org.forgerock.openam.auth.nodes.framework.token.SuspendedAuthSessionException: Token not found. It may have expired."}"# }
    public static var loginFailure: String { #"{"code":401,"reason":"Unauthorized","message":"Login failure","detail":{"failureUrl":""}}"# }

    /// The suspended step, byte for byte (WIRE.md §5's callback, with AM's `_id`).
    public static func suspendedBody(_ authId: String) -> String {
        #"{"authId":"\#(authId)","callbacks":[{"type":"SuspendedTextOutputCallback","output":[{"name":"message","value":"\#(suspendedMessage)"},{"name":"messageType","value":"0"}],"_id":0}]}"#
    }

    /// Users (demo and other have addresses, noemail has none), the magic-link journeys, a
    /// password Login, the EmailConfirm journey and demo-bank's policies; `publicUrl` is the
    /// gateway's real URL. `email` is the delivery (outbox or smtp).
    public static func config(_ baseURL: String, email: [String: Any] = ["outbox": "var/outbox"], suspendTtlS: Int = 300,
                       _ extra: [String: Any] = [:]) -> [String: Any] {
        deepMerge([
            "publicUrl": baseURL,
            "users": [
                ["username": "demo", "passwordHash": hash, "email": "demo@example.com"],
                ["username": "other", "passwordHash": hash, "email": "other@example.com"],
                ["username": "noemail", "passwordHash": hash],
            ],
            "loginJourney": "Login",
            "journeys": [
                "Login": [["type": "UsernamePassword"]],
                "MagicLink": [["type": "UsernameOnly"], ["type": "EmailSuspend", "suspendTtlS": suspendTtlS]],
                "EmailConfirm": [["type": "EmailOTP"]],
            ],
            "email": email,
            "policies": [
                ["name": "health", "resources": ["/health"], "actions": ["GET"], "subjects": "anyone"],
                ["name": "accounts", "resources": ["/accounts", "/accounts/*"], "actions": ["GET"], "subjects": "authenticated"],
                ["name": "transfer", "resources": ["/transfer"], "actions": ["POST"], "subjects": "authenticated",
                 "transaction": ["journey": "EmailConfirm",
                                 "bind": ["body": ["/amount", "/currency", "/payee"]],
                                 "display": "Approve {amount} {currency} to {payee}?"]],
            ],
        ], extra)
    }

    /// Starts the MagicLink journey (optionally with `query` appended) and answers its
    /// NameCallback with `user`; returns the answer to that (the suspended step, normally).
    public static func requestLink(_ g: some GatewayUnderTest, user: String, journey: String = "MagicLink", query: String = "",
                            source: String? = nil, timeout: Double = 10) throws -> HTTPResponse {
        let start = try post(g, authPath + "?authIndexType=service&authIndexValue=\(journey)" + query, nil, source: source)
        guard start.status == 200, callbacks(start).map({ $0["type"] as? String }) == ["NameCallback"] else {
            throw HarnessError("the \(journey) journey did not start with a NameCallback:\n\(start)")
        }
        return try post(g, authPath, TransactionKit.answer(try start.json(), [user]), source: source, timeout: timeout)
    }

    /// The authId of a suspended step, after checking the step byte for byte.
    @discardableResult
    public static func expectSuspended(_ r: HTTPResponse, sourceLocation: SourceLocation = #_sourceLocation) -> String? {
        #expect(r.status == 200, "the suspend step:\n\(r)", sourceLocation: sourceLocation)
        #expect(r.header("Content-Type")?.lowercased().hasPrefix("application/json") == true, "\(r.headerSummary)",
                sourceLocation: sourceLocation)
        guard let authId = (try? r.json())?["authId"] as? String else {
            Issue.record("no authId in the suspend step:\n\(r)", sourceLocation: sourceLocation)
            return nil
        }
        #expect(r.bodyText == suspendedBody(authId), "the suspend step is not WIRE.md §5's:\n\(r.bodyText)",
                sourceLocation: sourceLocation)
        #expect(!r.hasHeader("Set-Cookie"), "a suspended journey set a cookie:\n\(r.headerSummary)", sourceLocation: sourceLocation)
        return authId
    }

    public static func resume(_ g: some GatewayUnderTest, _ id: String) throws -> HTTPResponse {
        try post(g, authPath + "?suspendedId=\(id)", nil)
    }

    public static func expectNotFound(_ r: HTTPResponse, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(r.status == 401, "\(what):\n\(r)", sourceLocation: sourceLocation)
        #expect(r.bodyText == notFound, "\(what): not AM's exact SuspendedAuthSessionException body:\n\(r.bodyText)",
                sourceLocation: sourceLocation)
        #expect(r.header("Content-Type")?.lowercased().hasPrefix("application/json") == true, "\(what): \(r.headerSummary)",
                sourceLocation: sourceLocation)
        #expect(!r.hasHeader("Set-Cookie"), "\(what) set a cookie:\n\(r.headerSummary)", sourceLocation: sourceLocation)
    }

    /// Checks a successful resume (200, tokenId, the session cookie) and returns the token.
    public static func expectSignedIn(_ r: HTTPResponse, successUrl: String = "/",
                               sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        #expect(r.status == 200, "the resume:\n\(r)", sourceLocation: sourceLocation)
        let body = try r.json()
        let token = try #require(body["tokenId"] as? String, "no tokenId in the resume answer:\n\(r)", sourceLocation: sourceLocation)
        #expect(token.count >= 22, sourceLocation: sourceLocation)
        #expect(body["successUrl"] as? String == successUrl, "\(body)", sourceLocation: sourceLocation)
        #expect(body["realm"] as? String == "/", "\(body)", sourceLocation: sourceLocation)
        #expect(body["authId"] == nil && body["callbacks"] == nil, "\(body)", sourceLocation: sourceLocation)
        let cookie = r.header("Set-Cookie") ?? ""
        #expect(cookie.hasPrefix("iPlanetDirectoryPro=\(token);"), "Set-Cookie: '\(cookie)'", sourceLocation: sourceLocation)
        #expect(cookie.contains("HttpOnly"), "Set-Cookie: '\(cookie)'", sourceLocation: sourceLocation)
        return token
    }

    public static func expectSession(_ g: some GatewayUnderTest, _ token: String, uid: String,
                              sourceLocation: SourceLocation = #_sourceLocation) throws {
        let v = try post(g, validatePath, nil, headers: [("iPlanetDirectoryPro", token)])
        #expect(v.status == 200, "\(v)", sourceLocation: sourceLocation)
        #expect(try v.json()["valid"] as? Bool == true, "validate: \(v.bodyText)", sourceLocation: sourceLocation)
        #expect(try v.json()["uid"] as? String == uid, "validate: \(v.bodyText)", sourceLocation: sourceLocation)
    }

    /// Where `config`'s outbox is, in the gateway's folder.
    public static func outbox(_ bed: Testbed) -> URL { outbox(bed.dir.url) }
    public static func outbox(_ folder: URL) -> URL { folder.appendingPathComponent("var/outbox") }

    /// A well-formed suspendedId that was never issued (256 random bits, base64url).
    public static func randomId() -> String { TransactionKit.base64url(randomBytes(32)) }
}

/// The users' password, and its hash computed once (scrypt is slow on purpose).
private enum MagicLinkHash {
    static let password = "M4gic-L1nk-Pass!"
    static let hash = PasswordHash.hash(password)
}
