import Foundation
import HTTPCore
import TxGateCore
import TxGateCrypto

/// The browser's login page (`/am/XUI/`). It renders whatever callbacks a journey sends,
/// posts the answers back, and on success follows the server-validated `goto`. Self-contained:
/// no external assets, so it works offline, and a CSP that allows only its own script.
enum LoginPage {
    static func serve(_ ctx: RequestContext, gotoPolicy: GotoPolicy) {
        guard ctx.head.method == "GET" || ctx.head.method == "HEAD" else {
            ctx.fail(.methodNotAllowed("\(ctx.head.method) is not allowed on the login page; use GET"))
            return
        }
        if let goto = Query(target: ctx.head.target)["goto"], gotoPolicy.validate(goto) == nil {
            var h = HTTPHeaders()
            h.add("Content-Type", "text/html; charset=utf-8")
            let msg = "This login link is not valid: it would send you to another site."
            ctx.respond(status: 400, headers: h, body: Array(page(message: msg, script: false).utf8))
            return
        }
        var h = HTTPHeaders()
        h.add("Content-Type", "text/html; charset=utf-8")
        h.add("Cache-Control", "no-store")
        h.add("X-Frame-Options", "DENY")
        h.add("Referrer-Policy", "no-referrer")
        h.add("Content-Security-Policy", csp)
        ctx.respond(status: 200, headers: h, body: html)
    }

    static let csp = "default-src 'none'; script-src '\(scriptHash)'; style-src 'unsafe-inline'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    static let scriptHash = "sha256-" + Data(Crypto.sha256(Array(script.utf8))).base64EncodedString()
    static let html = Array(page(message: nil, script: true).utf8)

    static func page(message: String?, script withScript: Bool) -> String {
        """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
        <title>Sign in</title>
        <style>
        body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;background:#f4f5f7;margin:0;display:flex;min-height:100vh;align-items:center;justify-content:center;color:#1f2933}
        main{background:#fff;padding:2rem 2.25rem;border-radius:10px;box-shadow:0 2px 14px rgba(0,0,0,.08);width:min(360px,90vw)}
        h1{font-size:1.25rem;margin:0 0 1.25rem}
        label{display:block;font-size:.85rem;margin:.9rem 0 .3rem;color:#52606d}
        input[type=text],input[type=password],select{width:100%;box-sizing:border-box;padding:.6rem .7rem;border:1px solid #cbd2d9;border-radius:6px;font-size:1rem}
        button{margin-top:1.25rem;width:100%;padding:.7rem;border:0;border-radius:6px;background:#2563eb;color:#fff;font-size:1rem;cursor:pointer}
        button.secondary{background:#e4e7eb;color:#1f2933}
        .msg{padding:.7rem .8rem;border-radius:6px;margin:.6rem 0;background:#eef2ff}
        .msg.warning{background:#fff7e6}.msg.error{background:#fdecea;color:#8a1c1c}
        </style></head>
        <body><main><h1>Sign in</h1><div id="status" role="alert">\(message.map { "<p class=\"msg error\">\(MarkupText.escape($0))</p>" } ?? "")</div>
        <form id="step" autocomplete="off" novalidate></form></main>
        \(withScript ? "<script>\(script)</script>" : "")
        </body></html>
        """
    }

