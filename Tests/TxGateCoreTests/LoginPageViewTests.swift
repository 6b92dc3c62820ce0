import Foundation
import Testing
import TxGateCore

@Suite struct LoginPageViewTests {
    func record(bound: [String: JSONValue], display: String?) -> TransactionRecord {
        TransactionRecord(txid: "7b8bfd4c-60fe-4271-928d-d09b94496f84", realm: "/", resource: "http://gw/transfer", method: "POST",
                          subject: "demo", journey: "ConfirmTransaction", bodyDigest: nil, bound: bound, display: display, expires: 0)
    }

    @Test func approvalRowsFollowTheDisplayOrderWithLabelsFromThePointers() {
        let r = record(bound: ["/payee": .string("Mallory Ltd"), "/amount": .string("2500"), "/currency": .string("EUR"),
                               "/memo/text": .string("rent")],
                       display: "Approve {amount} {currency} to {/payee}?")
        let a = LoginPageView.Approval(r)
        // Amount and currency, side by side in the sentence, are one row that never wraps apart (issue 24 item 13).
        #expect(a.rows.map(\.label) == ["Amount", "Payee", "Memo text"])
        #expect(a.rows.map(\.value) == ["2500\u{00A0}EUR", "Mallory Ltd", "rent"])
        #expect(a.display == "Approve {amount} {currency} to {/payee}?")
        let labelled = LoginPageView.Approval(r, labels: ["/payee": "To", "/memo/text": "Reference"])
        #expect(labelled.rows.map(\.label) == ["Amount", "To", "Reference"])
        // Apart in the sentence: apart on the page.
        let apart = LoginPageView.Approval(record(bound: ["/amount": .string("5"), "/currency": .string("EUR")],
                                                  display: "Pay {amount} in {currency}?"))
        #expect(apart.rows.map(\.label) == ["Amount", "Currency"])
        // A record keeps the sentence as shown: the values place the rows.
        let shown = LoginPageView.Approval(record(bound: ["/payee": .string("Mallory Ltd"), "/amount": .string("2500"), "/currency": .string("EUR")],
                                                  display: "Approve 2500 EUR to Mallory Ltd?"))
        #expect(shown.rows.map(\.label) == ["Amount", "Payee"])
        #expect(shown.rows.map(\.value) == ["2500\u{00A0}EUR", "Mallory Ltd"])
    }

    @Test func everythingShownIsEscapedAndThePageHasNoExternalAsset() {
        var config = LoginPageConfig()
        config.title = "<Bank & Co>"
        config.supportText = "Call \"us\""
        config.logoFile = "/etc/logo.svg"
        let view = LoginPageView(config: config, logo: Array("<svg/>".utf8))
        let r = record(bound: ["/payee": .string("<script>alert(1)</script>")], display: "Pay {payee}?")
        let html = view.html(message: nil, approval: LoginPageView.Approval(r), script: nil)
        #expect(html.contains("&lt;Bank &amp; Co&gt;") && html.contains("Call &quot;us&quot;"))
        #expect(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;") && !html.contains("<script>"))
        #expect(html.contains("data-display=\"Pay {payee}?\""))
        #expect(html.contains("src=\"data:image/svg+xml;base64,"))
        #expect(html.contains("<h1 id=\"heading\">Approve this request</h1>"))
        #expect(!html.contains("http://") && !html.contains("https://"), "an external asset")
        let plain = LoginPageView(config: LoginPageConfig(), logo: nil).html(message: "No <b>", approval: nil, script: nil)
        #expect(plain.contains("<h1 id=\"heading\">Sign in</h1>") && plain.contains("No &lt;b&gt;") && !plain.contains("class=\"brand\""))
    }

    /// The errors of a whole configuration holding `section`.
    func errors(_ section: String) -> [String] {
        let json = #"{"upstream": {"url": "http://127.0.0.1:9"}, "\#(section)}"#
        do {
            _ = try ConfigLoader.decode(Data(json.utf8), folder: "/tmp")
            return []
        } catch {
            return error.errors.map(\.description)
        }
    }

