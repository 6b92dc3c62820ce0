"""A real OAuth 2.0 / OpenID Connect client (authlib, from PyPI) against TxGate's provider.

Run by OAuthTests.swift: `client.py BASE_URL SCENARIO USER PASSWORD [TOTP_CODE]`. The user's
browser is a requests.Session (the login page's JSON API, with the session cookie); the client
is authlib's OAuth2Session (PKCE S256), and ID tokens are verified with authlib.jose against the
provider's JWK Set. Prints one JSON object of what it saw, for the Swift test to assert on.
"""
import json
import re
import sys
from urllib.parse import parse_qs, urlparse

import requests
from authlib.common.security import generate_token
from authlib.integrations.base_client.errors import OAuthError
from authlib.integrations.requests_client import OAuth2Session
from authlib.jose import JsonWebKey, JsonWebToken

BASE, SCENARIO, USER, PASSWORD = sys.argv[1:5]
CODE = sys.argv[5] if len(sys.argv) > 5 else ""
REDIRECT = "http://127.0.0.1/callback"
AUTH = BASE + "/am/json/realms/root/authenticate"
HEADERS = {"Content-Type": "application/json", "Accept-API-Version": "resource=2.0, protocol=1.0"}
report = {}


def discover():
    disc = requests.get(BASE + "/am/oauth2/realms/root/.well-known/openid-configuration", timeout=10).json()
    jwks = requests.get(disc["jwks_uri"], timeout=10).json()
    return disc, jwks


def journey(browser, query, values):
    """Runs a journey through /json/authenticate, answering each input callback in order."""
    step = browser.post(AUTH + query, headers=HEADERS, data="", timeout=10).json()
    for cb in step.get("callbacks", []):
        if cb.get("input"):
            cb["input"][0]["value"] = values.pop(0)
    done = browser.post(AUTH, headers=HEADERS, data=json.dumps(step), timeout=10)
    return step, done


def authorize(client, browser, disc, **extra):
    verifier, nonce = generate_token(64), generate_token(20)
    url, state = client.create_authorization_url(disc["authorization_endpoint"], code_verifier=verifier, nonce=nonce, **extra)
    r = browser.get(url, allow_redirects=False, timeout=10)
    return r, verifier, state, nonce, url


def token_for(client, disc, location, verifier, state):
    return client.fetch_token(disc["token_endpoint"], authorization_response=location, code_verifier=verifier, state=state)


def oauth_error(call):
    try:
        call()
        return "no error"
    except OAuthError as e:
        return e.error


def claims_of(jwt, jwks, **options):
    return JsonWebToken(["ES256"]).decode(jwt, JsonWebKey.import_key_set(jwks), claims_options=options)


def new_client():
    return OAuth2Session("app", scope="openid profile email", redirect_uri=REDIRECT, code_challenge_method="S256",
                         token_endpoint_auth_method="none")


def login(browser, report):
    r, verifier, state, nonce, url = authorize(new_client(), browser, disc)
    report["noSession"] = {"status": r.status_code, "location": r.headers.get("Location", "")}
    _, done = journey(browser, "", [USER, PASSWORD])
    report["login"] = done.status_code


