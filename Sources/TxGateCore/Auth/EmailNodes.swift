import Foundation
import TxGateCrypto

/// The user a journey is about: proven (`username`), or only claimed so far (`claimedUser`,
/// from UsernameOnly) until an email step proves the user holds the mailbox.
extension JourneyState {
    static let claimedUserKey = "claimedUser"
    /// The store key of the session a step-up journey adds itself to (an authId is signed,
    /// not encrypted: never the token).
    public static let stepUpSessionKey = "stepUpSession"
    /// The store key of the session whose user approves a transaction.
    public static let approvalSessionKey = "approvalSession"
    var subjectUser: String? { username ?? shared[Self.claimedUserKey] }
}

/// NameCallback only, for passwordless journeys. The name is a claim, not an identity:
/// an email step afterwards proves it. Unknown names go on the same way (no enumeration).
struct UsernameOnlyNode: JourneyNode {
    let prompt: String

    init(_ s: [String: JSONValue], _ path: String) throws(NodeConfigError) {
        let n = try NodeSettings(s, path, known: ["prompt"])
        prompt = try n.string("prompt", default: "User Name")
    }

    func callbacks(_ state: JourneyState, _ context: JourneyContext) -> [Callback] { [.name(prompt)] }

    func process(_ submitted: [SubmittedCallback], _ state: JourneyState, _ context: JourneyContext,
                 _ done: @escaping (NodeOutcome) -> Void) {
        let name = (submitted[0].text ?? "").trimmingWhitespaces()
        guard !name.isEmpty else { done(.failure(reason: "empty username")); return }
        var next = state
        next.shared[JourneyState.claimedUserKey] = name
        done(.next(next))
    }
}

/// Emails a link that resumes the journey (a magic link), then suspends it. Everything
/// collected so far is saved under the link's id, which has 256 random bits and is stored
/// only as its hash; the link works once.
struct EmailSuspendNode: JourneyNode {
    /// What `subject` and `body` may name (what `enter` fills in).
    static let subjectVariables = ["username"]
    static let bodyVariables = ["link", "username", "display"]
    static let defaultMessage = "An email has been sent to your email address. Click the link in that email to proceed."
    let message: String
    let subject: String
    let body: String
    let resumeUrl: String?
    let suspendTtlS: Int

    init(_ s: [String: JSONValue], _ path: String) throws(NodeConfigError) {
        let n = try NodeSettings(s, path, known: ["message", "subject", "body", "resumeUrl", "suspendTtlS"])
        message = try n.string("message", default: Self.defaultMessage)
        subject = try n.template("subject", variables: Self.subjectVariables, default: "Your sign-in link")
        body = try n.template("body", variables: Self.bodyVariables, default: "Hello {username},\n\n{display}Click this link to continue signing in:\n\n{link}\n\nIt works once and expires soon. If you did not ask for it, ignore this email.\n")
        let r = try n.string("resumeUrl", default: "")
        resumeUrl = r.isEmpty ? nil : r
        suspendTtlS = try n.int("suspendTtlS", default: 300)
    }

    func enter(_ state: JourneyState, _ context: JourneyContext, _ done: @escaping (EntryOutcome) -> Void) {
        let services = context.services
        // Unknown user, no address, locked out or over the email limit: the same answer as
        // for anyone else, and nothing sent, so the answer tells nothing about the account.
        guard let name = state.subjectUser, let user = services.user(named: name), let email = user.email else {
            done(.suspend(message: message))
            return
        }
        services.mayEmail(context.attempter(name), done, silently: .suspend(message: message)) {
            let id = Base64URL.encode(Crypto.randomBytes(32))
            var saved = state
            saved.node += 1
            saved.username = name  // holding the link proves the mailbox
            saved.shared[JourneyState.claimedUserKey] = nil
            let value = (try? JSONEncoder().encode(saved)).map { [UInt8]($0) } ?? []
            let key = SuspendedJourney.storeKey(id, realm: state.realm)
            services.save(key, value, ttlS: suspendTtlS) { r in
                if case .failure(let e) = r { done(.unavailable(e.description)); return }
                let base = resumeUrl ?? context.publicURL + "/am/XUI/"
                let link = base + (base.contains("?") ? "&" : "?") + "realm=" + state.realm + "&suspendedId=" + id
                let text = EmailTemplate.render(body, ["link": link, "username": name, "display": context.display.map { $0 + "\n\n" } ?? ""])
                services.sendEmail(OutgoingEmail(to: email, subject: EmailTemplate.render(subject, ["username": name]), body: text)) { sent in
                    switch sent {
                    case .success: done(.suspend(message: message))
                    case .failure:
                        // The link was never delivered: it must not stay usable.
                        services.take(key) { _ in
                            done(.error("The email could not be sent. Try again later."))
                        }
                    }
                }
            }
        }
    }

    func callbacks(_ state: JourneyState, _ context: JourneyContext) -> [Callback] { [.suspended(message)] }

    func process(_ submitted: [SubmittedCallback], _ state: JourneyState, _ context: JourneyContext,
                 _ done: @escaping (NodeOutcome) -> Void) {
        done(.failure(reason: "the journey is suspended: it continues from the emailed link"))
    }
}

