/// `webauthn`: the relying party that passkeys are made for, and what the passkey nodes
/// (`WebAuthnRegistration`, `WebAuthnAuthentication`) require of them (docs/WEBAUTHN.md).
public struct WebAuthnConfig: ConfigObject, Sendable, Equatable {
    /// WebAuthn's `userVerification`: whether the authenticator must verify the person (PIN,
    /// fingerprint), or only see that someone is there.
    public enum UserVerification: String, Codable, Sendable, CaseIterable {
        case required, preferred, discouraged
    }

    /// The relying party ID: the gateway's registrable domain (`bank.example`). A passkey works
    /// only under this domain. nil: the host of `publicUrl`.
    public var rpId: String?
    /// The name authenticators show beside the passkey.
    public var rpName = "TxGate"
    /// The exact origins (`https://bank.example`) whose pages may use the passkeys. Empty: the
    /// origin of `publicUrl` alone.
    public var origins: [String] = []
    public var userVerification = UserVerification.preferred
    /// Refuse a registration whose attestation TxGate cannot verify (`packed` self attestation
    /// is the only one it verifies). False: `none`, and formats TxGate does not verify, are
    /// accepted as `none` (nothing is claimed about the authenticator).
    public var requireAttestation = false
    /// How long the person has for the authenticator's prompt.
    public var timeoutMs = 120_000
    /// The most passkeys one user may have.
    public var maxPerUser = 10
    /// The signature algorithms a new passkey may use, in order of preference (`pubKeyCredParams`):
    /// `ES256`, `RS256` (AM's two, the default) and `EdDSA`. The iOS SDK refuses a registration
    /// step that lists EdDSA.
    public var algorithms: [COSEAlgorithm] = [.es256, .rs256]
    /// Secure Payment Confirmation: a transaction that binds an amount and a currency is
    /// approved in the browser's own payment dialog where the browser has one; nil: plain WebAuthn.
    public var securePaymentConfirmation: SecurePaymentConfirmationConfig?

    public init() {}

    enum Key: String, ConfigKey {
        case rpId, rpName, origins, userVerification, requireAttestation, timeoutMs, maxPerUser, algorithms, securePaymentConfirmation
    }

    static let algorithmNames: [String: COSEAlgorithm] = ["ES256": .es256, "EdDSA": .eddsa, "RS256": .rs256]

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        rpId = o.optional(.rpId)
        rpName = o.value(.rpName, default: rpName)
        origins = o.value(.origins, default: origins)
        userVerification = o.value(.userVerification, default: userVerification)
        requireAttestation = o.value(.requireAttestation, default: requireAttestation)
        timeoutMs = o.int(.timeoutMs, default: timeoutMs, atLeast: 10_000)
        maxPerUser = o.int(.maxPerUser, default: maxPerUser, atLeast: 1)
        if let names: [String] = o.optional(.algorithms) {
            algorithms = []
            for (i, name) in names.enumerated() {
                guard let alg = Self.algorithmNames[name] else {
                    o.invalid(.algorithms, index: i, "'\(name)' is not ES256, RS256 or EdDSA")
                    continue
                }
                if !algorithms.contains(alg) { algorithms.append(alg) }
            }
            if names.isEmpty { o.invalid(.algorithms, "needs at least one of ES256, RS256, EdDSA") }
        }
        if let rpId, !Self.isDomain(rpId) {
            o.invalid(.rpId, "'\(rpId)' is not a domain name (such as bank.example, or localhost): no scheme, port or path")
        }
        securePaymentConfirmation = o.optional(.securePaymentConfirmation)
        if rpName.isEmpty || rpName.count > 64 { o.invalid(.rpName, "must be 1 to 64 characters") }
        for (i, origin) in origins.enumerated() {
            guard let u = HTTPURL(parsing: origin), u.basePath.isEmpty, !origin.hasSuffix("/") else {
                o.invalid(.origins, index: i, "'\(origin)' is not an origin such as https://bank.example (scheme, host, port; no path)")
                continue
            }
            if let rpId, !Self.host(u.host, isWithin: rpId) {
                o.invalid(.origins, index: i, "'\(origin)' is not on rpId '\(rpId)' or one of its subdomains")
            }
        }
    }

    /// Letters, digits, '-' and '.' labels: what an RP ID can be (an IP address cannot).
    static func isDomain(_ s: String) -> Bool {
        !s.isEmpty && s.count <= 253 && s.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { label in
            !label.isEmpty && label.count <= 63 && label.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
                && !label.hasPrefix("-") && !label.hasSuffix("-")
        } && !s.allSatisfy { $0.isNumber || $0 == "." }
    }

    /// Whether `host` is `rpId` or a subdomain of it (WebAuthn §5.1.3 and §5.1.4.1).
    static func host(_ host: String, isWithin rpId: String) -> Bool {
        let h = host.lowercased(), r = rpId.lowercased()
        return h == r || h.hasSuffix("." + r)
    }

    /// The relying party as the verifier needs it, with the defaults taken from `publicURL`;
    /// nil when no RP ID can be had (`publicUrl` names an IP address and `rpId` is not set).
    public func relyingParty(publicURL: HTTPURL) -> WebAuthn.RelyingParty? {
        let id = rpId ?? publicURL.host.lowercased()
        guard Self.isDomain(id) else { return nil }
        // Browsers write an origin's scheme and host in lower case.
        return WebAuthn.RelyingParty(id: id, origins: (origins.isEmpty ? [publicURL.origin] : origins.compactMap { HTTPURL(parsing: $0)?.origin })
            .map { $0.lowercased() })
    }
}

/// `webauthn.securePaymentConfirmation`: which bound fields are the payment's amount, currency
/// and payee, and the name the browser's dialog gives the instrument (W3C Secure Payment
/// Confirmation). The dialog shows them, and the assertion's clientDataJSON carries them, so the
/// gateway checks each against the transaction.
public struct SecurePaymentConfirmationConfig: ConfigObject, Sendable, Equatable {
    /// JSON pointers into the bound fields.
    public var amount = "/amount"
    public var currency = "/currency"
    public var payee: String?
    public var instrumentName = "Account"

    public init() {}

    enum Key: String, ConfigKey { case amount, currency, payee, instrumentName }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        amount = o.value(.amount, default: amount)
        currency = o.value(.currency, default: currency)
        payee = o.optional(.payee)
        instrumentName = o.value(.instrumentName, default: instrumentName)
        for (key, pointer) in [(Key.amount, amount), (.currency, currency), (.payee, payee ?? "/")] where !pointer.hasPrefix("/") {
            o.invalid(key, "'\(pointer)' is not a JSON pointer such as /amount")
        }
        if instrumentName.isEmpty || instrumentName.count > 64 { o.invalid(.instrumentName, "must be 1 to 64 characters") }
    }

    /// What the dialog must show for `tx`, when it binds an amount and a currency (a payment).
    public func expectation(_ tx: TransactionRecord) -> WebAuthn.PaymentExpectation? {
        guard let value = tx.bound[amount]?.displayText, let cur = tx.bound[currency]?.stringValue else { return nil }
        return WebAuthn.PaymentExpectation(currency: cur, value: value, payeeName: payee.flatMap { tx.bound[$0]?.displayText },
                                           instrumentName: instrumentName)
    }
}
