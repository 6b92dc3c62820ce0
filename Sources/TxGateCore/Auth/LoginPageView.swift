import TxGateCrypto

/// The login page's HTML, branded (`loginPage`), with the approval of a transaction shown as
/// its own step: a heading and one labelled row per bound field, in large type. Everything is
/// in the page (the logo as a data: URI): no external asset.
public struct LoginPageView: Sendable {
    public let config: LoginPageConfig
    /// `data:<type>;base64,...` of the logo, when one is configured.
    public let logoDataURI: String?

    /// A journey that signs in by an emailed link (`UsernameOnly`, then `EmailSuspend`), offered
    /// on the sign-in page as "Email me a sign-in link instead".
    public var magicLinkJourney: String?

    /// The first journey (by name) that asks only for a username and then emails a link.
    public static func magicLinkJourney(in journeys: [String: [NodeConfig]]) -> String? {
        journeys.keys.sorted().first { name in
            let types = journeys[name]!.map(\.type)
            return types.first == "UsernameOnly" && types.contains("EmailSuspend")
        }
    }

    public init(config: LoginPageConfig, logo: [UInt8]?, magicLinkJourney: String? = nil) {
        self.magicLinkJourney = magicLinkJourney
        self.config = config
        logoDataURI = logo.flatMap { bytes in config.logoMediaType.map { "data:\($0);base64," + Base64.encode(bytes) } }
    }

    /// What the user approves, as the page shows it.
    public struct Approval: Equatable, Sendable {
        public var rows: [(label: String, value: String)]
        /// The transaction's TxId, for the page's Decline button.
        public var txid: String = ""
        /// The journey's sentence for the same thing (the rule's `display`), which the page
        /// does not repeat under the rows.
        public var display: String?
        /// Milliseconds until the transaction expires, as of the page being served: the page
        /// counts down from it (its own monotonic clock, so a wrong clock on the device does
        /// not matter) and, at zero, says the approval expired without asking the server.
        public var expiresInMs: Int64?

        public static func == (a: Approval, b: Approval) -> Bool {
            a.display == b.display && a.rows.map(\.label) == b.rows.map(\.label) && a.rows.map(\.value) == b.rows.map(\.value)
        }

        /// The record's bound fields, labelled from `labels` or after their pointers (`/amount`
        /// → "Amount", `/payee/name` → "Payee name"), in the order the rule's `display` names
        /// them, then the others by pointer. Fields the display names next to each other with
        /// only a space between (`{amount} {currency}`) are one row, under the first one's
        /// label, their values joined by a no-break space: "100 EUR" never wraps apart.
        /// - Parameters:
        ///   - record: The transaction waiting for approval.
        ///   - labels: The rows' labels by pointer (`loginPage.fieldLabels`).
        ///   - nowMs: Unix milliseconds now, for ``expiresInMs``; nil leaves it unset.
        public init(_ record: TransactionRecord, labels: [String: String] = [:], nowMs: Int64? = nil) {
            display = record.display
            txid = record.txid
            expiresInMs = nowMs.map { Int64(record.expires) * 1000 - $0 }
            let template = record.display ?? ""
            let fields = record.shownFields
            // Where the display names a field: its placeholder in a template, or (a record keeps
            // the sentence as shown, placeholders filled in) the first place its value appears.
            func placeholder(_ pointer: String) -> Range<String.Index>? {
                let name = String(pointer.dropFirst())
                for form in ["{\(name)}", "{\(pointer)}"] {
                    if let r = template.range(of: form) { return r }
                }
                guard let value = fields[pointer]?.displayText, !value.isEmpty else { return nil }
                return template.range(of: value)
            }
            func position(_ pointer: String) -> Int {
                placeholder(pointer).map { template.distance(from: template.startIndex, to: $0.lowerBound) } ?? Int.max
            }
            let pointers = fields.keys.sorted { (position($0), $0) < (position($1), $1) }
            var rows: [(label: String, value: String)] = []
            var previous: Range<String.Index>?
            for p in pointers {
                let value = fields[p]?.displayText ?? ""
                let here = placeholder(p)
                if let previous, let here, previous.upperBound <= here.lowerBound,
                   template[previous.upperBound..<here.lowerBound] == " ", !rows.isEmpty {
                    rows[rows.count - 1].value += "\u{00A0}" + value
                } else {
                    rows.append((labels[p] ?? Self.label(p), value))
                }
                previous = here
            }
            self.rows = rows
        }

        static func label(_ pointer: String) -> String {
            let words = pointer.split(separator: "/").map { JSONValue.unescapePointerToken($0) }.joined(separator: " ")
            return words.prefix(1).uppercased() + words.dropFirst()
        }
    }

