"""bench/bearer.sh's setup: `config TMP BANK_PORT PORT HASH` writes the gateway's configuration;
`tokens PORT` logs in and prints a session token and an access token (authorize with PKCE)."""
import base64
import hashlib
import json
import secrets
import sys
import urllib.error
import urllib.parse
import urllib.request


def config(tmp, bank, port, phash):
    json.dump({
        "listen": f"127.0.0.1:{port}", "upstream": {"url": f"http://127.0.0.1:{bank}"}, "workers": 1,
        "log": {"access": False, "level": "warning"},
        "users": [{"username": "demo", "passwordHash": phash, "email": "d@example.com"}],
        "journeys": {"Login": [{"type": "UsernamePassword"}]},
        "store": {"path": f"{tmp}/txgate.db"},
        "secrets": {"signingKeyFile": f"{tmp}/signing.key", "tokenKeysFolder": f"{tmp}/keys"},
        "policies": [{"name": "accounts", "resources": ["/accounts"], "actions": ["GET"], "subjects": "authenticated"}],
        "oauth2": {"accessTokenTtlS": 3600, "clients": [{"clientId": "bench", "public": True, "scopes": ["openid"],
                                                         "redirectUris": ["http://127.0.0.1/callback"]}]},
    }, open(f"{tmp}/gateway.json", "w"))


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args):
        return None


def post(url, body, content_type):
    return urllib.request.urlopen(urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": content_type}))


def tokens(port):
    base = f"http://127.0.0.1:{port}"
    auth = base + "/am/json/realms/root/authenticate"
    step = json.load(post(auth, b"", "application/json"))
    step["callbacks"][0]["input"][0]["value"] = "demo"
    step["callbacks"][1]["input"][0]["value"] = "bench-password"
    session = json.load(post(auth, json.dumps(step).encode(), "application/json"))["tokenId"]
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    q = urllib.parse.urlencode({"client_id": "bench", "response_type": "code", "scope": "openid", "state": "s",
                                "redirect_uri": "http://127.0.0.1/callback", "code_challenge": challenge,
                                "code_challenge_method": "S256"})
    request = urllib.request.Request(base + "/am/oauth2/realms/root/authorize?" + q, headers={"Cookie": "iPlanetDirectoryPro=" + session})
    try:
        urllib.request.build_opener(NoRedirect).open(request)
        raise SystemExit("authorize did not redirect")
    except urllib.error.HTTPError as e:
        code = urllib.parse.parse_qs(urllib.parse.urlparse(e.headers["Location"]).query)["code"][0]
    form = urllib.parse.urlencode({"grant_type": "authorization_code", "client_id": "bench", "code": code,
                                   "code_verifier": verifier, "redirect_uri": "http://127.0.0.1/callback"}).encode()
    token = json.load(post(base + "/am/oauth2/realms/root/access_token", form, "application/x-www-form-urlencoded"))
    print(session, token["access_token"])


if __name__ == "__main__":
    {"config": config, "tokens": tokens}[sys.argv[1]](*sys.argv[2:])
