#!/usr/bin/env python3
"""Drives TxGate's passkey journeys over the wire with a software authenticator, as the ForgeRock
SDKs do (the `webAuthnOutcome` strings of forgerock-javascript-sdk `fr-webauthn/index.ts`), and
checks a Txn-Token's passkey evidence with an independent verifier (py_webauthn).

    passkey_flows.py --base http://localhost:PORT CASE

Cases (each prints one JSON object on stdout, and exits 0 when the run itself worked; the
Swift test (PasskeyWireTests) judges the statuses it reports):

    approve             register a passkey, approve a transaction with it, retry once, verify
                        the Txn-Token's evidence with py_webauthn; also the JSON outcome form
    wrong_origin        an assertion whose clientDataJSON names another origin
    wrong_rp            an assertion whose rpIdHash is another RP ID's
    counter             an assertion whose counter is not above the last one
    other_transaction   an assertion made for transaction A, presented in B's step
    replay              the same assertion twice (the same step, and another transaction's)
    unknown_credential  an assertion from a credential nobody registered
    other_user          another user's passkey, presented for demo's transaction
    uv_required         no UV flag, where the journey requires user verification
    malformed_cbor      a registration whose attestation object is not CBOR
    usernameless        a discoverable passkey signs in with no user name typed
    fallback            a step with a TOTP fallback: a user with no passkey gets the code page,
                        one with a passkey chooses it (the ConfirmationCallback)
    account             the passkeys API: list, delete (one's own only), refusals
    register            only register a passkey for demo (for the command line's test)
    eddsa               approve with an Ed25519 passkey
    spc                 Secure Payment Confirmation: the dialog's amount and payee, checked
"""

import base64
import hashlib
import hmac
import json
import os
import struct
import sys
import time
import urllib.error
import urllib.request

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from fido2 import cbor
from fido2.cose import CoseKey

