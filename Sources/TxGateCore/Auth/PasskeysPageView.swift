import Foundation

extension LoginPageView {
    /// The first journey (by name) whose first node registers a passkey: the account page's
    /// "Create a passkey".
    public static func passkeyRegistrationJourney(in journeys: [String: [NodeConfig]]) -> String? {
        journeys.keys.sorted().first { journeys[$0]!.first?.type == "WebAuthnRegistration" }
    }

    /// The account page's list of the signed-in user's passkeys (`/am/XUI/passkeys`), branded
    /// like the login page: each with its name, when it was made and last used, and a Remove
    /// button (the script posts it); "Create a passkey" starts `registerJourney`, back here.
    public func passkeysHTML(user: String, passkeys: [Passkey], registerJourney: String?, script: String) -> String {
        let e = MarkupText.escape
        let brand = (logoDataURI.map { "<img class=\"logo\" src=\"\($0)\" alt=\"\">" } ?? "")
            + (config.title.map { "<span>\(e($0))</span>" } ?? "")
        let items = passkeys.map { p in
            """
            <li class="row"><div><strong>\(e(p.name))</strong><br><small>Created \(Self.day(p.createdS))\
            \(p.lastUsedS.map { ", last used \(Self.day($0))" } ?? ", never used")</small></div>\
            <button type="button" class="secondary remove" data-id="\(e(p.id))">Remove</button></li>
            """
        }.joined(separator: "\n")
        let create = registerJourney.map { j in
            let q = "authIndexType=service&authIndexValue=\(j.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? j)&goto=%2Fam%2FXUI%2Fpasskeys"
            return "<p class=\"alt\"><a id=\"create\" href=\"/am/XUI/?\(e(q))\">Create a passkey</a></p>"
        } ?? ""
        return """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
        <title>Your passkeys\(config.title.map { " – " + e($0) } ?? "")</title>
        <style>\(Self.style(accent: config.accentColor))
        ul#passkeys{list-style:none;margin:0;padding:0}ul#passkeys .row{align-items:center}ul#passkeys button{width:auto;margin:0;padding:.4rem .8rem}
        small{color:#52606d}</style></head>
        <body><main>\(brand.isEmpty ? "" : "<div class=\"brand\">\(brand)</div>")<h1 id="heading">Your passkeys</h1>
        <p>Signed in as <strong>\(e(user))</strong>.</p>
        <div id="status" role="alert"></div>
        \(passkeys.isEmpty ? "<p id=\"none\">You have no passkey yet.</p>" : "<ul id=\"passkeys\">\n\(items)\n</ul>")
        \(create)<p class="alt"><a href="\(e(config.defaultGoto))">Back to \(e(config.title ?? "the site"))</a></p>\(config.supportText.map { "<p class=\"support\">\(e($0))</p>" } ?? "")</main>
        <script>\(script)</script>
        </body></html>
        """
    }

    /// `2026-11-25` (UTC).
    static func day(_ unixS: Int) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "UTC")
        f.dateFormat = "yyyy-MM-dd"
        return f.string(from: Date(timeIntervalSince1970: TimeInterval(unixS)))
    }
}
