import EventHTTP
import Foundation
import HTTPCore
import TxGateCore
import TxGateCrypto

/// The approval page (`/am/XUI/approval?id=ID`, issue 27): static HTML and one script, allowed
/// by its hash (no third-party script, no inline handlers). It holds nothing about the
/// request: the script asks `approvals?_action=status` with the person's own session, signs
/// them in first (the login page, back here) when they have none, and polls until the request
/// is decided, here or elsewhere.
struct ApprovalPage {
    let auth: AuthService

    static let csp = "default-src 'none'; script-src '\(scriptHash)'; style-src 'unsafe-inline'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    static let scriptHash = "sha256-" + Data(Crypto.sha256(Array(ApprovalPageScript.script.utf8))).base64EncodedString()

    func serve(_ ctx: EndpointCall) {
        guard ctx.head.method == "GET" || ctx.head.method == "HEAD" else {
            ctx.fail(.methodNotAllowed("\(ctx.head.method) is not allowed on the approval page; use GET"))
            return
        }
        if let id = Query(target: ctx.head.target)["id"] { ctx.ctx.approvalId = id }
        var h = HTTPHeaders()
        h.add("Content-Type", "text/html; charset=utf-8")
        h.add("Cache-Control", "no-store")
        h.add("X-Frame-Options", "DENY")
        h.add("Referrer-Policy", "no-referrer")
        h.add("Content-Security-Policy", Self.csp)
        ctx.respond(status: 200, headers: h, body: Array(ApprovalPageView.html(auth.config.loginPage, script: ApprovalPageScript.script).utf8))
    }
}

/// The approval page's script (its hash is in the page's CSP).
enum ApprovalPageScript {
    static let script = """
    (function () {
      "use strict";
      var q = new URLSearchParams(location.search);
      var id = q.get("id") || "";
      var here = location.pathname + location.search;
      var timer = null;
      function el(x) { return document.getElementById(x); }
      function say(text, kind) {
        var s = el("status");
        s.textContent = "";
        if (!text) return;
        var p = document.createElement("p");
        p.className = "msg" + (kind ? " " + kind : "");
        p.textContent = text;
        s.appendChild(p);
      }
      function stop() { if (timer) { clearInterval(timer); timer = null; } el("actions").hidden = true; }
      function post(action) {
        return fetch("/am/json/realms/root/approvals?_action=" + action, {
          method: "POST", credentials: "same-origin",
          headers: {"Content-Type": "application/json", "Accept": "application/json"},
          body: JSON.stringify({id: id})
        }).then(function (r) {
          return r.json().catch(function () { return {}; }).then(function (j) { return {status: r.status, body: j}; });
        });
      }
      var words = {
        approved: "Approved. The screen that asked goes on.",
        denied: "Denied. The screen that asked is told.",
        expired: "This request has expired: nothing was approved."
      };
      function decided(state) {
        stop();
        document.body.setAttribute("data-state", state);
        say(words[state] || "This request can no longer be decided.", state === "approved" ? "" : "warning");
      }
      function show(j) {
        el("display").textContent = j.display || "";
        el("code").textContent = j.bindingCode || "";
        el("request").hidden = false;
        if (j.state !== "pending") { decided(j.state); return; }
        document.body.setAttribute("data-state", "pending");
        el("actions").hidden = false;
      }
      function refresh() {
        return post("status").then(function (r) {
          if (r.status === 401) { stop(); location.assign("/am/XUI/?goto=" + encodeURIComponent(here)); return; }
          if (r.status === 403) { stop(); say("This request is for another user: sign in as that user to decide it.", "error"); return; }
          if (r.status === 404) { stop(); say("There is no such request (or it expired long ago).", "error"); return; }
          if (r.status !== 200) { say("The request cannot be read now. This page tries again.", "error"); return; }
          show(r.body);
        }, function () { say("The service cannot be reached. This page tries again.", "error"); });
      }
      if (!/^[A-Za-z0-9_-]{22}$/.test(id)) { say("This approval link is not valid.", "error"); return; }
      el("approve").addEventListener("click", function () {
        var advice = "<Advices><AttributeValuePair><Attribute name=\\"ApprovalRequestConditionAdvice\\"/><Value>" + id +
          "</Value></AttributeValuePair></Advices>";
        location.assign("/am/XUI/?authIndexType=composite_advice&authIndexValue=" + encodeURIComponent(advice) +
          "&goto=" + encodeURIComponent(here));
      });
      el("deny").addEventListener("click", function () {
        post("deny").then(function (r) {
          if (r.status === 200) { decided("denied"); return; }
          if (r.body && (r.body.state === "approved" || r.body.state === "denied" || r.body.state === "expired")) { decided(r.body.state); return; }
          say((r.body && r.body.message) || "The request could not be denied.", "error");
        }, function () { say("The service cannot be reached. Try again.", "error"); });
      });
      refresh();
      timer = setInterval(refresh, 2000);
    })();
    """
}
