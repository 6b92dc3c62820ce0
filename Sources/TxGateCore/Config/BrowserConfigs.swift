import Foundation

// The sections of gateway.json about browsers: the login page and cross-origin requests.

/// `loginPage`: how the gateway's login page looks and where a login with no `goto` lands.
public struct LoginPageConfig: ConfigObject, Sendable, Equatable {
    /// The site's name, above the heading and in the page's title, so that people know where
    /// they sign in; none by default.
    public var title: String?
    /// An SVG or PNG shown above the heading, embedded in the page (no external asset).
    public var logoFile: String?
    /// `#rgb` or `#rrggbb`: buttons, links and the approval's amounts.
    public var accentColor = "#2563eb"
    /// A line under the form: who to contact when something goes wrong.
    public var supportText: String?
    /// Where a login or a magic link with no `goto` lands (a path, or a URL on the gateway's origin).
    public var defaultGoto = "/"
    /// The heading of the approval step (a transaction's journey).
    public var approvalTitle = "Approve this request"
    /// The label of a bound field's row on the approval step, by pointer (`{"/payee": "To"}`);
    /// a field not named here is labelled after its pointer (`/amount` → "Amount").
    public var fieldLabels: [String: String] = [:]

    public init() {}

    enum Key: String, ConfigKey {
        case title, logoFile, accentColor, supportText, defaultGoto, approvalTitle, fieldLabels
    }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        title = o.optional(.title)
        logoFile = o.optional(.logoFile)
        accentColor = o.value(.accentColor, default: accentColor)
        supportText = o.optional(.supportText)
        defaultGoto = o.value(.defaultGoto, default: defaultGoto)
        approvalTitle = o.value(.approvalTitle, default: approvalTitle)
        fieldLabels = o.value(.fieldLabels, default: fieldLabels)
        for pointer in fieldLabels.keys.sorted() where !pointer.hasPrefix("/") {
            o.invalid(.fieldLabels, "'\(pointer)' is not a JSON pointer such as /amount")
        }
        let hex = accentColor.dropFirst()
        if !accentColor.hasPrefix("#") || ![3, 6].contains(hex.count) || !hex.allSatisfy(\.isHexDigit) {
            o.invalid(.accentColor, "'\(accentColor)' is not a color in the form #rgb or #rrggbb")
        }
        if let logoFile, !(logoFile.hasSuffix(".svg") || logoFile.hasSuffix(".png")) {
            o.invalid(.logoFile, "'\(logoFile)' must be an .svg or .png file")
        }
        for (key, text) in [(Key.title, title ?? "-"), (.approvalTitle, approvalTitle)] where text.isEmpty || text.count > 80 {
            o.invalid(key, "must be 1 to 80 characters")
        }
    }

    /// The logo's media type, from its file name.
    public var logoMediaType: String? {
        logoFile.map { $0.hasSuffix(".svg") ? "image/svg+xml" : "image/png" }
    }
}

/// `cors`: which other origins' scripts may call the gateway (the authentication API and the
/// proxied routes) and read the answers, including the `WWW-Authenticate` challenge.
public struct CORSConfig: ConfigObject, Sendable, Equatable {
    /// Exact origins (`https://app.example.com`); no wildcard, since credentials may be sent.
    public var allowedOrigins: [String] = []
    /// `Access-Control-Allow-Credentials: true`: the browser sends the session cookie.
    public var allowCredentials = false
    /// How long a browser may keep a preflight's answer.
    public var maxAgeS = 600

    public init() {}

    public init(allowedOrigins: [String], allowCredentials: Bool = false, maxAgeS: Int = 600) {
        self.allowedOrigins = allowedOrigins
        self.allowCredentials = allowCredentials
        self.maxAgeS = maxAgeS
    }

    enum Key: String, ConfigKey {
        case allowedOrigins, allowCredentials, maxAgeS
    }

    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, keys: Key.self)
        allowedOrigins = o.value(.allowedOrigins, default: allowedOrigins)
        allowCredentials = o.value(.allowCredentials, default: allowCredentials)
        maxAgeS = o.int(.maxAgeS, default: maxAgeS, atLeast: 0)
        for (i, origin) in allowedOrigins.enumerated() where Self.normalized(origin) != origin {
            o.invalid(.allowedOrigins, index: i, "'\(origin)' is not an origin: scheme://host[:port], lowercase, no path, no '*'")
        }
    }

    /// The origin as a browser sends it in `Origin`, or nil when `s` is not one.
    static func normalized(_ s: String) -> String? {
        guard let u = HTTPURL(parsing: s), u.basePath.isEmpty || u.basePath == "/", !s.hasSuffix("/") else { return nil }
        return u.origin == s ? s : nil
    }

    /// Whether a request's `Origin` may read the answer.
    public func allows(_ origin: String) -> Bool { allowedOrigins.contains(origin) }
}