    static let script = #"""
    (function () {
      "use strict";
      var q = new URLSearchParams(location.search);
      var realm = (q.get("realm") || "/").replace(/^\/+/, "");
      var endpoint = "/am/json/realms/root" + (realm ? "/realms/" + encodeURIComponent(realm) : "") + "/authenticate";
      var form = document.getElementById("step"), status = document.getElementById("status");
      var current = null;

      function say(text, kind) {
        status.textContent = "";
        if (!text) return;
        var p = document.createElement("p");
        p.className = "msg " + (kind || "");
        p.textContent = text;
        status.appendChild(p);
      }
      function out(cb, name) {
        var o = (cb.output || []).filter(function (x) { return x.name === name; })[0];
        return o ? o.value : undefined;
      }
      function post(url, body) {
        return fetch(url, {
          method: "POST", credentials: "include",
          headers: {"Content-Type": "application/json", "Accept-API-Version": "resource=2.0, protocol=1.0"},
          body: JSON.stringify(body || {})
        }).then(function (r) {
          return r.json().catch(function () { return {}; }).then(function (j) { return {status: r.status, body: j}; });
        });
      }
      function start() {
        var p = new URLSearchParams();
        ["authIndexType", "authIndexValue", "goto", "suspendedId"].forEach(function (k) { if (q.has(k)) p.set(k, q.get(k)); });
        var s = p.toString();
        post(endpoint + (s ? "?" + s : ""), {}).then(handle, failed);
      }
      function failed() { say("The sign-in service cannot be reached. Try again.", "error"); }
      function restart(text) {
        current = null;
        form.textContent = "";
        say(text, "error");
        var b = document.createElement("button");
        b.type = "button"; b.className = "secondary"; b.textContent = "Start again";
        b.addEventListener("click", function () { say(""); start(); });
        form.appendChild(b);
      }
      function handle(res) {
        var j = res.body || {};
        if (res.status === 200 && j.tokenId !== undefined) {
          form.textContent = "";
          say("Signed in.", "");
          location.assign(j.successUrl || "/");
          return;
        }
        if (res.status === 200 && j.authId) { render(j); return; }
        if (j.detail && j.detail.errorCode === "110") { restart("This sign-in took too long. Start again."); return; }
        restart(j.message === "Login failure" || !j.message ? "Sign-in failed." : j.message);
      }
      function render(step) {
        current = step;
        form.textContent = "";
        say("");
        var submit = true;
        step.callbacks.forEach(function (cb, i) {
          var id = "cb" + i, el;
          switch (cb.type) {
            case "NameCallback":
            case "PasswordCallback":
            case "ValidatedCreatePasswordCallback":
            case "StringAttributeInputCallback":
              var l = document.createElement("label");
              l.htmlFor = id; l.textContent = out(cb, "prompt") || "";
              el = document.createElement("input");
              el.id = id; el.name = id;
              el.type = cb.type === "NameCallback" || cb.type === "StringAttributeInputCallback" ? "text" : "password";
              if (cb.type === "NameCallback") el.autocomplete = "username";
              form.appendChild(l); form.appendChild(el);
              break;
            case "TextOutputCallback":
            case "SuspendedTextOutputCallback":
              var t = String(out(cb, "messageType"));
              var p = document.createElement("p");
              p.className = "msg " + (t === "1" ? "warning" : t === "2" ? "error" : "");
              p.textContent = out(cb, "message") || "";
              form.appendChild(p);
              if (cb.type === "SuspendedTextOutputCallback") submit = false;
              break;
            case "ConfirmationCallback":
              submit = false;
              var prompt = out(cb, "prompt");
              if (prompt) { var pp = document.createElement("p"); pp.textContent = prompt; form.appendChild(pp); }
              (out(cb, "options") || []).forEach(function (label, n) {
                var b = document.createElement("button");
                b.type = "button"; b.textContent = label; b.id = id + "_" + n;
                if (n > 0) b.className = "secondary";
                b.addEventListener("click", function () { cb.input[0].value = n; send(); });
                form.appendChild(b);
              });
              break;
            case "ChoiceCallback":
              var cl = document.createElement("label");
              cl.htmlFor = id; cl.textContent = out(cb, "prompt") || "";
              el = document.createElement("select");
              el.id = id;
              (out(cb, "choices") || []).forEach(function (c, n) {
                var o = document.createElement("option"); o.value = n; o.textContent = c; el.appendChild(o);
              });
              form.appendChild(cl); form.appendChild(el);
              break;
            case "HiddenValueCallback":
              break;
            default:
              var u = document.createElement("p");
              u.className = "msg warning";
              u.textContent = "This step (" + cb.type + ") cannot be shown here.";
              form.appendChild(u);
          }
        });
        if (submit) {
          var b = document.createElement("button");
          b.type = "submit"; b.id = "submit"; b.textContent = "Continue";
          form.appendChild(b);
        }
        var first = form.querySelector("input");
        if (first) first.focus();
      }
      function send() {
        if (!current) return;
        current.callbacks.forEach(function (cb, i) {
          var el = document.getElementById("cb" + i);
          if (el && cb.input && cb.input.length) {
            cb.input[0].value = cb.type === "ChoiceCallback" ? Number(el.value) : el.value;
          }
        });
        var body = current;
        current = null;
        post(endpoint, body).then(handle, failed);
      }
      form.addEventListener("submit", function (e) { e.preventDefault(); send(); });
      start();
    })();
    """#
}
