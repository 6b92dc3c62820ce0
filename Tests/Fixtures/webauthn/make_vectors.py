#!/usr/bin/env python3
"""Writes vectors.json beside this file: WebAuthn registrations and assertions for the unit tests
of TxGateCore's WebAuthn core (Tests/TxGateCoreTests/WebAuthnVerificationTests.swift).

A software authenticator (below) makes real authenticator output: keys from `cryptography`, the
authenticator data, COSE keys, attestation objects and client data through python-fido2's own
types and CBOR encoder. Every vector is then checked by python-fido2's server (Fido2Server, with
its "none" and "packed" attestation verifiers) before it is written, so the Swift side is tested
against bytes that an independent implementation accepts (or, for a refusal that fido2 also
checks, refuses). Refusals are correctly signed: only the one thing each is about is wrong, so
the Swift verifier must find that thing, not a bad signature.

Not byte-reproducible (ECDSA and RSA keys/signatures are random); the tests read the checked-in
file, so Python is needed only to make a new one:

    python3 -m venv /tmp/webauthn-venv
    /tmp/webauthn-venv/bin/pip install 'fido2>=2.2,<3'
    /tmp/webauthn-venv/bin/python Tests/Fixtures/webauthn/make_vectors.py
"""

import base64
import hashlib
import json
import os
import struct

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from fido2 import cbor
from fido2.attestation import Attestation
from fido2.cose import CoseKey
from fido2.server import Fido2Server
from fido2.utils import websafe_encode
from fido2.webauthn import (
    AttestationObject,
    AttestedCredentialData,
    AuthenticationResponse,
    AuthenticatorAssertionResponse,
    AuthenticatorAttestationResponse,
    AuthenticatorData,
    CollectedClientData,
    RegistrationResponse,
)

RP_ID = "bank.example"
ORIGINS = ["https://bank.example", "https://login.bank.example"]
OTHER_ORIGIN = "https://bank.example.evil"
F = AuthenticatorData.FLAG
UP, UV, BE, BS, AT, ED = F.UP, F.UV, F.BE, F.BS, F.AT, F.ED


def b64(b: bytes) -> str:
    return websafe_encode(b)


def sha256(b: bytes) -> bytes:
    return hashlib.sha256(b).digest()


def challenge(label: str) -> bytes:
    """A fixed 32-byte challenge per case, so a test can name it; the server side of a real
    ceremony draws it at random."""
    return sha256(b"challenge:" + label.encode())


class SoftAuthenticator:
    """One credential of a software authenticator: ES256 (P-256), EdDSA (Ed25519) or RS256."""

    def __init__(self, alg: int, aaguid: bytes):
        self.alg = alg
        self.aaguid = aaguid
        self.credential_id = os.urandom(32)
        if alg == -7:
            self.key = ec.generate_private_key(ec.SECP256R1())
        elif alg == -8:
            self.key = ed25519.Ed25519PrivateKey.generate()
        elif alg == -257:
            self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        else:
            raise ValueError(alg)
        self.cose = CoseKey.for_alg(alg).from_cryptography_key(self.key.public_key())

    def sign(self, data: bytes) -> bytes:
        if self.alg == -7:
            return self.key.sign(data, ec.ECDSA(hashes.SHA256()))  # DER Ecdsa-Sig-Value
        if self.alg == -8:
            return self.key.sign(data)
        return self.key.sign(data, padding.PKCS1v15(), hashes.SHA256())

    def attested(self) -> AttestedCredentialData:
        return AttestedCredentialData.create(self.aaguid, self.credential_id, self.cose)

    def make_credential(self, rp_id, client_data, flags, fmt, counter=0, extensions=None, stmt=None, signer=None):
        attested = self.attested() if flags & AT else b""  # without AT: a malformed response, for a refusal
        auth_data = AuthenticatorData.create(sha256(rp_id.encode()), flags, counter, attested, extensions)
        if stmt is None:
            if fmt == "none":
                stmt = {}
            else:  # packed self attestation: the credential key signs authData || clientDataHash
                stmt = {"alg": self.alg, "sig": (signer or self).sign(auth_data + client_data.hash)}
        return AttestationObject.create(fmt, auth_data, stmt)

    def get_assertion(self, rp_id, client_data, flags, counter, extensions=None, signer=None):
        auth_data = AuthenticatorData.create(sha256(rp_id.encode()), flags, counter, b"", extensions)
        return auth_data, (signer or self).sign(auth_data + client_data.hash)


def verify_attestation(attestation_object, client_data_hash):
    Attestation.for_type(attestation_object.fmt)().verify(
        attestation_object.att_stmt, attestation_object.auth_data, client_data_hash)


server = Fido2Server({"id": RP_ID, "name": "Bank"}, attestation="direct",
                     verify_origin=lambda o: o in ORIGINS, verify_attestation=verify_attestation)