/// Emails a 6-digit code (single use, `ttlS`) and asks for it. Failures count toward the
/// lockout like a wrong password.
struct EmailOTPNode: JourneyNode {
    let prompt: String
    let subject: String
    let body: String
    let ttlS: Int
    static let refKey = "emailOtpRef"
    /// What `subject` and `body` may name (what `enter` fills in).
    static let subjectVariables = ["username"]
    static let bodyVariables = ["code", "username", "display"]

    init(_ s: [String: JSONValue], _ path: String) throws(NodeConfigError) {
        let n = try NodeSettings(s, path, known: ["prompt", "subject", "body", "ttlS"])
        prompt = try n.string("prompt", default: "One Time Password")
        subject = try n.template("subject", variables: Self.subjectVariables, default: "Your one-time code")
        body = try n.template("body", variables: Self.bodyVariables, default: "Hello {username},\n\n{display}Your one-time code is {code}. It works once, for a few minutes.\n\nIf you did not ask for it, ignore this email.\n")
        ttlS = try n.int("ttlS", default: 300)
    }

    static func key(_ ref: String) -> String { "emailotp:" + ref }

    /// What the store keeps of a code: its keyed hash, bound to this journey's reference.
    static func digest(_ code: [UInt8], ref: String, _ services: JourneyServices) -> [UInt8] {
        services.keyedDigest(Array((ref + ":").utf8) + code)
    }

    /// A uniformly random 6-digit code.
    static func newCode() -> String {
        while true {
            let b = Crypto.randomBytes(4)
            let n = b.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            if n < 4_294_000_000 { return String(n % 1_000_000).leftPadded(to: 6) }
        }
    }

    func enter(_ state: JourneyState, _ context: JourneyContext, _ done: @escaping (EntryOutcome) -> Void) {
        let services = context.services
        var next = state
        let ref = Base64URL.encode(Crypto.randomBytes(16))
        next.shared[Self.refKey] = ref
        guard let name = state.subjectUser, let user = services.user(named: name), let email = user.email else {
            done(.show(next))  // same page; no code exists, so any answer fails
            return
        }
        // Same page either way; over the limit or locked out, no code exists, so no answer passes.
        services.mayEmail(context.attempter(name), done, silently: .show(next)) {
            let code = Self.newCode()
            services.save(Self.key(ref), Self.digest(Array(code.utf8), ref: ref, services), ttlS: ttlS) { r in
                if case .failure(let e) = r { done(.unavailable(e.description)); return }
                let text = EmailTemplate.render(body, ["code": code, "username": name, "display": context.display.map { $0 + "\n\n" } ?? ""])
                services.sendEmail(OutgoingEmail(to: email, subject: EmailTemplate.render(subject, ["username": name]), body: text)) { sent in
                    switch sent {
                    case .success: done(.show(next))
                    case .failure:
                        services.take(Self.key(ref)) { _ in done(.error("The email could not be sent. Try again later.")) }
                    }
                }
            }
        }
    }

    func callbacks(_ state: JourneyState, _ context: JourneyContext) -> [Callback] { context.codePage(prompt) }

    func process(_ submitted: [SubmittedCallback], _ state: JourneyState, _ context: JourneyContext,
                 _ done: @escaping (NodeOutcome) -> Void) {
        let services = context.services
        guard let name = state.subjectUser, let ref = state.shared[Self.refKey] else {
            done(.failure(reason: "no code was sent in this journey"))
            return
        }
        let answer = Array((submitted.last?.text ?? "").trimmingWhitespaces().utf8)
        services.unlessLockedOut(context.attempter(name), done) {
            // Taken either way: a code gets one answer.
            services.take(Self.key(ref)) { r in
                switch r {
                case .failure(let e): done(.unavailable(e.description))
                case .success(let code?) where Crypto.constantTimeEquals(code, Self.digest(answer, ref: ref, services)):
                    var next = state
                    next.username = name
                    next.shared[JourneyState.claimedUserKey] = nil
                    next.shared[Self.refKey] = nil
                    done(.next(next))
                case .success:
                    services.failAttempt(context.attempter(name), reason: "wrong or expired email code", kind: .wrongCode, done)
                }
            }
        }
    }
}

/// Where a suspended journey waits: under the hash of its id and realm, never the id itself.
/// A link tried in another realm finds nothing there, and is not used up by the attempt.
public enum SuspendedJourney {
    public static func storeKey(_ suspendedId: String, realm: String) -> String {
        "suspended:" + Crypto.hex(Crypto.sha256(Array((realm + "|" + suspendedId).utf8)))
    }
}

extension JourneyServices {
    /// Runs `send` if `user` may be emailed now; otherwise (locked out, or over the email
    /// limit) answers `silently`, exactly what an unknown user would get.
    func mayEmail(_ who: Attempter, _ done: @escaping (EntryOutcome) -> Void, silently: EntryOutcome,
                  send: @escaping () -> Void) {
        isLockedOut(who) { locked in
            switch locked {
            case .failure(let e): done(.unavailable(e.description))
            case .success(true): done(silently)
            case .success(false):
                self.allowEmail(to: who.user, requestedBy: who) { allowed in
                    switch allowed {
                    case .failure(let e): done(.unavailable(e.description))
                    case .success(false): done(silently)
                    case .success(true): send()
                    }
                }
            }
        }
    }
}
