import Foundation
import TxGateCrypto

/// What the passkey nodes need besides the other journey services: the users' passkeys, the
/// relying party, and the transaction a journey approves.
public struct PasskeyServices: Sendable {
    public let passkeys: PasskeyStore
    public let relyingParty: WebAuthn.RelyingParty
    public let config: WebAuthnConfig

    public init(passkeys: PasskeyStore, relyingParty: WebAuthn.RelyingParty, config: WebAuthnConfig) {
        self.passkeys = passkeys
        self.relyingParty = relyingParty
        self.config = config
    }

    /// The transaction `txid` as stored, nil if absent or unreadable.
    func transaction(_ txid: String, _ done: @escaping (StoreResult<TransactionRecord?>) -> Void) {
        passkeys.store.get(TransactionRecord.key(txid), on: passkeys.executor) { r in done(r.map { $0.flatMap(TransactionRecord.decode) }) }
    }
}

extension JourneyServices {
    /// nil where `webauthn` is not configured (and in services that have no store).
    public var passkeyServices: PasskeyServices? { nil }
}

/// The pending ceremony of a passkey step, kept in the store (once: a challenge answers one
/// assertion or registration) under `key(id)`, the id in the step's signed state. For a
/// transaction it holds the nonce and the approved bytes the challenge was derived from.
struct PasskeyChallenge {
    static let keyPrefix = "webauthn:challenge:"
    static func key(_ id: String) -> String { keyPrefix + id }

    enum Purpose: String { case create, get }

    var purpose: Purpose
    var challenge: [UInt8]
    var username: String?
    var txid: String?
    var nonce: [UInt8]?
    var approved: [UInt8]?
    /// What a Secure Payment Confirmation dialog must show (a payment-shaped transaction).
    var payment: WebAuthn.PaymentExpectation?

    var encoded: [UInt8] {
        var o: [String: JSONValue] = ["purpose": .string(purpose.rawValue), "challenge": .string(Base64URL.encode(challenge))]
        if let username { o["user"] = .string(username) }
        if let txid { o["txid"] = .string(txid) }
        if let nonce { o["nonce"] = .string(Base64URL.encode(nonce)) }
        if let approved { o["approved"] = .string(Base64URL.encode(approved)) }
        if let payment { o["payment"] = payment.json }
        return JSONValue.object(o).canonicalBytes
    }

    init(purpose: Purpose, challenge: [UInt8], username: String?, txid: String? = nil, nonce: [UInt8]? = nil, approved: [UInt8]? = nil,
         payment: WebAuthn.PaymentExpectation? = nil) {
        self.purpose = purpose
        self.challenge = challenge
        self.username = username
        self.txid = txid
        self.nonce = nonce
        self.approved = approved
        self.payment = payment
    }

    init?(_ bytes: [UInt8]) {
        guard let v = JSONValue.parse(bytes), let p = v["purpose"]?.stringValue.flatMap(Purpose.init(rawValue:)),
              let c = v["challenge"]?.stringValue.flatMap(Base64URL.decode) else { return nil }
        self.init(purpose: p, challenge: c, username: v["user"]?.stringValue, txid: v["txid"]?.stringValue,
                  nonce: v["nonce"]?.stringValue.flatMap(Base64URL.decode), approved: v["approved"]?.stringValue.flatMap(Base64URL.decode),
                  payment: v["payment"].flatMap(WebAuthn.PaymentExpectation.init(json:)))
    }
}

/// What the two passkey nodes share: reading their settings, starting a ceremony, the
/// metadata both callbacks carry (WIRE-EXTENSIONS §11), and reading the outcome.
public enum PasskeyNodes {
    static let types = ["WebAuthnRegistration", "WebAuthnAuthentication"]
    static let outcomeId = "webAuthnOutcome"
    /// State keys (the step's signed authId).
    static let challengeIdKey = "webauthn.id", challengeKey = "webauthn.challenge", credentialsKey = "webauthn.credentials"
    /// The Secure Payment Confirmation data the page shows in the browser's dialog.
    static let paymentKey = "webauthn.payment"
    /// The evidence of a transaction approved with a passkey (`WebAuthn.Evidence`'s JSON), for
    /// the journey's end to keep with the transaction.
    public static let evidenceKey = "webauthn.evidence"

