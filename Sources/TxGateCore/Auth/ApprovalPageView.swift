import Foundation

/// The approval page (`ApprovalPagePath.path`, issue 27): the login page's look, no data of
/// its own in the HTML. Its script reads the request's status as the signed-in person
/// (`approvals?_action=status`), shows what is approved and the binding code, and offers
/// Approve (the request's approver journey, on the login page) and Deny.
public enum ApprovalPageView {
    public static func html(_ config: LoginPageConfig, script: String) -> String {
        let e = MarkupText.escape
        return """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
        <title>Approve a request\(config.title.map { " – " + e($0) } ?? "")</title>
        <style>\(LoginPageView.style(accent: config.accentColor))dd#display{white-space:pre-line;font-size:1.05rem}dd#code{font-size:1.8rem;letter-spacing:.2em}</style></head>
        <body><main>\(config.title.map { "<div class=\"brand\"><span>\(e($0))</span></div>" } ?? "")<h1 id="heading">Approve a request</h1>
        <div id="request" hidden><dl id="approval"><div class="row"><dt>Request</dt><dd id="display"></dd></div><div class="row"><dt>Code</dt><dd id="code"></dd></div></dl>
        <p class="alt">Approve only if the screen that asked shows the same code.</p></div>
        <div id="status" role="alert"></div>
        <div id="actions" hidden><button type="button" id="approve">Approve</button><button type="button" class="secondary" id="deny">Deny</button></div>
        \(config.supportText.map { "<p class=\"support\">\(e($0))</p>" } ?? "")</main>
        <script>\(script)</script>
        </body></html>
        """
    }
}
