#!/usr/bin/env python3
"""An agent calling tools through TxGate with the Python MCP SDK's own client and OAuth provider
(discovery by RFC 9728 and RFC 8414, dynamic registration, PKCE, `resource`, step-up on
`403 insufficient_scope`). Only the person is automated: `redirect_handler` signs in and approves
on the gateway the way the login page does, with the TOTP code, for the authorization URL the SDK
opens; nothing of the SDK is changed.

    agent.py GATEWAY_URL STEPS_JSON

STEPS_JSON: a list of ["call", tool, arguments], ["deny_next"] (the person declines the next
approval), and ["forge", approved_arguments, sent_arguments] (outside the SDK, with the client it
registered: a transfer of approved_arguments is challenged and approved, and the token for it is
presented with sent_arguments instead, then with the approved ones). Prints one JSON object: each
call's outcome, and what the person was asked to approve.

With AGENT_CLIENT_METADATA_URL set, the SDK is given that URL as its `client_metadata_url`: where
the server supports Client ID Metadata Documents, the URL is its client_id and nothing registers.
"""
import asyncio
import base64
import hashlib
import hmac
import json
import os
import struct
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

BASE = sys.argv[1].rstrip("/")
STEPS = json.loads(sys.argv[2])
AUTH = BASE + "/am/json/realms/root/authenticate"
REDIRECT = "http://localhost:9/callback"   # never reached: the person's side reads the Location
report = {"calls": [], "approvals": []}


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a, **k):
        return None


opener = urllib.request.build_opener(NoRedirect)


def http(method, url, body=None, headers=None):
    data = None if body is None else json.dumps(body).encode()
    h = {"Accept-API-Version": "resource=2.0, protocol=1.0"}
    if body is not None:
        h["Content-Type"] = "application/json"
    h.update(headers or {})
    try:
        with opener.open(urllib.request.Request(url, data=data, method=method, headers=h), timeout=20) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def totp(secret="JBSWY3DPEHPK3PXP", step=0):
    key = base64.b32decode(secret)
    digest = hmac.new(key, struct.pack(">Q", int(time.time()) // 30 + step), hashlib.sha1).digest()
    o = digest[-1] & 15
    return "%06d" % ((struct.unpack(">I", digest[o:o + 4])[0] & 0x7FFFFFFF) % 1000000)


class Person:
    """The user at the gateway's pages: signed in once, approves (or declines) what is asked."""

    def __init__(self):
        self.session = None
        self.deny_next = False
        self.codes_used = 0
        self.result = None

    def sign_in(self):
        _, _, raw = http("POST", AUTH, {})
        step = json.loads(raw)
        step["callbacks"][0]["input"][0]["value"] = "demo"
        step["callbacks"][1]["input"][0]["value"] = os.environ.get("AGENT_PASSWORD", "S3cure-Transf3r!")
        status, _, raw = http("POST", AUTH, step)
        assert status == 200, raw
        self.session = json.loads(raw)["tokenId"]

    def authorize(self, url):
        if self.session is None:
            self.sign_in()
        cookie = {"Cookie": "iPlanetDirectoryPro=" + self.session}
        for _ in range(4):
            status, headers, raw = http("GET", url, headers=cookie)
            location = headers.get("Location", "")
            if status != 302:
                raise RuntimeError(f"authorize answered {status}: {raw[:300]}")
            if location.startswith(REDIRECT):
                q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(location).query))
                if "error" in q:
                    raise RuntimeError(f"authorize refused: {q}")
                self.result = AuthorizationCodeResult(code=q["code"], state=q.get("state"), iss=q.get("iss"))
                return
            # The login page with a transaction's composite advice: run its approval journey.
            q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(location).query))
            assert q.get("authIndexType") == "composite_advice", location
            start = AUTH + "?authIndexType=composite_advice&authIndexValue=" + urllib.parse.quote(q["authIndexValue"], safe="")
            if "goto" in q:
                start += "&goto=" + urllib.parse.quote(q["goto"], safe="")
            _, _, raw = http("POST", start, {}, {"iPlanetDirectoryPro": self.session})
            step = json.loads(raw)
            shown = [o["value"] for c in step["callbacks"] if c["type"] in ("TextOutputCallback", "ConfirmationCallback")
                     for o in c["output"] if o["name"] in ("message", "prompt")]
            report["approvals"].append(shown)
            if self.deny_next:
                self.deny_next = False
                txid = urllib.parse.unquote(q["authIndexValue"]).split("<Value>")[1].split("</Value>")[0]
                http("POST", BASE + "/am/json/realms/root/transactions?_action=decline", {"txid": txid},
                     {"iPlanetDirectoryPro": self.session})
                raise RuntimeError("the person declined")
            if step["callbacks"][-1]["type"] == "ConfirmationCallback":
                step["callbacks"][-1]["input"][0]["value"] = 0   # "Yes"
            else:
                # Each approval takes a code the user has not used yet (one per 30 s step).
                step["callbacks"][-1]["input"][0]["value"] = totp(step=self.codes_used)
                self.codes_used += 1
            status, _, raw = http("POST", AUTH, step, {"iPlanetDirectoryPro": self.session})
            assert status == 200, raw
            # As the login page does: on to where the journey says (the authorize URL, with what
            # the approval added to it).
            next_url = json.loads(raw).get("successUrl") or ""
            url = next_url if next_url.startswith(BASE) else url
        raise RuntimeError("authorize did not come back to the client")


