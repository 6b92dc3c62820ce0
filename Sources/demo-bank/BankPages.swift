import Foundation
import TxGateCrypto
import TxGateCore

/// One transfer as the bank executes it, read from a JSON body or from the home page's form.
struct TransferOrder {
    var amount: Decimal
    /// The amount as the JSON body wrote it, echoed back as it came.
    var amountNumber: NSNumber
    var currency: String
    var payee: String

    struct Refusal: Error { var message: String }

    /// Read with the gateway's own JSON parser: `JSONSerialization` on Linux gives `1` as a
    /// number that also casts to `Bool`, so `"amount":1` was refused as "not a number".
    static func fromJSON(_ body: [UInt8]) -> Result<TransferOrder, Refusal> {
        guard case .object(let obj)? = JSONValue.parse(body) else {
            return .failure(Refusal(message: "the body must be a JSON object {amount, currency, payee}"))
        }
        for field in ["amount", "currency", "payee"] where obj[field] == nil || obj[field] == .null {
            return .failure(Refusal(message: "missing field '\(field)'"))
        }
        guard case .number(let n)? = obj["amount"], let amount = Decimal(string: n.text, locale: Locale(identifier: "en_US_POSIX")),
              amount > 0 else {
            return .failure(Refusal(message: "'amount' must be a positive number"))
        }
        guard case .string(let currency)? = obj["currency"], case .string(let payee)? = obj["payee"] else {
            return .failure(Refusal(message: "'currency' and 'payee' must be strings"))
        }
        return .success(TransferOrder(amount: amount, amountNumber: NSDecimalNumber(decimal: amount), currency: currency, payee: payee))
    }

    /// The home page's form: `amount` (a decimal number), `currency`, `payee`.
    static func fromForm(_ body: [UInt8]) -> Result<TransferOrder, Refusal> {
        guard let fields = FormBody.parse(body) else { return .failure(Refusal(message: "The form could not be read.")) }
        func field(_ name: String) -> String? {
            fields.first { $0.name == name }?.value.trimmingCharacters(in: .whitespaces)
        }
        guard let text = field("amount"), text.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
              let amount = Decimal(string: text), amount > 0 else {
            return .failure(Refusal(message: "The amount must be a positive number, such as 25.50."))
        }
        guard let currency = field("currency"), !currency.isEmpty, let payee = field("payee"), !payee.isEmpty else {
            return .failure(Refusal(message: "Say who to pay and in which currency."))
        }
        return .success(TransferOrder(amount: amount, amountNumber: NSDecimalNumber(decimal: amount), currency: currency,
                                      payee: payee))
    }
}

/// demo-bank's HTML pages: home (balance and the transfer form), receipt, refusal. No script
/// and no external asset.
enum BankPages {
    /// A page brought back from the back/forward cache shows a stale balance and a form that was
    /// already sent (a user re-submitted and approved the same transfer twice): reload it.
    static let script = "addEventListener('pageshow',function(e){if(e.persisted)location.reload();});"
    static let csp = "default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-"
        + Data(Crypto.sha256(Array(script.utf8))).base64EncodedString() + "'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    /// Where the gateway ends the session (OIDC end session; a POST from this origin needs no ID token).
    static let signOutPath = "/am/oauth2/realms/root/connect/endSession"

    /// `formToken`: a fresh token for this form, so that the bank recognizes the same form sent
    /// twice (`Bank.formTokens`).
    static func home(balance: Decimal, transfers: Int, formToken: String) -> Page {
        Page(title: "Your account", content: """
            <section class="balance"><p class="label">Everyday account</p><p class="amount" id="balance">\(money(balance)) EUR</p>
            <p class="note">\(transfers == 1 ? "1 transfer" : "\(transfers) transfers") made</p></section>
            <h2>New transfer</h2>
            <form id="transfer" method="post" action="/transfer">
            <input type="hidden" name="formToken" value="\(MarkupText.escape(formToken))">
            <label for="amount">Amount</label><input id="amount" name="amount" inputmode="decimal" required placeholder="25.00">
            <label for="currency">Currency</label><select id="currency" name="currency"><option>EUR</option></select>
            <label for="payee">Payee</label><input id="payee" name="payee" required placeholder="Name of the person or company">
            <button type="submit" id="send">Send transfer</button>
            </form>
            <p class="note"><a id="passkeys" href="/am/XUI/passkeys">Your passkeys</a>: approve transfers with a passkey instead of a code.</p>
            """)
    }