PASSWORD = "S3cure-Transf3r!"
AUTH = "/am/json/realms/root/authenticate"
UP, UV, AT = 0x01, 0x04, 0x40


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def unb64url(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


SECRETS = {"demo": "JBSWY3DPEHPK3PXP", "other": "GEZDGNBVGY3TQOJQ"}


def totp(user):
    """RFC 6238 (SHA-1, 30 s, 6 digits) for the user's secret: what an authenticator app shows."""
    key = base64.b32decode(SECRETS[user])
    digest = hmac.new(key, struct.pack(">Q", int(time.time()) // 30), hashlib.sha1).digest()
    o = digest[-1] & 15
    return "%06d" % ((struct.unpack(">I", digest[o:o + 4])[0] & 0x7FFFFFFF) % 1000000)


def types(step):
    return [c["type"] for c in step.get("callbacks", [])]


def int8(b):
    """The bytes as the SDKs write them: `new Int8Array(buf).toString()`."""
    return ",".join(str(x - 256 if x > 127 else x) for x in b)


class Gateway:
    def __init__(self, base):
        self.base = base.rstrip("/")

    def request(self, method, path, body=None, headers=None):
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        h = {"Accept-API-Version": "resource=2.0, protocol=1.0"}
        if body is not None:
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=20) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def journey(self, path, body, token=None):
        status, _, raw = self.request("POST", path, body, {"iPlanetDirectoryPro": token} if token else {})
        try:
            return status, json.loads(raw or b"{}")
        except ValueError:
            return status, {"raw": raw.decode(errors="replace")}

    def login(self, user):
        _, step = self.journey(AUTH, {})
        step["callbacks"][0]["input"][0]["value"] = user
        step["callbacks"][1]["input"][0]["value"] = PASSWORD
        status, done = self.journey(AUTH, step)
        assert status == 200 and "tokenId" in done, (status, done)
        return done["tokenId"]


def metadata(step):
    cb = next(c for c in step["callbacks"] if c["type"] == "MetadataCallback")
    return next(o["value"] for o in cb["output"] if o["name"] == "data")


def answer(step, outcome):
    hidden = next(c for c in step["callbacks"] if c["type"] == "HiddenValueCallback")
    hidden["input"][0]["value"] = outcome
    return step


class Authenticator:
    """One ES256 (or EdDSA) credential of a software authenticator that keeps its own counter."""

    def __init__(self, alg=-7):
        self.alg = alg
        self.key = ec.generate_private_key(ec.SECP256R1()) if alg == -7 else ed25519.Ed25519PrivateKey.generate()
        self.cose = CoseKey.for_alg(alg).from_cryptography_key(self.key.public_key())
        self.credential_id = os.urandom(32)
        self.counter = 0
        self.user_handle = None

    def auth_data(self, rp_id, flags, counter, attested=b""):
        return hashlib.sha256(rp_id.encode()).digest() + bytes([flags]) + struct.pack(">I", counter) + attested

    def register(self, meta, origin, flags=UP | UV | AT, attestation_object=None, name="software key"):
        """The registration outcome string, as the JavaScript SDK writes it."""
        challenge = base64.b64decode(meta["challenge"])
        self.user_handle = meta["userId"].encode()
        client_data = json.dumps({"type": "webauthn.create", "challenge": b64url(challenge), "origin": origin,
                                  "crossOrigin": False}).encode()
        attested = (bytes(16) + struct.pack(">H", len(self.credential_id)) + self.credential_id + cbor.encode(dict(self.cose)))
        auth_data = self.auth_data(meta["_relyingPartyId"], flags, 0, attested)
        att = attestation_object if attestation_object is not None else cbor.encode({"fmt": "none", "attStmt": {}, "authData": auth_data})
        return f"{client_data.decode()}::{int8(att)}::{b64url(self.credential_id)}::{name}"

    def assert_(self, meta, origin, rp_id=None, flags=UP | UV, counter=None, challenge=None, handle=True, payment=None):
        """An assertion outcome string, as the JavaScript SDK writes it; with `payment`, a Secure
        Payment Confirmation assertion (type payment.get) whose dialog showed that."""
        challenge = challenge if challenge is not None else base64.b64decode(meta["challenge"])
        if counter is None:
            self.counter += 1
            counter = self.counter
        data = {"type": "payment.get" if payment else "webauthn.get", "challenge": b64url(challenge), "origin": origin,
                "crossOrigin": False}
        if payment:
            data["payment"] = payment
        client_data = json.dumps(data).encode()
        auth_data = self.auth_data(rp_id or meta["_relyingPartyId"], flags, counter)
        signed = auth_data + hashlib.sha256(client_data).digest()
        sig = self.key.sign(signed, ec.ECDSA(hashes.SHA256())) if self.alg == -7 else self.key.sign(signed)
        outcome = f"{client_data.decode()}::{int8(auth_data)}::{int8(sig)}::{b64url(self.credential_id)}"
        if handle and self.user_handle:
            outcome += "::" + self.user_handle.decode()
        return outcome


class Flow:
    def __init__(self, base):
        self.gw = Gateway(base)
        self.origin = self.gw.base
        self.tokens = {}

    def token(self, user="demo"):
        if user not in self.tokens:
            self.tokens[user] = self.gw.login(user)
        return self.tokens[user]

    def register(self, user="demo", authenticator=None, name="software key", **kw):
        a = authenticator or Authenticator()
        status, step = self.gw.journey(AUTH + "?authIndexType=service&authIndexValue=RegisterPasskey", {}, self.token(user))
        assert status == 200, (status, step)
        status, done = self.gw.journey(AUTH, answer(step, a.register(metadata(step), self.origin, name=name, **kw)), self.token(user))
        return a, status, done

    def challenge(self, path="/echo", body=None, user="demo"):
        body = body or {"amount": 250, "currency": "EUR", "payee": "Bob"}
        status, headers, raw = self.gw.request("POST", path, body, {"iPlanetDirectoryPro": self.token(user),
                                                                     "x-authenticate-response": "header"})
        assert status == 401, (status, raw)
        txid = json.loads(raw)["advices"]["TransactionConditionAdvice"][0]
        return txid, body

    def approval_step(self, txid, user="demo"):
        xml = ('<Advices><AttributeValuePair><Attribute name="TransactionConditionAdvice"/><Value>%s</Value>'
               '</AttributeValuePair></Advices>' % txid)
        status, step = self.gw.journey(AUTH + "?authIndexType=composite_advice&authIndexValue=" + urllib.request.quote(xml, safe=""),
                                       {}, self.token(user))
        assert status == 200 and "authId" in step, (status, step)
        return step

    def approval_step_status(self, txid, user="demo"):
        xml = ('<Advices><AttributeValuePair><Attribute name="TransactionConditionAdvice"/><Value>%s</Value>'
               '</AttributeValuePair></Advices>' % txid)
        status, body = self.gw.journey(AUTH + "?authIndexType=composite_advice&authIndexValue=" + urllib.request.quote(xml, safe=""),
                                       {}, self.token(user))
        return [status, body]

    def submit(self, step, outcome, user="demo"):
        return self.gw.journey(AUTH, answer(json.loads(json.dumps(step)), outcome), self.token(user))

    def retry(self, txid, body, path="/echo", user="demo"):
        return self.gw.request("POST", f"{path}?_txid={txid}", body, {"iPlanetDirectoryPro": self.token(user),
                                                                        "x-authenticate-response": "header"})


def verify_evidence(evidence, origin):
    """Checks, with py_webauthn and nothing of TxGate's, that the credential signed the challenge
    that commits to the approved bytes."""
    from webauthn import verify_authentication_response
    from webauthn.helpers.structs import AuthenticationCredential, AuthenticatorAssertionResponse

    nonce, approved = unb64url(evidence["nonce"]), unb64url(evidence["approved"])
    challenge = hashlib.sha256(nonce + approved).digest()
    credential = AuthenticationCredential(
        id=evidence["credentialId"], raw_id=unb64url(evidence["credentialId"]),
        response=AuthenticatorAssertionResponse(
            client_data_json=unb64url(evidence["clientDataJSON"]),
            authenticator_data=unb64url(evidence["authenticatorData"]),
            signature=unb64url(evidence["signature"]),
            user_handle=unb64url(evidence["userHandle"]) if "userHandle" in evidence else None))
    verify_authentication_response(credential=credential, expected_challenge=challenge, expected_rp_id=evidence["rpId"],
                                   expected_origin=origin, credential_public_key=unb64url(evidence["publicKey"]),
                                   credential_current_sign_count=0, require_user_verification=False)
    return json.loads(approved)


def txn_token_claims(echo_body):
    headers = {h["name"].lower(): h["value"] for h in json.loads(echo_body)["headers"]}
    payload = headers["txn-token"].split(".")[1]
    return json.loads(unb64url(payload))


def run(case, base):
    f = Flow(base)
    out = {"case": case}
    if case == "usernameless":
        a, status, _ = f.register()
        out["register"] = status
        status, step = f.gw.journey(AUTH + "?authIndexType=service&authIndexValue=PasskeyLogin", {})
        meta = metadata(step)
        out["allowCredentials"] = meta["_allowCredentials"]
        status, done = f.gw.journey(AUTH, answer(step, a.assert_(meta, f.origin)))
        out["status"] = status
        # The Android SDK's user handle: the handle's characters base64-decoded, then padded base64url.
        _, step2 = f.gw.journey(AUTH + "?authIndexType=service&authIndexValue=PasskeyLogin", {})
        android = base64.urlsafe_b64encode(base64.b64decode(a.user_handle)).decode()
        outcome = a.assert_(metadata(step2), f.origin, handle=False) + "::" + android
        out["android_handle_differs"] = android != a.user_handle.decode()
        out["android_status"], _ = f.gw.journey(AUTH, answer(step2, outcome))
        if status == 200:
            s, _, raw = f.gw.request("POST", "/am/json/realms/root/sessions?_action=validate", {},
                                     {"iPlanetDirectoryPro": done["tokenId"]})
            out["session"] = json.loads(raw)
        return out
    if case == "spc":
        a, out["register"], _ = f.register()
        txid, body = f.challenge()
        step = f.approval_step(txid)
        meta = metadata(step)
        shown = meta.get("_securePaymentConfirmation")
        out["shown"] = shown

        def payment(**changes):
            p = {"rpId": meta["_relyingPartyId"], "topOrigin": f.origin, "payeeOrigin": f.origin, "payeeName": shown.get("payeeName"),
                 "total": shown["total"], "instrument": dict(shown["instrument"], icon="data:image/png;base64,AA==")}
            p.update(changes)
            return p
        out["other_total"], out["other_total_body"] = f.submit(step, a.assert_(meta, f.origin, payment=payment(total={"currency": "EUR", "value": "25"})))
        step = f.approval_step(txid)
        out["other_payee"], _ = f.submit(step, a.assert_(metadata(step), f.origin, payment=payment(payeeName="Mallory")))
        step = f.approval_step(txid)
        out["status"], _ = f.submit(step, a.assert_(metadata(step), f.origin, payment=payment()))
        s, _, raw = f.retry(txid, body)
        out["retry"] = s
        if s == 200:
            evidence = txn_token_claims(raw)["tctx"]["passkey"]
            out["evidence_type"] = json.loads(unb64url(evidence["clientDataJSON"]))["type"]
        return out
    if case == "register":
        _, out["status"], _ = f.register()
        return out
    if case == "fallback":
        # No passkey: the one-time code page, as the TOTP node shows it.
        txid, _ = f.challenge(path="/echo-fallback", user="other")
        step = f.approval_step(txid, user="other")
        out["no_passkey_types"] = types(step)
        step["callbacks"][-1]["input"][0]["value"] = totp("other")
        out["no_passkey"], _ = f.gw.journey(AUTH, step, f.token("other"))
        # A passkey, and the choice of a code instead.
        f.register()
        txid, _ = f.challenge(path="/echo-fallback")
        step = f.approval_step(txid)
        out["passkey_types"] = types(step)
        choice = next(c for c in step["callbacks"] if c["type"] == "ConfirmationCallback")
        out["choice"] = next(o["value"] for o in choice["output"] if o["name"] == "options")
        choice["input"][0]["value"] = 0
        status, code_step = f.gw.journey(AUTH, step, f.token())
        out["chosen_types"] = types(code_step)
        code_step["callbacks"][-1]["input"][0]["value"] = totp("demo")
        out["status"], _ = f.gw.journey(AUTH, code_step, f.token())
        return out
    if case == "account":
        a, _, _ = f.register(name="phone")
        f.register(user="other")
        api = "/am/json/realms/root/passkeys?_action="
        def call(action, body, user="demo", ctype="application/json"):
            s, _, raw = f.gw.request("POST", api + action, body if isinstance(body, bytes) else json.dumps(body).encode(),
                                     {"iPlanetDirectoryPro": f.token(user), "Content-Type": ctype} if user else {"Content-Type": ctype})
            return s, json.loads(raw or b"{}")
        out["list"] = call("list", {})
        other_id = call("list", {}, user="other")[1]["result"][0]["id"]
        out["delete_others"] = call("delete", {"id": other_id})[0]
        out["no_session"] = call("list", {}, user=None)[0]
        out["as_form"] = call("delete", b"id=" + b64url(a.credential_id).encode(), ctype="application/x-www-form-urlencoded")[0]
        out["delete"] = call("delete", {"id": b64url(a.credential_id)})
        out["after"] = call("list", {})
        out["other_after"] = call("list", {}, user="other")[1]
        # The removed passkey approves nothing.
        txid, _ = f.challenge()
        step = f.approval_step_status(txid)
        out["approval_after_removal"] = step
        return out
    if case == "malformed_cbor":
        _, status, done = f.register(attestation_object=b"\xa3\x63fmt\x64none\x67attStmt")  # a map of 3 with 1 entry
        out["status"], out["body"] = status, done
        _, status, _ = f.register()
        out["after"] = status  # the gateway is still there, and registers the next one
        return out

    a, status, done = f.register(authenticator=Authenticator(alg=-8) if case == "eddsa" else None)
    out["register"] = status
    if status != 200:
        out["body"] = done
        return out
    txid, body = f.challenge()
    step = f.approval_step(txid)
    meta = metadata(step)
    out["allowCredentials"] = meta["_allowCredentials"]
    out["allowCredentialsScript"] = meta["allowCredentials"]

    if case == "approve" or case == "eddsa":
        legacy = a.assert_(meta, f.origin)
        # The JSON form the SDKs send when supportsJsonResponse is true.
        status, done = f.submit(step, json.dumps({"authenticatorAttachment": "platform", "legacyData": legacy}))
        out["status"] = status
        s, _, raw = f.retry(txid, body)
        out["retry"] = s
        s2, _, _ = f.retry(txid, body)
        out["second_retry"] = s2
        if s == 200:
            claims = txn_token_claims(raw)
            evidence = claims["tctx"]["passkey"]
            out["approved"] = verify_evidence(evidence, f.origin)
            out["independently_verified"] = True
            # The evidence does not verify for another amount.
            tampered = dict(out["approved"], bound=dict(out["approved"]["bound"], **{"/amount": 9999}))
            try:
                verify_evidence(dict(evidence, approved=b64url(json.dumps(tampered, separators=(",", ":")).encode())), f.origin)
                out["tampered_verified"] = True
            except Exception:  # noqa: BLE001
                out["tampered_verified"] = False
        return out
    if case == "wrong_origin":
        out["status"], out["body"] = f.submit(step, a.assert_(meta, "http://evil.example"))
    elif case == "wrong_rp":
        out["status"], out["body"] = f.submit(step, a.assert_(meta, f.origin, rp_id="evil.example"))
    elif case == "uv_required":
        txid2, body2 = f.challenge(path="/echo-uv")
        step2 = f.approval_step(txid2)
        out["without_uv"], out["body"] = f.submit(step2, a.assert_(metadata(step2), f.origin, flags=UP))
        step3 = f.approval_step(txid2)
        out["with_uv"], _ = f.submit(step3, a.assert_(metadata(step3), f.origin, flags=UP | UV))
        out["status"] = out["without_uv"]
    elif case == "counter":
        a.counter = 5
        out["first"], _ = f.submit(step, a.assert_(meta, f.origin))
        txid, body = f.challenge(body={"amount": 7, "currency": "EUR", "payee": "Eve"})
        step2 = f.approval_step(txid)
        out["status"], out["body"] = f.submit(step2, a.assert_(metadata(step2), f.origin, counter=3))
    elif case == "other_transaction":
        txid_b, _ = f.challenge(body={"amount": 9000, "currency": "EUR", "payee": "Mallory"})
        step_b = f.approval_step(txid_b)
        # Signed for A (250 to Bob), sent in B's step.
        out["status"], out["body"] = f.submit(step_b, a.assert_(meta, f.origin))
        s, _, _ = f.retry(txid_b, {"amount": 9000, "currency": "EUR", "payee": "Mallory"})
        out["b_retry"] = s
    elif case == "replay":
        outcome = a.assert_(meta, f.origin)
        out["first"], _ = f.submit(step, outcome)
        out["status"], out["body"] = f.submit(step, outcome)
        txid, body = f.challenge(body={"amount": 251, "currency": "EUR", "payee": "Bob"})
        out["other_step"], _ = f.submit(f.approval_step(txid), outcome)
    elif case == "unknown_credential":
        stranger = Authenticator()
        stranger.user_handle = a.user_handle
        out["status"], out["body"] = f.submit(step, stranger.assert_(meta, f.origin))
    elif case == "other_user":
        b, status, _ = f.register(user="other")
        out["other_register"] = status
        out["status"], out["body"] = f.submit(step, b.assert_(meta, f.origin))
    else:
        raise SystemExit(f"unknown case {case}")
    # The refused transaction's request (for counter and replay: the second one's) is not run.
    s, _, _ = f.retry(txid, body)
    out["retry"] = s
    return out


if __name__ == "__main__":
    args = sys.argv[1:]
    base = args[args.index("--base") + 1]
    case = [a for a in args if not a.startswith("--") and a != base][0]
    print(json.dumps(run(case, base), default=str))