class Memory:
    def __init__(self):
        self.tokens = None
        self.client = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, info: OAuthClientInformationFull):
        self.client = info
        report["client_id_prefix"] = info.client_id[:4]
        report["client_id"] = info.client_id


def mcp_call(token, arguments, id=7):
    body = {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "transfer", "arguments": arguments}}
    return http("POST", BASE + "/mcp", body, {"Authorization": "Bearer " + token, "Accept": "application/json, text/event-stream",
                                              "MCP-Protocol-Version": "2025-06-18"})


def forge(person, storage, approved, sent):
    """The approval of one call, spent on another: refused, and the approved one still runs once."""
    status, headers, _ = mcp_call(storage.tokens.access_token, approved)
    challenge = headers.get("WWW-Authenticate", "")
    out = {"challenge_status": status, "challenge": challenge}
    scope = challenge.split('scope="')[1].split('"')[0]
    verifier = base64.urlsafe_b64encode(hashlib.sha256(str(time.time()).encode()).digest()).rstrip(b"=").decode()
    challenge_s256 = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = urllib.parse.urlencode({"response_type": "code", "client_id": storage.client.client_id, "redirect_uri": REDIRECT,
                                    "scope": scope, "state": "s", "code_challenge": challenge_s256,
                                    "code_challenge_method": "S256", "resource": BASE + "/mcp"})
    person.authorize(BASE + "/am/oauth2/realms/root/authorize?" + query)
    status, _, raw = http("POST", BASE + "/am/oauth2/realms/root/access_token", None, {})
    form = urllib.parse.urlencode({"grant_type": "authorization_code", "code": person.result.code, "redirect_uri": REDIRECT,
                                   "client_id": storage.client.client_id, "code_verifier": verifier,
                                   "resource": BASE + "/mcp"}).encode()
    req = urllib.request.Request(BASE + "/am/oauth2/realms/root/access_token", data=form, method="POST",
                                 headers={"Content-Type": "application/x-www-form-urlencoded"})
    with urllib.request.urlopen(req, timeout=20) as r:
        token = json.loads(r.read())
    claims = json.loads(base64.urlsafe_b64decode(token["access_token"].split(".")[1] + "=="))
    out["token_aud"], out["token_txn"] = claims.get("aud"), claims.get("txn") is not None
    out["forged_status"] = mcp_call(token["access_token"], sent)[0]
    out["approved_status"] = mcp_call(token["access_token"], approved)[0]
    out["again_status"] = mcp_call(token["access_token"], approved)[0]
    return out


async def main():
    person = Person()
    storage = Memory()

    async def redirect_handler(url: str):
        person.authorize(url)

    async def callback_handler():
        return person.result

    metadata = OAuthClientMetadata(client_name="test agent", redirect_uris=[REDIRECT], grant_types=["authorization_code", "refresh_token"],
                                   response_types=["code"], token_endpoint_auth_method="none")
    provider = OAuthClientProvider(server_url=BASE + "/mcp", client_metadata=metadata, storage=storage,
                                   redirect_handler=redirect_handler, callback_handler=callback_handler,
                                   client_metadata_url=os.environ.get("AGENT_CLIENT_METADATA_URL"))
    try:
        await run(person, storage, provider)
    except BaseException as e:  # noqa: BLE001 - a declined approval ends the SDK's session with an exception group
        report["session_error"] = repr(e)[:300]
    print(json.dumps(report))


async def run(person, storage, provider):
    async with httpx2.AsyncClient(auth=provider, timeout=30) as http_client:
        async with streamable_http_client(BASE + "/mcp", http_client=http_client) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                await session.initialize()
                for s in STEPS:
                    if s[0] == "deny_next":
                        person.deny_next = True
                        continue
                    if s[0] == "forge":
                        report["forge"] = forge(person, storage, s[1], s[2])
                        continue
                    try:
                        result = await session.call_tool(s[1], s[2])
                        text = " ".join(getattr(c, "text", "") for c in result.content)
                        report["calls"].append({"tool": s[1], "ok": not result.is_error, "text": text})
                    except Exception as e:  # noqa: BLE001
                        report["calls"].append({"tool": s[1], "ok": False, "error": f"{type(e).__name__}: {e}"[:300]})


asyncio.run(main())