def provider():
    client, browser = new_client(), requests.Session()
    login(browser, report)
    r, verifier, state, nonce, _ = authorize(client, browser, disc)
    location = r.headers.get("Location", "")
    report["codeRedirect"] = {"status": r.status_code, "location": location}
    token = token_for(client, disc, location, verifier, state)
    report["tokenKeys"] = sorted(token.keys())
    idt = claims_of(token["id_token"], jwks, iss={"essential": True, "value": disc["issuer"]},
                    aud={"essential": True, "value": "app"}, nonce={"essential": True, "value": nonce})
    idt.validate()
    report["idToken"] = {k: idt.get(k) for k in ("sub", "acr", "email", "nonce") } | {"alg": idt.header.get("alg")}
    at = claims_of(token["access_token"], jwks)
    at.validate()
    report["accessToken"] = dict(at) | {"typ": at.header.get("typ"), "kid": at.header.get("kid")}
    report["userinfo"] = client.get(disc["userinfo_endpoint"], timeout=10).json()

    old = token["refresh_token"]
    fresh = client.refresh_token(disc["token_endpoint"], refresh_token=old)
    report["refreshRotated"] = fresh["refresh_token"] != old and "access_token" in fresh
    report["reusedRefresh"] = oauth_error(lambda: client.refresh_token(disc["token_endpoint"], refresh_token=old))
    report["familyAfterReuse"] = oauth_error(lambda: client.refresh_token(disc["token_endpoint"], refresh_token=fresh["refresh_token"]))

    r, verifier, state, _, _ = authorize(client, browser, disc)
    report["wrongVerifier"] = oauth_error(lambda: token_for(client, disc, r.headers["Location"], generate_token(64), state))
    report["codeAfterWrongVerifier"] = oauth_error(lambda: token_for(client, disc, r.headers["Location"], verifier, state))
    r, verifier, state, _, _ = authorize(client, browser, disc)
    token_for(client, disc, r.headers["Location"], verifier, state)
    report["reusedCode"] = oauth_error(lambda: token_for(client, disc, r.headers["Location"], verifier, state))

    evil = new_client()
    evil.redirect_uri = "http://evil.example/callback"
    r, _, _, _, _ = authorize(evil, browser, disc)
    report["unregisteredRedirect"] = {"status": r.status_code, "location": r.headers.get("Location"), "body": r.json()}

    r, verifier, state, _, _ = authorize(client, browser, disc)
    token2 = token_for(client, disc, r.headers["Location"], verifier, state)
    # A confidential client (the test registers "backend" with this secret); a public one may not introspect.
    introspect = lambda: requests.post(disc["introspection_endpoint"], timeout=10, data={
        "token": token2["access_token"], "client_id": "backend", "client_secret": "s3cret-backend-value-0123456789"}).json()
    public = requests.post(disc["introspection_endpoint"], data={"token": token2["access_token"], "client_id": "app"}, timeout=10)
    report["introspectPublic"] = {"status": public.status_code, "body": public.json()}
    report["introspectBefore"] = introspect()
    report["revokeStatus"] = client.revoke_token(disc["revocation_endpoint"], token=token2["refresh_token"]).status_code
    report["introspectAfter"] = introspect()
    report["refreshAfterRevoke"] = oauth_error(lambda: client.refresh_token(disc["token_endpoint"], refresh_token=token2["refresh_token"]))
    report["userinfoAfterRevoke"] = client.get(disc["userinfo_endpoint"], timeout=10).status_code

    r, verifier, state, _, _ = authorize(client, browser, disc)
    token3 = token_for(client, disc, r.headers["Location"], verifier, state)
    end = disc["end_session_endpoint"]
    bad = browser.get(end, params={"id_token_hint": token2["id_token"], "post_logout_redirect_uri": "http://evil.example/"},
                      allow_redirects=False, timeout=10)
    report["endSessionUnregistered"] = bad.status_code
    r = browser.get(end, params={"id_token_hint": token2["id_token"], "post_logout_redirect_uri": "http://127.0.0.1/bye",
                                 "state": "s1"}, allow_redirects=False, timeout=10)
    report["endSession"] = {"status": r.status_code, "location": r.headers.get("Location", "")}
    r, _, _, _, _ = authorize(client, browser, disc)
    report["afterLogout"] = {"status": r.status_code, "location": r.headers.get("Location", "")}
    report["refreshAfterLogout"] = oauth_error(lambda: client.refresh_token(disc["token_endpoint"], refresh_token=token3["refresh_token"]))
    report["userinfoAfterLogout"] = requests.get(disc["userinfo_endpoint"], timeout=10,
                                                 headers={"Authorization": "Bearer " + token3["access_token"]}).status_code


def transfer():
    """RFC 9470 with a transaction: challenge → authorize with the txid → approve → token with txn → retry."""
    client, browser = new_client(), requests.Session()
    login(browser, report)
    r, verifier, state, _, _ = authorize(client, browser, disc)
    token = token_for(client, disc, r.headers["Location"], verifier, state)
    body = {"amount": 100, "currency": "EUR", "payee": "Bob"}
    bearer = lambda t: {"Authorization": "Bearer " + t}
    first = requests.post(BASE + "/transfer", json=body, headers=bearer(token["access_token"]), timeout=10)
    challenge = first.headers.get("WWW-Authenticate", "")
    report["first"] = {"status": first.status_code, "challenge": challenge}
    params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    r, verifier, state, _, _ = authorize(client, browser, disc, acr_values=params["acr_values"], txid=params["txid"])
    location = r.headers.get("Location", "")
    report["approvalRedirect"] = {"status": r.status_code, "location": location}
    q = parse_qs(urlparse(location).query)
    step, done = journey(browser, "?authIndexType=composite_advice&authIndexValue=" + requests.utils.quote(q["authIndexValue"][0], safe=""),
                         [CODE])
    report["shown"] = [o["value"] for cb in step["callbacks"] for o in cb.get("output", []) if o["name"] == "message"]
    report["approved"] = done.status_code
    r = browser.get(q["goto"][0], allow_redirects=False, timeout=10)
    report["codeRedirect"] = {"status": r.status_code, "location": r.headers.get("Location", "")}
    approved = token_for(client, disc, r.headers["Location"], verifier, state)
    report["txn"] = claims_of(approved["access_token"], jwks).get("txn")
    # What the approval may not change: the authentication the tokens speak of (acr, auth_time).
    before, after = claims_of(token["access_token"], jwks), claims_of(approved["access_token"], jwks)
    report["authBefore"] = {"acr": before.get("acr"), "auth_time": before.get("auth_time")}
    report["authAfter"] = {"acr": after.get("acr"), "auth_time": after.get("auth_time")}
    if "refresh_token" in approved:
        refreshed = requests.post(disc["token_endpoint"], timeout=10, data={
            "grant_type": "refresh_token", "refresh_token": approved["refresh_token"], "client_id": "app"}).json()
        claims = claims_of(refreshed["access_token"], jwks) if "access_token" in refreshed else {}
        report["authRefreshed"] = {"acr": claims.get("acr"), "auth_time": claims.get("auth_time"), "txn": claims.get("txn")}
    retry = requests.post(BASE + "/transfer", json=body, headers=bearer(approved["access_token"]), timeout=10)
    report["retry"] = {"status": retry.status_code, "body": retry.json()}
    again = requests.post(BASE + "/transfer", json=body, headers=bearer(approved["access_token"]), timeout=10)
    report["again"] = {"status": again.status_code, "challenge": again.headers.get("WWW-Authenticate", "")}
    report["txid"] = params["txid"]


disc, jwks = discover()
report["discovery"] = disc
report["jwks"] = jwks
{"provider": provider, "transfer": transfer}[SCENARIO]()
print(json.dumps(report))