    static func userVerification(_ n: NodeSettings) throws(NodeConfigError) -> WebAuthnConfig.UserVerification? {
        guard n.values["userVerification"] != nil else { return nil }
        let s = try n.string("userVerification", default: "")
        guard let uv = WebAuthnConfig.UserVerification(rawValue: s) else {
            throw NodeConfigError(path: "\(n.path).userVerification", message: "'\(s)' is not required, preferred or discouraged")
        }
        return uv
    }

    /// Saves a new ceremony and answers the state that shows it.
    static func begin(_ ceremony: PasskeyChallenge, credentials: [Passkey], _ state: JourneyState, _ ps: PasskeyServices,
                      _ context: JourneyContext, _ done: @escaping (EntryOutcome) -> Void) {
        let id = Base64URL.encode(Crypto.randomBytes(16))
        context.services.save(PasskeyChallenge.key(id), ceremony.encoded, ttlS: ps.config.timeoutMs / 1000 + 60) { r in
            switch r {
            case .failure(let e): done(.unavailable(e.description))
            case .success:
                var next = state
                next.shared[challengeIdKey] = id
                next.shared[challengeKey] = Base64URL.encode(ceremony.challenge)
                next.shared[credentialsKey] = credentials.map(\.id).joined(separator: ",")
                next.shared[paymentKey] = ceremony.payment?.json.canonical
                done(.show(next))
            }
        }
    }

    /// The step's callbacks: the options in AM's MetadataCallback, and the hidden outcome.
    static func callbacks(_ data: [String: JSONValue]) -> [Callback] {
        [.metadata(.object(data)), .hiddenValue(id: outcomeId)]
    }

    /// The members both ceremonies' metadata carry, in AM's forms and AM 7.1's JSON forms.
    static func common(_ state: JourneyState, _ ps: PasskeyServices, action: String, uv: WebAuthnConfig.UserVerification) -> [String: JSONValue] {
        let challenge = state.shared[challengeKey].flatMap(Base64URL.decode) ?? []
        return [
            "_action": .string(action), "_type": "WebAuthn",
            // Standard base64 with padding: the JavaScript SDK decodes it with atob.
            "challenge": .string(Base64.encode(challenge)),
            "timeout": .string(String(ps.config.timeoutMs)),
            "userVerification": .string(uv.rawValue),
            "_relyingPartyId": .string(ps.relyingParty.id),
            "supportsJsonResponse": true,
        ]
    }

    /// The credential IDs of the step's state.
    static func credentialIds(_ state: JourneyState) -> [[UInt8]] {
        (state.shared[credentialsKey] ?? "").split(separator: ",").compactMap { Base64URL.decode(String($0)) }
    }

    /// AM's two forms of a credential list: the JavaScript one (`allowCredentials: [{ "type":
    /// "public-key", "id": new Int8Array([...]).buffer }]`, which the SDKs' helpers take apart)
    /// and the JSON one, ids as signed bytes.
    static func descriptors(_ ids: [[UInt8]]) -> (script: String, json: JSONValue) {
        let script = ids.map { #"{ "type": "public-key", "id": new Int8Array([\#(WebAuthn.int8String($0))]).buffer }"# }
        let json = JSONValue.array(ids.map { id in
            .object(["type": "public-key", "id": .array(id.map { .number(Int(Int8(bitPattern: $0))) })])
        })
        return (script.isEmpty ? "" : "[" + script.joined(separator: ",") + "]", json)
    }

    /// Takes the step's ceremony from the store (once), or says why there is none.
    static func takeCeremony(_ state: JourneyState, _ purpose: PasskeyChallenge.Purpose, _ context: JourneyContext,
                             _ done: @escaping (NodeOutcome) -> Void, then: @escaping (PasskeyChallenge) -> Void) {
        guard let id = state.shared[challengeIdKey] else { done(.failure(reason: "passkey step without a challenge")); return }
        context.services.take(PasskeyChallenge.key(id)) { r in
            switch r {
            case .failure(let e): done(.unavailable(e.description))
            case .success(nil):
                done(.failure(reason: "passkey challenge already answered or expired (a replay, or too slow)"))
            case .success(let bytes?):
                guard let c = PasskeyChallenge(bytes), c.purpose == purpose, c.username == state.username || c.username == nil,
                      c.txid == state.txid else {
                    done(.failure(reason: "passkey challenge of another step"))
                    return
                }
                then(c)
            }
        }
    }

    /// A client that could not do WebAuthn, or whose outcome cannot be read.
    static func unusable(_ outcome: Result<WebAuthn.Outcome, WebAuthn.OutcomeError>) -> String? {
        switch outcome {
        case .failure(let e): return "passkey outcome not readable: \(e)"
        case .success(.unsupported): return "the client has no WebAuthn"
        case .success(.clientError(let name, let message)): return "the client's WebAuthn call failed: \(name): \(message.prefix(200))"
        case .success: return nil
        }
    }
}

/// AM's "WebAuthn Registration Node": the journey's user (from a session or the steps before)
/// registers a passkey.
struct WebAuthnRegistrationNode: JourneyNode {
    let userVerification: WebAuthnConfig.UserVerification?
    let residentKey: String
    let deviceName: String

