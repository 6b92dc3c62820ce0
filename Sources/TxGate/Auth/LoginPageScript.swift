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
      var current = null, askedCode = false, waiting = null, typed = {}, carried = "", starting = false, linkSent = false;
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
      // While a link is on its way: the link opened in another tab of this browser signs this
      // one in too (the session cookie), so look for it and move on; or send another link.
      // An approval's link is not looked for: this page's session is live already, and going
      // to goto before the approval would only ask for it again (and send another email).
      function awaitLink() {
        linkSent = true;
        var again = document.createElement("button");
        again.type = "button"; again.className = "secondary"; again.id = "resend"; again.textContent = "Send another link";
        // The same journey again (the same approval, or the magic link with the name filled in).
        again.addEventListener("click", function () { stopWaiting(); say(""); start(); });
        form.appendChild(again);
        if (approval) return;
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
        starting = true;
        post(endpoint + (s ? "?" + s : ""), {}).then(handle, failed);
      }
      function failed() { if (!expired) say("The sign-in service cannot be reached. Try again.", "error"); }
      function restart(text, fresh) {
        current = null;
        form.textContent = "";
        say(text, "error");
        var b = document.createElement("button");
        b.type = "button"; b.className = "secondary"; b.textContent = fresh ? "Sign in again" : "Start again";
        b.addEventListener("click", function () { say(""); start(fresh); });
        form.appendChild(b);
      }
      // Tries again at once, the failure shown above the fresh step: one click fewer, and
      // what was typed (not passwords or codes) is filled in again.
      // A journey that fails as it starts is not tried again by itself (it would fail again).
      function retry(text) { if (starting) { restart(text); return; } carried = text; start(); }
      // ": 4 attempts left before approvals are locked" after a counted failure (detail.attemptsLeft).
      function attemptsLeft(n) {
        if (typeof n !== "number" || n < 1) return "";
        return ": " + n + " attempt" + (n > 1 ? "s" : "") + " left before " + (approval ? "approvals are" : "you are") + " locked";
      }
      function lockedFor(s) {
        var min = Math.max(1, Math.ceil((s || 900) / 60));
        return min + " minute" + (min > 1 ? "s" : "");
      }
      // AM's answers, worded for people (the JSON API keeps AM's exact bodies). Inside a live
      // session (an approval, a step-up) the gateway says what failed (detail.reason) and, for
      // a wrong code, how many attempts are left before the lockout (detail.attemptsLeft).
      function failure(j) {
        var m = j.message || "", why = (j.detail && j.detail.reason) || "";
        var nothing = approval ? " Nothing was approved." : "";
        var left = j.detail ? j.detail.attemptsLeft : undefined;
        if (m.indexOf("SuspendedAuthSessionException") >= 0) {
          restart("This sign-in link has expired or has already been used. Sign in again to get a new one.", true);
        } else if (j.detail && j.detail.errorCode === "110") {
          retry("This took too long, so it started again.");
        } else if (why === "code_used") {
          retry("That code was already used." + nothing + " Wait for the next code in your authenticator app and enter it.");
        } else if (why === "wrong_code" && left === 0) {
          done("That code is not right, and that was the last attempt: " + (approval ? "approvals are" : "you are") +
            " locked for up to " + lockedFor(j.detail.retryAfterS) + "." + nothing + " Try again later.");
        } else if (why === "wrong_code") {
          retry("That code is not right" + attemptsLeft(left) + "." + nothing + " Enter the code your authenticator app shows now.");
        } else if (why === "locked_out") {
          done("Too many wrong codes: approvals are locked for up to " + lockedFor(j.detail.retryAfterS) + "." + nothing +
            " Try again later.");
        } else if (why === "no_passkey") {
          done("You have no passkey yet." + nothing + " Create one on your account page, then try again.");
        } else if (why === "declined") {
          done("Declined. Nothing was approved, and the request was not sent.");
        } else if ((m === "Login failure" || !m) && askedCode) {
          retry("That code was not accepted: it is wrong, has expired, or was already used." + nothing + " Enter a new code.");
        } else if (m === "Login failure" || !m) {
          retry("Sign-in failed. Check your user name and password.");
        } else if (approval && /expired|unknown|no longer/i.test(m)) {
          done("This approval has expired or was already used." + nothing + " Go back and send the request again.");
        } else {
          restart(m.charAt(0).toUpperCase() + m.slice(1) + ".");
        }
      }
      // The end of the road for this page: what happened, and the way back.
      function done(text) {
        stopWaiting();
        stopCountdown();
        if (expiry) expiry.hidden = true;
        current = null;
        form.textContent = "";
        say(text, "error");
        var back = document.getElementById("back");
        if (back) back.hidden = false;
        var decline = document.getElementById("decline");
        if (decline) decline.hidden = true;
      }
      // "This wasn't me": the transaction is refused at once, its parked request dropped.
      var declineButton = document.getElementById("decline");
      if (declineButton && approval) {
        declineButton.hidden = false;
        declineButton.addEventListener("click", function () {
          post("/am/json/realms/root" + (realm ? "/realms/" + encodeURIComponent(realm) : "") + "/transactions?_action=decline",
               {txid: approval.getAttribute("data-txid")}).then(function (r) {
            if (r.status === 200) { done("Declined. Nothing was approved, and the request was not sent."); }
            else if (r.status === 409) { done("This request was already approved, so it can no longer be declined."); }
            else { done("This approval has expired or was already used. Nothing more was approved."); }
          }, failed);
        });
      }
      // The time left to approve, counted down on the page's own monotonic clock from what the
      // server said when it served the page (data-expires-in-ms), a second early so that a code
      // sent at the last moment is not refused as gone. At zero the approval is over here and
      // now: no request that could only fail.
      var countdown = null, expired = false;
      var expiry = document.getElementById("expiry");
      function stopCountdown() { if (countdown) { clearInterval(countdown); countdown = null; } }
      function tick() {
        var left = deadline - performance.now();
        if (left <= 0) {
          expired = true;
          var app = approval.getAttribute("data-app");
          done(linkSent
            ? "The time to approve has run out. If the link was not opened in time, nothing was approved: go back to " + app +
              " and send the request again."
            : "This approval has expired. Nothing was approved. Go back to " + app + " and send the request again.");
          return;
        }
        var sec = Math.ceil(left / 1000);
        expiry.textContent = "Time left to approve: " + Math.floor(sec / 60) + ":" + (sec % 60 < 10 ? "0" : "") + (sec % 60);
        expiry.className = sec <= 30 ? "expiry soon" : "expiry";
      }
      if (approval && expiry && approval.hasAttribute("data-expires-in-ms")) {
        var deadline = performance.now() + Number(approval.getAttribute("data-expires-in-ms")) - 1000;
        tick();
        if (!expired) {
          countdown = setInterval(tick, 250);
          // A hidden tab's timers are slowed down: catch up as soon as it is shown again.
          document.addEventListener("visibilitychange", function () { if (countdown) tick(); });
        }
      }
      function handle(res) {
        if (expired) return;
        var j = res.body || {};
        if (res.status === 200 && j.tokenId !== undefined) {
          stopCountdown();
          if (expiry) expiry.hidden = true;
          form.textContent = "";
          if (declineButton) declineButton.hidden = true;
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
        say(carried, carried ? "error" : "");
        carried = "";
        var submit = true;
        askedCode = false;
        var passkeyStep = step.callbacks.some(function (c) { return c.type === "MetadataCallback"; });
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
              if (cb.type === "NameCallback") { el.autocomplete = "username"; el.value = typed[out(cb, "prompt")] || ""; }
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
                // Beside a passkey, the choice is the way out (a one-time code instead).
                if (n > 0 || passkeyStep) b.className = "secondary";
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
            case "MetadataCallback":
              var data = out(cb, "data") || {};
              var hidden = step.callbacks.filter(function (c) {
                return c.type === "HiddenValueCallback" && out(c, "id") === "webAuthnOutcome";
              })[0];
              if (data.relyingPartyId === undefined || !hidden) break;
              submit = false;
              passkeyButton(data, hidden);
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
      // A passkey step (AM's WebAuthn callbacks): the browser's own prompt, started by a click,
      // and its answer written into the hidden outcome exactly as the ForgeRock SDKs write it.
      function bytes64(s) { return Uint8Array.from(atob(s), function (c) { return c.charCodeAt(0); }); }
      function int8(buf) { return Array.prototype.join.call(new Int8Array(buf), ","); }
      function text(buf) { return new TextDecoder().decode(new Uint8Array(buf)); }
      function ids(list) {
        return (list || []).map(function (c) { return {type: "public-key", id: new Int8Array(c.id).buffer}; });
      }
      // A payment approved in the browser's own dialog (Secure Payment Confirmation), which shows
      // the amount and the payee itself; null where the browser has none (then plain WebAuthn).
      var cardIcon = "data:image/svg+xml;base64,PHN2ZyB4bWxucz0naHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmcnIHdpZHRoPSczMicgaGVpZ2h0PScyMCc+PHJlY3Qgd2lkdGg9JzMyJyBoZWlnaHQ9JzIwJyByeD0nMycgZmlsbD0nIzMzNCcvPjwvc3ZnPg==";
      var paymentDialogFailed = false;
      function paymentDialog(data, allow) {
        var p = data._securePaymentConfirmation;
        if (!p || !allow.length || !window.PaymentRequest || paymentDialogFailed) return Promise.resolve(null);
        var logo = document.querySelector("img.logo");
        var method = {credentialIds: allow.map(function (c) { return c.id; }), challenge: bytes64(data.challenge),
                      rpId: data._relyingPartyId, timeout: Number(data.timeout), payeeOrigin: location.origin,
                      instrument: {displayName: p.instrument.displayName, icon: logo ? logo.src : cardIcon, iconMustBeShown: false}};
        if (p.payeeName) method.payeeName = p.payeeName;
        var request;
        try {
          request = new PaymentRequest([{supportedMethods: "secure-payment-confirmation", data: method}],
                                       {total: {label: "Total", amount: {currency: p.total.currency, value: p.total.value}}});
        } catch (e) { return Promise.resolve(null); }
        return request.canMakePayment().then(function (ok) {
          if (!ok) return null;
          return request.show().then(function (r) { return r.complete("success").then(function () { return r.details; }); },
                                     function (e) { paymentDialogFailed = true; throw e; });  // next time, plain WebAuthn
        }, function () { return null; });
      }
      function passkeyButton(data, hidden) {
        var create = data.pubKeyCredParams !== undefined;
        var b = document.createElement("button");
        b.type = "button"; b.id = "passkey";
        b.textContent = create ? "Create a passkey" : approval ? "Approve with passkey" : "Sign in with passkey";
        form.appendChild(b);
        if (!window.PublicKeyCredential) {
          say("This browser cannot use passkeys.", "error");
          b.disabled = true;
          return;
        }
        b.addEventListener("click", function () {
          say("");
          b.disabled = true;
          var pending;
          if (create) {
            pending = navigator.credentials.create({publicKey: {
              challenge: bytes64(data.challenge),
              rp: {name: data.relyingPartyName, id: data._relyingPartyId},
              user: {id: new TextEncoder().encode(data.userId), name: data.userName, displayName: data.displayName || data.userName},
              pubKeyCredParams: data._pubKeyCredParams,
              attestation: data.attestationPreference,
              authenticatorSelection: data._authenticatorSelection,
              excludeCredentials: ids(data._excludeCredentials),
              timeout: Number(data.timeout),
              // A credential Secure Payment Confirmation can use (where the browser has it).
              extensions: data._paymentCredential ? {payment: {isPayment: true}} : {}
            }}).then(function (c) {
              return text(c.response.clientDataJSON) + "::" + int8(c.response.attestationObject) + "::" + c.id;
            });
          } else {
            var options = {challenge: bytes64(data.challenge), timeout: Number(data.timeout),
                           userVerification: data.userVerification, rpId: data._relyingPartyId};
            var allow = ids(data._allowCredentials);
            if (allow.length) options.allowCredentials = allow;
            pending = paymentDialog(data, allow).then(function (c) {
              return c || navigator.credentials.get({publicKey: options});
            }).then(function (c) {
              var v = text(c.response.clientDataJSON) + "::" + int8(c.response.authenticatorData) + "::" +
                int8(c.response.signature) + "::" + c.id;
              if (c.response.userHandle && c.response.userHandle.byteLength) v += "::" + text(c.response.userHandle);
              return v;
            });
          }
          pending.then(function (outcome) {
            hidden.input[0].value = outcome;
            send();
          }, function (e) {
            // Closed, timed out, or no passkey here: nothing was sent, so try again.
            b.disabled = false;
            say(e && e.name === "InvalidStateError" ? "This passkey is registered already." :
                "The passkey prompt was closed or timed out. Try again.", "error");
          });
        });
      }
      function send() {
        if (!current) return;
        current.callbacks.forEach(function (cb, i) {
          var el = document.getElementById("cb" + i);
          if (el && cb.type === "NameCallback") typed[out(cb, "prompt")] = el.value;
          if (el && cb.input && cb.input.length) {
            cb.input[0].value = cb.type === "ChoiceCallback" ? Number(el.value) : el.value;
          }
        });
        var body = current;
        current = null;
        starting = false;
        post(endpoint, body).then(handle, failed);
      }
      form.addEventListener("submit", function (e) { e.preventDefault(); send(); });
      if (!expired) start();
    })();
    """#
}