    @Test func brandingAndCORSSettingsAreChecked() {
        #expect(errors(##"loginPage": {"accentColor": "#0f766e"}"##).isEmpty)
        #expect(errors(#"loginPage": {"accentColor": "red;}body{display:none"}"#).first?.contains("loginPage.accentColor") == true)
        #expect(errors(#"loginPage": {"logoFile": "logo.gif"}"#).first?.contains(".svg or .png") == true)
        #expect(errors(#"loginPage": {"fieldLabels": {"amount": "Amount"}}"#).first?.contains("loginPage.fieldLabels") == true)
        #expect(errors(#"cors": {"allowedOrigins": ["https://app.example.com", "http://127.0.0.1:3000"]}"#).isEmpty)
        for bad in ["*", "https://app.example.com/", "https://app.example.com/x", "HTTPS://APP.example.com", "app.example.com"] {
            let e = errors(#"cors": {"allowedOrigins": ["\#(bad)"]}"#)
            #expect(e.first?.contains("is not an origin") == true, "\(bad): \(e)")
        }
    }

    /// Issue 24 item 12: the sign-in page offers the magic-link journey when there is one.
    @Test func theSignInPageOffersAMagicLinkJourneyWhenThereIsOne() {
        let journeys: [String: [NodeConfig]] = [
            "Login": [NodeConfig(type: "UsernamePassword")],
            "MagicLink": [NodeConfig(type: "UsernameOnly"), NodeConfig(type: "EmailSuspend")],
            "Confirm": [NodeConfig(type: "EmailSuspend")],
        ]
        #expect(LoginPageView.magicLinkJourney(in: journeys) == "MagicLink")
        #expect(LoginPageView.magicLinkJourney(in: ["Login": [NodeConfig(type: "UsernamePassword")]]) == nil)
        let view = LoginPageView(config: LoginPageConfig(), logo: nil, magicLinkJourney: "MagicLink")
        #expect(view.html(message: nil, approval: nil, script: nil).contains(#"data-journey="MagicLink""#))
        let r = record(bound: ["/amount": .string("1")], display: nil)
        #expect(!view.html(message: nil, approval: LoginPageView.Approval(r), script: nil).contains("magic-link"),
                "an approval is no place to sign in by email")
    }

    /// Issue 24 item 9: the approval shows the time left before the transaction expires, from
    /// the record's expiry as of serving the page; the script counts it down from there.
    @Test func theApprovalCarriesTheTimeLeftBeforeItExpires() {
        var config = LoginPageConfig()
        config.title = "Bank & Co"
        let view = LoginPageView(config: config, logo: nil)
        var r = record(bound: ["/amount": .string("1")], display: nil)
        r.expires = 1_700_000_180
        let a = LoginPageView.Approval(r, nowMs: 1_700_000_000_250)
        #expect(a.expiresInMs == 179_750)
        let html = view.html(message: nil, approval: a, script: nil)
        #expect(html.contains(#"data-expires-in-ms="179750" data-app="Bank &amp; Co""#), "\(html)")
        #expect(html.contains(#"<p class="expiry" id="expiry" role="timer">Time left to approve: 2:59</p>"#), "\(html)")
        // Without a clock (nowMs), no countdown; without a title, "the site".
        let plain = view.html(message: nil, approval: LoginPageView.Approval(r), script: nil)
        #expect(!plain.contains(#"id="expiry""#) && !plain.contains("data-expires-in-ms"))
        #expect(LoginPageView(config: LoginPageConfig(), logo: nil).html(message: nil, approval: a, script: nil)
                    .contains(#"data-app="the site""#))
        #expect(LoginPageView.timeLeft(ms: 59_999) == "0:59" && LoginPageView.timeLeft(ms: 600_000) == "10:00"
                && LoginPageView.timeLeft(ms: -5) == "0:00")
    }
}
