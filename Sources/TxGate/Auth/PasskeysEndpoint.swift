import EventHTTP
import Foundation
import HTTPCore
import TxGateCore
import TxGateCrypto

/// The signed-in user's passkeys: the account page (`GET /am/XUI/passkeys`) and its API,
/// `POST /am/json/realms/{realm}/passkeys?_action=list` (`{"result": [...]}`) and
/// `?_action=delete` with `{"id": "<credential ID, base64url>"}`. Only the session's own
/// passkeys are listed or removed; the body must be JSON, so that no form on another site can
/// remove one (as for declining a transaction).
struct PasskeysEndpoint {
    let auth: AuthService
    let loop: EventLoop

    static let pagePath = "/am/XUI/passkeys"
    static let csp = "default-src 'none'; script-src '\(scriptHash)'; style-src 'unsafe-inline'; img-src data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    static let scriptHash = "sha256-" + Base64.encode(Crypto.sha256(Array(script.utf8)))

    private var store: PasskeyStore? { auth.passkeys.map { _ in PasskeyStore(store: auth.store, executor: loop) } }

    /// The session's user, or nil after answering for a request without a live one.
    private func withUser(_ ctx: EndpointCall, realm: String, orElse refuse: @escaping () -> Void, _ then: @escaping (String) -> Void) {
        guard let token = auth.sessions.token(in: ctx.head.headers) else { refuse(); return }
        auth.sessions.lookup(token, now: auth.now, on: loop) { r in
            switch r {
            case .failure(let e): ctx.fail(.storeUnavailable(e.description))
            case .success(let s?) where s.realm == realm: then(s.uid)
            case .success: refuse()
            }
        }
    }

    func handle(_ ctx: EndpointCall, realm: String) {
        guard let store else { ctx.fail(.notFound("passkeys are not configured (no webauthn in the configuration)")); return }
        let action = Query(target: ctx.head.target)["_action"] ?? ""
        guard action == "list" || action == "delete" else { ctx.fail(.badRequest("_action must be list or delete")); return }
        guard ctx.head.headers.first("Content-Type").flatMap(MediaType.init)?.isJSON == true else {
            ctx.fail(.unsupportedMediaType("send a JSON body (application/json)"))
            return
        }
        let body = JSONValue.parse(ctx.exchange.body.bytes)
        withUser(ctx, realm: realm, orElse: { ctx.respondJSON(status: 401, AuthService.accessDenied) }) { user in
            if action == "list" {
                store.passkeys(of: user) { r in
                    switch r {
                    case .failure(let e): ctx.fail(.storeUnavailable(e.description))
                    case .success(let list):
                        let items = list.map { p -> JSONValue in
                            var o: [String: JSONValue] = ["id": .string(p.id), "name": .string(p.name), "createdS": .number(p.createdS),
                                                          "signCount": .number(Int(p.signCount))]
                            if let used = p.lastUsedS { o["lastUsedS"] = .number(used) }
                            return .object(o)
                        }
                        ctx.respondJSON(status: 200, JSONValue.object(["result": .array(items)]).canonical)
                    }
                }
                return
            }
            guard let id = body?["id"]?.stringValue, let credentialId = Base64URL.decode(id), !credentialId.isEmpty else {
                ctx.fail(.badRequest("the body must be {\"id\": \"<credential ID, base64url>\"}"))
                return
            }
            store.remove(credentialId, of: user) { r in
                switch r {
                case .failure(let e): ctx.fail(.storeUnavailable(e.description))
                case .success(false): ctx.fail(.notFound("you have no passkey with this ID"))
                case .success(true):
                    auth.logger.info("passkey removed", metadata: [
                        "request_id": .string(ctx.requestId), "user": .string(user), "credential": .string(masked(id)),
                    ])
                    ctx.respondJSON(status: 200, #"{"deleted":true}"#)
                }
            }
        }
    }

    /// The account page; without a session, the login page first (and back here).
    func page(_ ctx: EndpointCall) {
        guard ctx.head.method == "GET" || ctx.head.method == "HEAD" else {
            ctx.fail(.methodNotAllowed("\(ctx.head.method) is not allowed on the passkeys page; use GET"))
            return
        }
        guard let store else { ctx.fail(.notFound("passkeys are not configured (no webauthn in the configuration)")); return }
        let toLogin = {
            var h = HTTPHeaders()
            h.add("Location", "/am/XUI/?goto=" + (Self.pagePath.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""))
            h.add("Cache-Control", "no-store")
            ctx.respond(status: 302, headers: h, body: [])
        }
        withUser(ctx, realm: "/", orElse: toLogin) { user in
            store.passkeys(of: user) { r in
                switch r {
                case .failure(let e): ctx.fail(.storeUnavailable(e.description))
                case .success(let list):
                    var h = HTTPHeaders()
                    h.add("Content-Type", "text/html; charset=utf-8")
                    h.add("Cache-Control", "no-store")
                    h.add("X-Frame-Options", "DENY")
                    h.add("Referrer-Policy", "no-referrer")
                    h.add("Content-Security-Policy", Self.csp)
                    let html = auth.loginPageView.passkeysHTML(
                        user: user, passkeys: list,
                        registerJourney: LoginPageView.passkeyRegistrationJourney(in: auth.config.journeys), script: Self.script)
                    ctx.respond(status: 200, headers: h, body: Array(html.utf8))
                }
            }
        }
    }

    /// The page's one script: Remove posts the passkey's ID and takes its row away.
    static let script = #"""
    (function () {
      "use strict";
      var status = document.getElementById("status");
      function say(text, kind) {
        status.textContent = "";
        var p = document.createElement("p");
        p.className = "msg " + (kind || "");
        p.textContent = text;
        status.appendChild(p);
      }
      Array.prototype.forEach.call(document.querySelectorAll("button.remove"), function (b) {
        b.addEventListener("click", function () {
          b.disabled = true;
          fetch("/am/json/realms/root/passkeys?_action=delete", {
            method: "POST", credentials: "include", headers: {"Content-Type": "application/json"},
            body: JSON.stringify({id: b.getAttribute("data-id")})
          }).then(function (r) {
            if (r.status === 200) {
              var row = b.parentNode;
              row.parentNode.removeChild(row);
              say("Removed. That passkey no longer signs in or approves anything.", "");
            } else {
              b.disabled = false;
              say("It could not be removed (" + r.status + "). Reload the page and try again.", "error");
            }
          }, function () { b.disabled = false; say("The service cannot be reached. Try again.", "error"); });
        });
      });
    })();
    """#
}
