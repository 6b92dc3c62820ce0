/// The login page's script: it renders whatever callbacks a journey sends, posts the answers
/// back, words failures for people, and on success follows the server-validated `goto`. Its
/// SHA-256 is the only script the page's CSP allows.
enum LoginPageScript {
    static let script = #"""
    (function () {
      "use strict";
      var q = new URLSearchParams(location.search);
      var realm = (q.get("realm") || "/").replace(/^\/+/, "");
      var endpoint = "/am/json/realms/root" + (realm ? "/realms/" + encodeURIComponent(realm) : "") + "/authenticate";
      var form = document.getElementById("step"), status = document.getElementById("status");
      var approval = document.getElementById("approval");
      var current = null, askedCode = false, waiting = null;
      // The plain sign-in page offers the magic-link journey, back to the same goto.
      var magic = document.getElementById("magic");
      if (magic && !q.has("authIndexType") && !q.has("suspendedId")) {
        var mp = new URLSearchParams();
        if (q.has("goto")) mp.set("goto", q.get("goto"));
        if (q.has("realm")) mp.set("realm", q.get("realm"));
        mp.set("authIndexType", "service");
        mp.set("authIndexValue", document.getElementById("magic-link").getAttribute("data-journey"));
        document.getElementById("magic-link").href = "?" + mp.toString();
        magic.hidden = false;
      }
      // While a link is on its way: the link opened in another tab or browser signs this one in
      // too (the session cookie), so look for it and move on; or send another link.
      function awaitLink() {
        var again = document.createElement("button");
        again.type = "button"; again.className = "secondary"; again.id = "resend"; again.textContent = "Send another link";
        again.addEventListener("click", function () { stopWaiting(); say(""); start(true); });
        form.appendChild(again);
        var until = Date.now() + 10 * 60 * 1000;
        waiting = setInterval(function () {
          if (Date.now() > until) { stopWaiting(); return; }
          post("/am/json/realms/root/sessions?_action=validate", {}).then(function (r) {
            if (r.status === 200 && r.body && r.body.valid === true) {
              stopWaiting();
              form.textContent = "";
              say("Signed in with the link.", "");
              location.assign(q.get("goto") || "/");
            }
          }, function () {});
        }, 2000);
      }
      function stopWaiting() { if (waiting) { clearInterval(waiting); waiting = null; } }

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
      function start(fresh) {
        var p = new URLSearchParams();
        // A link that failed starts a new sign-in (no suspendedId), back to the same goto.
        (fresh ? ["goto"] : ["authIndexType", "authIndexValue", "goto", "suspendedId"]).forEach(function (k) {
          if (q.has(k)) p.set(k, q.get(k));
        });
        var s = p.toString();
        post(endpoint + (s ? "?" + s : ""), {}).then(handle, failed);
      }
      function failed() { say("The sign-in service cannot be reached. Try again.", "error"); }
      function restart(text, fresh) {
        current = null;
        form.textContent = "";
        say(text, "error");
        var b = document.createElement("button");
        b.type = "button"; b.className = "secondary"; b.textContent = fresh ? "Sign in again" : "Start again";
        b.addEventListener("click", function () { say(""); start(fresh); });
        form.appendChild(b);
      }
      // AM's answers, worded for people (the JSON API keeps AM's exact bodies).
      function failure(j) {
        var m = j.message || "";
        if (m.indexOf("SuspendedAuthSessionException") >= 0) {
          restart("This sign-in link has expired or has already been used. Sign in again to get a new one.", true);
        } else if (j.detail && j.detail.errorCode === "110") {
          restart("This sign-in took too long. Start again.");
        } else if ((m === "Login failure" || !m) && askedCode) {
          restart("That code was not accepted: it is wrong, has expired, or was already used. " +
            (approval ? "Nothing was approved. " : "") + "Start again and enter a new code.");
        } else if (m === "Login failure" || !m) {
          restart("Sign-in failed. Check your user name and password, then start again.");
        } else {
          restart(m.charAt(0).toUpperCase() + m.slice(1) + ".");
        }
      }
      function handle(res) {
        var j = res.body || {};
        if (res.status === 200 && j.tokenId !== undefined) {
          form.textContent = "";
          say(approval ? "Approved." : "Signed in.", "");
          location.assign(j.successUrl || "/");
          return;
        }
        if (res.status === 200 && j.authId) { render(j); return; }
        failure(j);
      }
      function render(step) {
        current = step;
        form.textContent = "";
        say("");
        var submit = true;
        askedCode = false;
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
              if (cb.type === "PasswordCallback" && /one.?time|code|otp/i.test(l.textContent)) {
                // A one-time code: shown while typed, offered from SMS/email by the browser, digits keypad.
                askedCode = true;
                el.type = "text"; el.className = "code";
                el.setAttribute("autocomplete", "one-time-code");
                el.setAttribute("inputmode", "numeric");
                el.setAttribute("maxlength", "10");
              } else if (cb.type === "PasswordCallback") {
                el.autocomplete = "current-password";
              }
              form.appendChild(l); form.appendChild(el);
              break;
            case "TextOutputCallback":
            case "SuspendedTextOutputCallback":
              var t = String(out(cb, "messageType"));
              // The approval's sentence, already shown above as labelled rows.
              if (approval && t === "0" && out(cb, "message") === approval.getAttribute("data-display")) break;
              var p = document.createElement("p");
              p.className = "msg " + (t === "1" ? "warning" : t === "2" ? "error" : "");
              p.textContent = out(cb, "message") || "";
              form.appendChild(p);
              if (cb.type === "SuspendedTextOutputCallback") { submit = false; awaitLink(); }
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
          b.type = "submit"; b.id = "submit"; b.textContent = approval && askedCode ? "Approve" : "Continue";
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