    init(_ s: [String: JSONValue], _ path: String) throws(NodeConfigError) {
        let n = try NodeSettings(s, path, known: ["userVerification", "residentKey", "deviceName"])
        userVerification = try PasskeyNodes.userVerification(n)
        residentKey = try n.string("residentKey", default: "preferred")
        guard ["required", "preferred", "discouraged"].contains(residentKey) else {
            throw NodeConfigError(path: "\(path).residentKey", message: "'\(residentKey)' is not required, preferred or discouraged")
        }
        deviceName = try n.string("deviceName", default: "Passkey")
    }

    func uv(_ ps: PasskeyServices) -> WebAuthnConfig.UserVerification { userVerification ?? ps.config.userVerification }

    func enter(_ state: JourneyState, _ context: JourneyContext, _ done: @escaping (EntryOutcome) -> Void) {
        guard let ps = context.services.passkeyServices else { done(.unavailable("webauthn is not configured")); return }
        guard let username = state.username else {
            done(.failure(reason: "passkey registration needs a signed-in user (a session, or the journey's steps before)"))
            return
        }
        ps.passkeys.passkeys(of: username) { r in
            switch r {
            case .failure(let e): done(.unavailable(e.description))
            case .success(let existing):
                let ceremony = PasskeyChallenge(purpose: .create, challenge: Crypto.randomBytes(32), username: username)
                PasskeyNodes.begin(ceremony, credentials: existing, state, ps, context, done)
            }
        }
    }

