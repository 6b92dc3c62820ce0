import EventHTTP
import Foundation
import HTTPCore
import TxGateCore
import TxGateCrypto

/// The browser's login page (`/am/XUI/`), branded from `loginPage`. Self-contained: no
/// external assets, so it works offline, and a CSP that allows only its own script (and the
/// logo, embedded as a data: URI). A transaction's approval (`composite_advice` naming a
/// TxId) is shown as its own step, with the bound fields as labelled rows, when the session
/// that opens the page is the one that must approve it, with the time left before it expires.
struct LoginPage {
    let auth: AuthService
    let loop: EventLoop
    let identifier: SubjectIdentifier

    init(auth: AuthService, loop: EventLoop) {
        self.auth = auth
        self.loop = loop
        identifier = auth.identifier(on: loop)
    }

    static let csp = "default-src 'none'; script-src '\(scriptHash)'; style-src 'unsafe-inline'; img-src data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    static let scriptHash = "sha256-" + Data(Crypto.sha256(Array(LoginPageScript.script.utf8))).base64EncodedString()

    func serve(_ ctx: EndpointCall) {
        guard ctx.head.method == "GET" || ctx.head.method == "HEAD" else {
            ctx.fail(.methodNotAllowed("\(ctx.head.method) is not allowed on the login page; use GET"))
            return
        }
        let query = Query(target: ctx.head.target)
        if let goto = query["goto"], auth.gotoPolicy.validate(goto) == nil {
            var h = HTTPHeaders()
            h.add("Content-Type", "text/html; charset=utf-8")
            let msg = "This login link is not valid: it would send you to another site."
            ctx.respond(status: 400, headers: h, body: Array(auth.loginPageView.html(message: msg, approval: nil, script: nil).utf8))
            return
        }
        approval(ctx, query) { approval in
            var h = HTTPHeaders()
            h.add("Content-Type", "text/html; charset=utf-8")
            h.add("Cache-Control", "no-store")
            h.add("X-Frame-Options", "DENY")
            h.add("Referrer-Policy", "no-referrer")
            h.add("Content-Security-Policy", Self.csp)
            let html = auth.loginPageView.html(message: nil, approval: approval, script: LoginPageScript.script)
            ctx.respond(status: 200, headers: h, body: Array(html.utf8))
        }
    }

    /// What the page's session is asked to approve: the transaction the advice names, if it
    /// is waiting for this very user's approval. Anything else (no session, another user's,
    /// gone, the store down) shows the plain page, whose journey then says what is wrong.
    private func approval(_ ctx: EndpointCall, _ query: Query, _ done: @escaping (LoginPageView.Approval?) -> Void) {
        guard query["authIndexType"] == "composite_advice", let raw = query["authIndexValue"],
              let txid = Advices.parse(xmlOrBase64: raw)?[Advices.transaction]?.first, PolicyDecider.isTxId(txid),
              let token = identifier.sessionToken(in: ctx.head.headers) else { done(nil); return }
        identifier.identify(token: token) { [auth, loop] r in
            guard case .success(let subject?) = r else { done(nil); return }
            auth.store.get(TransactionRecord.key(txid), on: loop) { r in
                guard case .success(let bytes?) = r, let record = TransactionRecord.decode(bytes),
                      record.approvalRefusal(by: subject.uid, realm: subject.realm, now: auth.now) == nil else { done(nil); return }
                done(LoginPageView.Approval(record, labels: auth.config.loginPage.fieldLabels, nowMs: auth.clock.nowMs()))
            }
        }
    }
}
