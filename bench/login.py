#!/usr/bin/env python3
"""Logs in through a TxGate's Login journey (Name and Password callbacks) and prints the token.

usage: login.py PORT USERNAME PASSWORD [SCHEME]

SCHEME is http (the default) or https; over https the certificate is not checked (the
benchmarks' own self-signed one).
"""
import json
import ssl
import sys
import urllib.request

scheme = sys.argv[4] if len(sys.argv) > 4 else "http"
url = f"{scheme}://127.0.0.1:{sys.argv[1]}/am/json/realms/root/authenticate"
unverified = ssl._create_unverified_context()


def post(body):
    req = urllib.request.Request(url, data=json.dumps(body).encode() if body is not None else b"", method="POST",
                                 headers={"Content-Type": "application/json"})
    # Generous: under valgrind (bench/callgrind.sh --allow) a journey step takes seconds.
    return json.load(urllib.request.urlopen(req, timeout=60, context=unverified))


step = post(None)
step["callbacks"][0]["input"][0]["value"] = sys.argv[2]
step["callbacks"][1]["input"][0]["value"] = sys.argv[3]
print(post(step)["tokenId"])