    func callbacks(_ state: JourneyState, _ context: JourneyContext) -> [Callback] {
        guard let ps = context.services.passkeyServices, let username = state.username else { return [.hiddenValue(id: PasskeyNodes.outcomeId)] }
        var data = PasskeyNodes.common(state, ps, action: "webauthn_registration", uv: uv(ps))
        let handle = PasskeyStore.userHandle(for: username, keyedDigest: context.services.keyedDigest)
        let selection: JSONValue = .object([
            "userVerification": .string(uv(ps).rawValue), "residentKey": .string(residentKey),
            "requireResidentKey": .bool(residentKey == "required"),
        ])
        let params = JSONValue.array(ps.config.algorithms.map { .object(["type": "public-key", "alg": .number($0.rawValue)]) })
        let exclude = PasskeyNodes.descriptors(PasskeyNodes.credentialIds(state))
        data["relyingPartyName"] = .string(ps.config.rpName)
        data["relyingPartyId"] = .string(#"id: "\#(ps.relyingParty.id)","#)
        data["userName"] = .string(username)
        data["displayName"] = .string(username)
        data["userId"] = .string(String(decoding: handle, as: UTF8.self))
        data["attestationPreference"] = .string(ps.config.requireAttestation ? "direct" : "none")
        data["authenticatorSelection"] = .string(selection.canonical)
        data["_authenticatorSelection"] = selection
        data["pubKeyCredParams"] = .string(params.canonical)
        data["_pubKeyCredParams"] = params
        data["excludeCredentials"] = .string(exclude.script)
        data["_excludeCredentials"] = exclude.json
        data["extensions"] = .object([:])
        // Not AM's: the gateway's own page asks for a credential Secure Payment Confirmation can use.
        if ps.config.securePaymentConfirmation != nil { data["_paymentCredential"] = true }
        return PasskeyNodes.callbacks(data)
    }

    func process(_ submitted: [SubmittedCallback], _ state: JourneyState, _ context: JourneyContext,
                 _ done: @escaping (NodeOutcome) -> Void) {
        guard let ps = context.services.passkeyServices, let username = state.username else {
            done(.failure(reason: "passkey registration without a user"))
            return
        }
        let outcome = WebAuthn.parseOutcome(submitted.last?.text ?? "", for: .registration)
        if let why = PasskeyNodes.unusable(outcome) { done(.failure(reason: why)); return }
        guard case .success(.registration(let response, let name)) = outcome else { done(.failure(reason: "not a registration")); return }
        PasskeyNodes.takeCeremony(state, .create, context, done) { ceremony in
            let expecting = WebAuthn.RegistrationExpectation(
                challenge: ceremony.challenge, requireUserVerification: uv(ps) == .required, algorithms: Set(ps.config.algorithms),
                acceptUnverifiedAsNone: true, requireAttestation: ps.config.requireAttestation)
            let credential: WebAuthn.VerifiedCredential
            switch WebAuthn.verifyRegistration(response, expecting: expecting, relyingParty: ps.relyingParty) {
            case .failure(let refusal): done(.failure(reason: "passkey registration refused: \(refusal)")); return
            case .success(let c): credential = c
            }
            let trimmed = (name ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
            let passkey = Passkey(credentialId: credential.id, publicKey: credential.publicKey, signCount: credential.signCount,
                                  backupEligible: credential.flags.contains(.backupEligible),
                                  userHandle: PasskeyStore.userHandle(for: username, keyedDigest: context.services.keyedDigest),
                                  name: trimmed.isEmpty ? deviceName : String(trimmed.prefix(64)), createdS: context.services.now,
                                  attestation: credential.attestation.rawValue)
            ps.passkeys.add(passkey, for: username, limit: ps.config.maxPerUser) { r in
                switch r {
                case .failure(let e): done(.unavailable(e.description))
                case .success(.added): done(.next(state))
                case .success(.alreadyRegistered): done(.failure(reason: "this passkey is registered already"))
                case .success(.tooMany(let limit)): done(.failure(reason: "the user has \(limit) passkeys, the most allowed"))
                }
            }
        }
    }
}

/// AM's "WebAuthn Authentication Node": the person signs the step's challenge with a passkey.
/// In a transaction's journey the challenge commits to what is approved
/// (`WebAuthn.TransactionChallenge`), and the assertion becomes the transaction's evidence.
/// `usernameless`: a first step with no user known; the passkey (discoverable) names the user.
/// `fallback: "TOTP"`: a user with no passkey gets the one-time code page instead, and one with
/// a passkey may choose it (a ConfirmationCallback beside the passkey's callbacks).
struct WebAuthnAuthenticationNode: JourneyNode {
    let userVerification: WebAuthnConfig.UserVerification?
    let usernameless: Bool
    let fallback: TOTPNode?
    /// The state key of a step that went to the fallback.
    static let fallbackMark = "webauthn.fallback"
    static let fallbackOption = "Use a one-time code instead"

    init(_ s: [String: JSONValue], _ path: String) throws(NodeConfigError) {
        let n = try NodeSettings(s, path, known: ["userVerification", "usernameless", "fallback", "fallbackPrompt"])
        userVerification = try PasskeyNodes.userVerification(n)
        switch s["usernameless"] {
        case nil: usernameless = false
        case .bool(let b)?: usernameless = b
        default: throw NodeConfigError(path: "\(path).usernameless", message: "wrong type: expected true or false")
        }
        switch try n.string("fallback", default: "") {
        case "": fallback = nil
        case "TOTP": fallback = try TOTPNode(s["fallbackPrompt"].map { ["prompt": $0] } ?? [:], path)
        case let other: throw NodeConfigError(path: "\(path).fallback", message: "'\(other)' is not a fallback (TOTP)")
        }
        if usernameless, fallback != nil {
            throw NodeConfigError(path: "\(path).fallback", message: "a usernameless step has no user to send a code to")
        }
        if fallback == nil, s["fallbackPrompt"] != nil {
            throw NodeConfigError(path: "\(path).fallbackPrompt", message: "only with fallback")
        }
    }

    /// The state of a step that shows the fallback's page.
    static func toFallback(_ state: JourneyState) -> JourneyState {
        var s = state
        s.shared[fallbackMark] = "1"
        for key in [PasskeyNodes.challengeIdKey, PasskeyNodes.challengeKey, PasskeyNodes.credentialsKey] { s.shared[key] = nil }
        return s
    }

    func uv(_ ps: PasskeyServices) -> WebAuthnConfig.UserVerification { userVerification ?? ps.config.userVerification }

    func enter(_ state: JourneyState, _ context: JourneyContext, _ done: @escaping (EntryOutcome) -> Void) {
        guard let ps = context.services.passkeyServices else { done(.unavailable("webauthn is not configured")); return }
        guard let username = state.username else {
            guard usernameless, state.txid == nil else {
                done(.failure(reason: "passkey sign-in before the user is known (set usernameless, or a step that names the user first)"))
                return
            }
            let ceremony = PasskeyChallenge(purpose: .get, challenge: Crypto.randomBytes(32), username: nil)
            PasskeyNodes.begin(ceremony, credentials: [], state, ps, context, done)
            return
        }
        ps.passkeys.passkeys(of: username) { r in
            switch r {
            case .failure(let e): done(.unavailable(e.description))
            case .success(let list) where list.isEmpty:
                if let fallback {
                    fallback.enter(Self.toFallback(state), context, done)
                } else {
                    done(.failure(reason: "\(username) has no passkey", kind: .noPasskey))
                }
            case .success(let list):
                guard let txid = state.txid else {
                    let ceremony = PasskeyChallenge(purpose: .get, challenge: Crypto.randomBytes(32), username: username)
                    PasskeyNodes.begin(ceremony, credentials: list, state, ps, context, done)
                    return
                }
                ps.transaction(txid) { r in
                    switch r {
                    case .failure(let e): done(.unavailable(e.description))
                    case .success(let tx):
                        guard let tx, tx.approvalRefusal(by: username, realm: state.realm, now: context.services.now) == nil else {
                            done(.failure(reason: "transaction gone before its passkey step"))
                            return
                        }
                        let nonce = Crypto.randomBytes(32), approved = WebAuthn.TransactionChallenge.approved(tx)
                        let ceremony = PasskeyChallenge(purpose: .get, challenge: WebAuthn.TransactionChallenge.challenge(nonce: nonce, approved: approved),
                                                        username: username, txid: txid, nonce: nonce, approved: approved,
                                                        payment: ps.config.securePaymentConfirmation?.expectation(tx))
                        PasskeyNodes.begin(ceremony, credentials: list, state, ps, context, done)
                    }
                }
            }
        }
    }

    func callbacks(_ state: JourneyState, _ context: JourneyContext) -> [Callback] {
        if let fallback, state.shared[Self.fallbackMark] != nil { return fallback.callbacks(state, context) }
        guard let ps = context.services.passkeyServices else { return [.hiddenValue(id: PasskeyNodes.outcomeId)] }
        var data = PasskeyNodes.common(state, ps, action: "webauthn_authentication", uv: uv(ps))
        let allow = PasskeyNodes.descriptors(PasskeyNodes.credentialIds(state))
        data["relyingPartyId"] = .string(#"rpId: "\#(ps.relyingParty.id)","#)
        data["allowCredentials"] = .string(allow.script.isEmpty ? "" : "allowCredentials: " + allow.script)
        data["_allowCredentials"] = allow.json
        // Not AM's: for the gateway's own page (the SDKs ignore it), what the browser's payment
        // dialog (Secure Payment Confirmation) shows.
        if let payment = state.shared[PasskeyNodes.paymentKey].flatMap({ JSONValue.parse(Array($0.utf8)) }) {
            data["_securePaymentConfirmation"] = payment
        }
        // AM's recovery-code choice has this shape: one option, pressed when its input is 0.
        let choice = fallback.map { _ in [Callback.confirmation("", options: [Self.fallbackOption], defaultOption: 1)] } ?? []
        return (context.display.map { [Callback.text($0)] } ?? []) + PasskeyNodes.callbacks(data) + choice
    }

    func process(_ submitted: [SubmittedCallback], _ state: JourneyState, _ context: JourneyContext,
                 _ done: @escaping (NodeOutcome) -> Void) {
        if let fallback {
            if state.shared[Self.fallbackMark] != nil { fallback.process(submitted, state, context, done); return }
            if submitted.last?.type == "ConfirmationCallback", submitted.last?.inputs.first?.intValue == 0 {
                done(.again(Self.toFallback(state)))
                return
            }
        }
        guard let ps = context.services.passkeyServices else { done(.unavailable("webauthn is not configured")); return }
        let hidden = submitted.last { $0.type == "HiddenValueCallback" }
        let outcome = WebAuthn.parseOutcome(hidden?.text ?? "", for: .assertion)
        if let why = PasskeyNodes.unusable(outcome) { done(.failure(reason: why)); return }
        guard case .success(.assertion(let assertion)) = outcome else { done(.failure(reason: "not an assertion")); return }
        PasskeyNodes.takeCeremony(state, .get, context, done) { ceremony in
            ps.passkeys.owner(of: assertion.rawId) { r in
                switch r {
                case .failure(let e): done(.unavailable(e.description))
                case .success(nil): done(.failure(reason: "unknown passkey (no credential with that ID is registered)"))
                case .success(let owner?):
                    if let username = state.username, owner != username {
                        done(.failure(reason: "the passkey is another user's"))
                        return
                    }
                    context.services.unlessLockedOut(context.attempter(owner), done) {
                        verify(assertion, owner: owner, ceremony, state, ps, context, done)
                    }
                }
            }
        }
    }

    private func verify(_ assertion: WebAuthn.AssertionOutcome, owner: String, _ ceremony: PasskeyChallenge, _ state: JourneyState,
                        _ ps: PasskeyServices, _ context: JourneyContext, _ done: @escaping (NodeOutcome) -> Void) {
        let services = context.services
        ps.passkeys.passkeys(of: owner) { r in
            guard case .success(let list) = r else {
                if case .failure(let e) = r { done(.unavailable(e.description)) }
                return
            }
            guard let passkey = list.first(where: { $0.credentialId == assertion.rawId }) else {
                done(.failure(reason: "the passkey was removed"))
                return
            }
            let response = assertion.response(expectingUserHandle: passkey.userHandle)
            let expecting = WebAuthn.AssertionExpectation(challenge: ceremony.challenge, requireUserVerification: uv(ps) == .required,
                                                          payment: ceremony.payment)
            switch WebAuthn.verifyAssertion(response, credential: passkey.record, expecting: expecting, relyingParty: ps.relyingParty) {
            case .failure(let refusal):
                services.failAttempt(context.attempter(owner), reason: "passkey refused (\(refusal.code)): \(refusal)", done)
            case .success(let verified):
                ps.passkeys.recordUse(of: passkey.credentialId, by: owner, signCount: verified.signCount, nowS: services.now) { r in
                    switch r {
                    case .failure(let e): done(.unavailable(e.description))
                    case .success(.gone): done(.failure(reason: "the passkey was removed"))
                    case .success(.counterRegression(let stored, let received)):
                        done(.failure(reason: "passkey refused (counterRegression): \(WebAuthn.Refusal.counterRegression(stored: stored, received: received))"))
                    case .success(.recorded):
                        var next = state
                        next.username = owner
                        if let nonce = ceremony.nonce, let approved = ceremony.approved {
                            let evidence = WebAuthn.Evidence(
                                credentialId: passkey.credentialId, publicKey: passkey.publicKey, rpId: ps.relyingParty.id, nonce: nonce,
                                approved: approved, clientDataJSON: response.clientDataJSON, authenticatorData: response.authenticatorData,
                                signature: response.signature, userHandle: response.userHandle)
                            next.shared[PasskeyNodes.evidenceKey] = evidence.json.canonical
                        }
                        done(.next(next))
                    }
                }
            }
        }
    }
}