    static func receipt(_ t: TransferOrder, sequence: Int, balance: Decimal) -> Page {
        Page(title: "Receipt", content: """
            <p class="ok">&#10003; Transfer executed</p>
            <dl id="receipt">
            <dt>Amount</dt><dd id="r-amount">\(MarkupText.escape(money(t.amount))) \(MarkupText.escape(t.currency))</dd>
            <dt>Payee</dt><dd id="r-payee">\(MarkupText.escape(t.payee))</dd>
            <dt>Transfer number</dt><dd id="r-sequence">\(sequence)</dd>
            <dt>Balance now</dt><dd>\(money(balance)) EUR</dd>
            </dl>
            <p><a href="/">Back to your account</a></p>
            """)
    }

    static func refused(_ message: String) -> Page {
        Page(title: "Transfer not made", content: "<p class=\"err\">\(MarkupText.escape(message))</p><p><a href=\"/\">Back to your account</a></p>")
    }

    /// The same form sent again (back, then send): nothing is executed a second time.
    static func alreadySent(sequence: Int) -> Page {
        Page(title: "Already sent", content: """
            <p class="err" id="already-sent">You already sent this transfer: it was executed once, as transfer number \(sequence).</p>
            <p><a href="/receipt?seq=\(sequence)">See its receipt</a> · <a href="/">Back to your account</a></p>
            """)
    }

    static func money(_ d: Decimal) -> String {
        let f = NumberFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.minimumFractionDigits = 2
        f.maximumFractionDigits = 2
        f.minimumIntegerDigits = 1
        return f.string(from: NSDecimalNumber(decimal: d)) ?? "\(d)"
    }

    /// A page's title and content, laid out by `layout` with who is signed in.
    struct Page {
        let title: String
        let content: String
    }

    /// The whole page; `user` (the gateway's `X-TxGate-User`) is shown in the header with a
    /// sign-out button.
    static func layout(_ page: Page, user: String?) -> String {
        let (title, content) = (page.title, page.content)
        return """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(MarkupText.escape(title))</title>
        <style>
        body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;background:#f3f6f4;margin:0;color:#1f2933}
        header{background:#0f766e;color:#fff;padding:1rem 1.5rem;font-weight:600;font-size:1.1rem;display:flex;flex-wrap:wrap;justify-content:space-between;align-items:center;gap:.5rem}
        header .who{margin:0;font-weight:400;font-size:.9rem;display:flex;align-items:center;gap:.6rem}
        header .who button{margin:0;width:auto;padding:.35rem .7rem;background:#fff;color:#0f766e;font-size:.85rem}
        main{max-width:420px;margin:2rem auto;background:#fff;padding:1.75rem 2rem;border-radius:10px;box-shadow:0 2px 14px rgba(0,0,0,.08)}
        h1{font-size:1.3rem;margin:0 0 1rem}h2{font-size:1.05rem;margin:1.5rem 0 .5rem}
        .balance .label{margin:0;color:#52606d;font-size:.85rem}.balance .amount{margin:.2rem 0;font-size:2rem;font-weight:600}
        .note{color:#52606d;font-size:.85rem;margin:0}
        label{display:block;font-size:.85rem;margin:.8rem 0 .3rem;color:#52606d}
        input,select{width:100%;box-sizing:border-box;padding:.6rem .7rem;border:1px solid #cbd2d9;border-radius:6px;font-size:1rem}
        button{margin-top:1.2rem;width:100%;padding:.7rem;border:0;border-radius:6px;background:#0f766e;color:#fff;font-size:1rem;cursor:pointer}
        dl{display:grid;grid-template-columns:auto 1fr;gap:.5rem 1rem;font-size:1.05rem}dt{color:#52606d}dd{margin:0;font-weight:600}
        .ok{font-size:1.2rem;color:#0f766e;font-weight:600}.err{color:#8a1c1c}
        a{color:#0f766e}
        </style></head>
        <body><header><span>Demo Bank</span>\(user.map { """
            <form class="who" method="post" action="\(signOutPath)"><span id="signed-in">\(MarkupText.escape($0))</span> \
            <button type="submit" id="sign-out">Sign out</button></form>
            """ } ?? "")</header><main><h1>\(MarkupText.escape(title))</h1>
        \(content)
        </main><script>\(script)</script></body></html>
        """
    }
}