    /// The page: `message` as an error in place of the form (no script), or the script that
    /// runs the journey, with `approval` shown above it.
    public func html(message: String?, approval: Approval?, script: String?) -> String {
        let e = MarkupText.escape
        let heading = approval == nil ? "Sign in" : config.approvalTitle
        let brand = (logoDataURI.map { "<img class=\"logo\" src=\"\($0)\" alt=\"\">" } ?? "")
            + (config.title.map { "<span>\(e($0))</span>" } ?? "")
        return """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(e(heading))\(config.title.map { " – " + e($0) } ?? "")</title>
        <style>\(Self.style(accent: config.accentColor))</style></head>
        <body><main>\(brand.isEmpty ? "" : "<div class=\"brand\">\(brand)</div>")<h1 id="heading">\(e(heading))</h1>
        \(approval.map(rows) ?? "")<div id="status" role="alert">\(message.map { "<p class=\"msg error\">\(e($0))</p>" } ?? "")</div>
        <form id="step" autocomplete="off" novalidate></form>\(approval == nil ? "" : """
            <button type="button" class="secondary" id="decline" hidden>Decline: this wasn't me</button>\
            <p class="alt" id="back" hidden><a href="\(e(config.defaultGoto))">Back to \(e(config.title ?? "the site"))</a></p>
            """)\(approval == nil ? magicLinkJourney.map {
            "<p class=\"alt\" id=\"magic\" hidden><a id=\"magic-link\" data-journey=\"\(e($0))\" href=\"#\">Email me a sign-in link instead</a></p>"
        } ?? "" : "")\(config.supportText.map { "<p class=\"support\">\(e($0))</p>" } ?? "")</main>
        \(script.map { "<script>\($0)</script>" } ?? "")
        </body></html>
        """
    }

    private func rows(_ a: Approval) -> String {
        let e = MarkupText.escape
        let expiry = a.expiresInMs.map { ms in
            " data-expires-in-ms=\"\(ms)\" data-app=\"\(e(config.title ?? "the site"))\""
        } ?? ""
        return "<dl id=\"approval\" data-txid=\"\(e(a.txid))\" data-display=\"\(e(a.display ?? ""))\"\(expiry)>"
            + a.rows.map { "<div class=\"row\"><dt>\(e($0.label))</dt><dd>\(e($0.value))</dd></div>" }.joined() + "</dl>\n"
            + (a.expiresInMs.map { "<p class=\"expiry\" id=\"expiry\" role=\"timer\">Time left to approve: \(Self.timeLeft(ms: $0))</p>\n" } ?? "")
    }

    /// `m:ss` of the time left, rounded down (what the page's script shows too).
    public static func timeLeft(ms: Int64) -> String {
        let s = max(0, ms) / 1000
        return "\(s / 60):" + (s % 60 < 10 ? "0" : "") + "\(s % 60)"
    }

    static func style(accent: String) -> String {
        """
        body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;background:#f4f5f7;margin:0;display:flex;min-height:100vh;align-items:center;justify-content:center;color:#1f2933}
        main{background:#fff;padding:2rem 2.25rem;border-radius:10px;box-shadow:0 2px 14px rgba(0,0,0,.08);width:min(380px,94vw);box-sizing:border-box;border-top:4px solid \(accent)}
        .brand{display:flex;align-items:center;gap:.6rem;font-weight:600;color:\(accent);margin:0 0 1rem;overflow-wrap:anywhere}.logo{height:32px;width:auto}
        h1{font-size:1.3rem;margin:0 0 1.1rem}
        dl#approval{margin:0 0 1rem;padding:.9rem 1rem;border-radius:8px;background:#f7f9fb;border:1px solid #e4e7eb}
        .row{display:flex;flex-wrap:wrap;justify-content:space-between;align-items:baseline;gap:.25rem 1rem;padding:.35rem 0}.row+.row{border-top:1px solid #e4e7eb}
        dt{color:#52606d;font-size:.9rem}dd{margin:0 0 0 auto;font-size:1.35rem;font-weight:600;text-align:right;overflow-wrap:break-word;min-width:0}
        @media (max-width:420px){main{padding:1.5rem 1.25rem}dd{font-size:1.2rem}}
        label{display:block;font-size:.85rem;margin:.9rem 0 .3rem;color:#52606d}
        input[type=text],input[type=password],select{width:100%;box-sizing:border-box;padding:.6rem .7rem;border:1px solid #cbd2d9;border-radius:6px;font-size:1rem}
        input.code{font-size:1.4rem;letter-spacing:.3em;text-align:center}
        button{margin-top:1.25rem;width:100%;padding:.7rem;border:0;border-radius:6px;background:\(accent);color:#fff;font-size:1rem;cursor:pointer}
        button.secondary{background:#e4e7eb;color:#1f2933}
        .msg{padding:.7rem .8rem;border-radius:6px;margin:.6rem 0;background:#eef2ff;overflow-wrap:anywhere}
        .msg.warning{background:#fff7e6}.msg.error{background:#fdecea;color:#8a1c1c}
        .support{margin:1.4rem 0 0;font-size:.8rem;color:#7b8794;text-align:center}
        .alt{margin:1rem 0 0;text-align:center;font-size:.9rem}.alt a{color:\(accent)}
        .expiry{margin:-.4rem 0 .8rem;font-size:.9rem;color:#52606d;text-align:right;font-variant-numeric:tabular-nums}.expiry.soon{color:#8a1c1c;font-weight:600}
        """
    }
}