def fido2_registration(state_challenge, require_uv, raw_id, client_data, attestation_object):
    state = {"challenge": b64(state_challenge), "user_verification": "required" if require_uv else None}
    response = RegistrationResponse(raw_id=raw_id, response=AuthenticatorAttestationResponse(
        client_data=client_data, attestation_object=attestation_object))
    try:
        server.register_complete(state, response)
        return "ok"
    except Exception as e:  # noqa: BLE001
        return f"refused: {type(e).__name__}: {e}"


def fido2_assertion(state_challenge, require_uv, cred, client_data, auth_data, sig, user_handle):
    state = {"challenge": b64(state_challenge), "user_verification": "required" if require_uv else None}
    response = AuthenticationResponse(raw_id=cred.credential_id, response=AuthenticatorAssertionResponse(
        client_data=client_data, authenticator_data=auth_data, signature=sig, user_handle=user_handle))
    try:
        server.authenticate_complete(state, [cred.attested()], response)
        return "ok"
    except Exception as e:  # noqa: BLE001
        return f"refused: {type(e).__name__}: {e}"


AAGUID_NONE = b"\x00" * 16
AAGUID_PLATFORM = bytes.fromhex("fbfc3007154e4ecc8c0b6e020557d7bd")  # any 16 bytes; not a real model's

es256 = SoftAuthenticator(-7, AAGUID_NONE)
eddsa = SoftAuthenticator(-8, AAGUID_PLATFORM)
rs256 = SoftAuthenticator(-257, AAGUID_NONE)
es256_other = SoftAuthenticator(-7, AAGUID_NONE)  # signs where the credential's key should
credentials = {"es256": es256, "eddsa": eddsa, "rs256": rs256}
user_handle = sha256(b"user:alice")[:16]

registrations = []
assertions = []


def common(kind, name, cred, expect, seen, fido2_expect, expected_challenge, require_uv, client_data):
    """The members both kinds of vector have, once fido2's verdict is the one expected: "ok" for a
    good vector, a refusal for a bad one, or `fido2_expect` where fido2 does not check that thing
    (counters, crossOrigin, backup flags), so accepts what TxGate refuses."""
    want = fido2_expect or ("ok" if expect == "ok" else "refused")
    if not seen.startswith(want):
        raise SystemExit(f"{kind} {name}: fido2 says {seen!r}, expected {want}")
    return {
        "name": name, "credential": [k for k, v in credentials.items() if v is cred][0],
        "expect": expect, "fido2": seen, "requireUserVerification": require_uv,
        "challenge": b64(expected_challenge), "rawId": b64(cred.credential_id), "clientDataJSON": b64(client_data),
    }


def registration(name, cred, expect, flags=UP | AT, fmt="none", origin=ORIGINS[0], typ="webauthn.create",
                 rp_id=RP_ID, signed_challenge=None, require_uv=False, extensions=None, stmt=None,
                 signer=None, cross_origin=False, fido2_expect=None):
    expected_challenge = challenge("reg:" + name)
    client_data = CollectedClientData.create(typ, signed_challenge or expected_challenge, origin,
                                             cross_origin=cross_origin)
    att = cred.make_credential(rp_id, client_data, flags, fmt, 0, extensions, stmt, signer)
    seen = fido2_registration(expected_challenge, require_uv, cred.credential_id, client_data, att)
    registrations.append(common("registration", name, cred, expect, seen, fido2_expect, expected_challenge,
                                require_uv, client_data) | {
        "attestationObject": b64(att), "credentialPublicKey": b64(cbor.encode(cred.cose)),
        "aaguid": cred.aaguid.hex(), "flags": int(flags), "alg": cred.alg,
    })


def assertion(name, cred, expect, counter, stored, flags=UP, origin=ORIGINS[0], typ="webauthn.get",
              rp_id=RP_ID, signed_challenge=None, require_uv=False, extensions=None, signer=None,
              cross_origin=False, stored_backup_eligible=None, fido2_expect=None):
    expected_challenge = challenge("get:" + name)
    client_data = CollectedClientData.create(typ, signed_challenge or expected_challenge, origin,
                                             cross_origin=cross_origin)
    auth_data, sig = cred.get_assertion(rp_id, client_data, flags, counter, extensions, signer)
    seen = fido2_assertion(expected_challenge, require_uv, cred, client_data, auth_data, sig, user_handle)
    assertions.append(common("assertion", name, cred, expect, seen, fido2_expect, expected_challenge,
                             require_uv, client_data) | {
        "authenticatorData": b64(auth_data), "signature": b64(sig), "userHandle": b64(user_handle),
        "storedSignCount": stored, "signCount": counter, "flags": int(flags),
        "storedBackupEligible": bool(flags & BE) if stored_backup_eligible is None else stored_backup_eligible,
    })


# Registrations that verify. The first three are the credentials the assertions use.
registration("es256-none", es256, "ok")
registration("eddsa-packed-self", eddsa, "ok", flags=UP | UV | BE | BS | AT, fmt="packed", require_uv=True)
registration("rs256-packed-self", rs256, "ok", flags=UP | UV | AT, fmt="packed")
registration("es256-packed-self", es256, "ok", flags=UP | UV | AT, fmt="packed")
registration("eddsa-none", eddsa, "ok", flags=UP | UV | BE | AT)
registration("rs256-none", rs256, "ok")
# Extensions after the credential public key (ED): the key's CBOR item ends before them.
registration("es256-none-extensions", es256, "ok", flags=UP | AT | ED, extensions={"credProtect": 2})
registration("es256-second-origin", es256, "ok", origin=ORIGINS[1])

