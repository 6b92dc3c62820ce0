#!/usr/bin/env python3
"""A CIBA client (OpenID CIBA Core 1.0, poll mode) whose client authentication is authlib's own
`private_key_jwt` (RFC 7523): it signs the assertions, the gateway checks them.

    ciba_client.py authorize BASE CLIENT_ID KEY_PEM KID LOGIN_HINT [TXID]
        prints the bc-authorize answer (and, with "--replay", what re-sending the same assertion gets)
    ciba_client.py poll BASE CLIENT_ID KEY_PEM KID AUTH_REQ_ID
        polls (authlib's fetch_token with the CIBA grant) until an answer that is not pending or
        slow_down, and prints it
"""
import json
import sys
import time

import requests
from authlib.integrations.requests_client import OAuth2Session, OAuthError
from authlib.oauth2.rfc7523 import PrivateKeyJWT
from joserfc.jwk import ECKey

mode, base, client_id, key_file, kid = sys.argv[1:6]
issuer = base.rstrip("/") + "/am/oauth2/realms/root"
token_url = issuer + "/access_token"
method = PrivateKeyJWT(token_url, headers={"kid": kid}, alg="ES256")
session = OAuth2Session(client_id, ECKey.import_key(open(key_file).read()), token_endpoint_auth_method=method, scope="openid")

if mode == "authorize":
    data = {"scope": "openid", "login_hint": sys.argv[6], "binding_message": "Agent request"}
    if len(sys.argv) > 7:
        data["txid"] = sys.argv[7]
    # authlib's client authentication, on the back-channel endpoint (the body gets the assertion).
    prepared = requests.Request("POST", issuer + "/bc-authorize", data=data).prepare()
    prepared = session.client_auth(method)(prepared)
    prepared.prepare_content_length(prepared.body)
    r = requests.Session().send(prepared, timeout=20)
    out = {"status": r.status_code, "body": r.json()}
    # The very same request again: its assertion (jti) was used.
    again = requests.Session().send(prepared, timeout=20)
    out["replay_status"], out["replay_body"] = again.status_code, again.json()
    print(json.dumps(out))
else:
    auth_req_id = sys.argv[6]
    deadline = time.time() + 40
    while True:
        try:
            token = session.fetch_token(token_url, grant_type="urn:openid:params:grant-type:ciba", auth_req_id=auth_req_id)
            print(json.dumps({"token": dict(token)}))
            break
        except OAuthError as e:
            if e.error in ("authorization_pending", "slow_down") and time.time() < deadline:
                time.sleep(2.5 if e.error == "authorization_pending" else 8)
                continue
            print(json.dumps({"error": e.error}))
            break