# Registrations refused, each for one reason (correctly signed otherwise).
registration("reg-wrong-origin", es256, "wrongOrigin", origin=OTHER_ORIGIN)
registration("reg-wrong-type", es256, "wrongType", typ="webauthn.get")
registration("reg-wrong-challenge", es256, "challengeMismatch", signed_challenge=challenge("another"))
registration("reg-wrong-rp-id", es256, "wrongRPIDHash", rp_id="evil.example")
registration("reg-user-not-present", es256, "userNotPresent", flags=AT)
registration("reg-user-not-verified", es256, "userNotVerified", require_uv=True)
registration("reg-backup-state-without-eligibility", es256, "backupStateWithoutEligibility",
             flags=UP | BS | AT, fido2_expect="ok")
registration("reg-cross-origin", es256, "crossOrigin", cross_origin=True, fido2_expect="ok")
registration("reg-packed-alg-mismatch", es256, "attestationAlgorithmMismatch", fmt="packed",
             stmt={"alg": -257, "sig": b"\x00" * 70})
registration("reg-packed-other-key", es256, "badAttestationSignature", fmt="packed", signer=es256_other)
registration("reg-packed-x5c", es256, "unsupportedAttestation", fmt="packed",
             stmt={"alg": -7, "sig": b"\x00" * 70, "x5c": [b"\x30\x00"]})
registration("reg-none-with-statement", es256, "malformedAttestationStatement",
             stmt={"alg": -7, "sig": b"\x00" * 70})
registration("reg-unknown-format", es256, "unsupportedAttestation", fmt="tpm", stmt={"ver": "2.0"})
registration("reg-no-attested-credential", es256, "noAttestedCredentialData", flags=UP, fido2_expect="refused")

# Assertions that verify.
assertion("es256-up", es256, "ok", counter=1, stored=0)
assertion("es256-up-uv", es256, "ok", counter=2, stored=1, flags=UP | UV, require_uv=True)
assertion("eddsa-zero-counter", eddsa, "ok", counter=0, stored=0, flags=UP | UV | BE | BS, require_uv=True)
assertion("rs256-up", rs256, "ok", counter=5, stored=4)
assertion("es256-extensions", es256, "ok", counter=9, stored=3, flags=UP | ED, extensions={"credProtect": 2})
assertion("es256-second-origin", es256, "ok", counter=10, stored=9, origin=ORIGINS[1])

# Assertions refused, each for one reason.
assertion("get-wrong-origin", es256, "wrongOrigin", counter=3, stored=2, origin=OTHER_ORIGIN)
assertion("get-wrong-type", es256, "wrongType", counter=3, stored=2, typ="webauthn.create")
assertion("get-wrong-challenge", es256, "challengeMismatch", counter=3, stored=2,
          signed_challenge=challenge("another"))
assertion("get-wrong-rp-id", es256, "wrongRPIDHash", counter=3, stored=2, rp_id="evil.example")
assertion("get-user-not-present", es256, "userNotPresent", counter=3, stored=2, flags=UV)
assertion("get-user-not-verified", es256, "userNotVerified", counter=3, stored=2, require_uv=True)
assertion("get-counter-regression", es256, "counterRegression", counter=3, stored=7, fido2_expect="ok")
assertion("get-counter-equal", rs256, "counterRegression", counter=7, stored=7, fido2_expect="ok")
assertion("get-counter-zero-after-nonzero", eddsa, "counterRegression", counter=0, stored=4,
          flags=UP | BE, fido2_expect="ok")
assertion("get-other-key", es256, "badSignature", counter=3, stored=2, signer=es256_other)
assertion("get-eddsa-other-key", eddsa, "badSignature", counter=0, stored=0, flags=UP | BE,
          signer=SoftAuthenticator(-8, AAGUID_NONE))
assertion("get-backup-state-without-eligibility", es256, "backupStateWithoutEligibility", counter=3, stored=2,
          flags=UP | BS, stored_backup_eligible=False, fido2_expect="ok")
assertion("get-backup-eligibility-changed", es256, "backupEligibilityChanged", counter=3, stored=2,
          flags=UP | BE, stored_backup_eligible=False, fido2_expect="ok")
assertion("get-cross-origin", es256, "crossOrigin", counter=3, stored=2, cross_origin=True, fido2_expect="ok")

out = {
    "about": "Made by make_vectors.py (beside this file) with python-fido2's types and a software "
             "authenticator; each vector was checked by python-fido2's Fido2Server ('fido2').",
    "rpId": RP_ID, "origins": ORIGINS, "userHandle": b64(user_handle),
    "registrations": registrations, "assertions": assertions,
}
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vectors.json")
with open(path, "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
print(f"{path}: {len(registrations)} registrations, {len(assertions)} assertions")
