#!/usr/bin/env python3
"""Logs in through a TxGate's Login journey (Name and Password callbacks) and prints the token.

usage: login.py PORT USERNAME PASSWORD
"""
import json
import sys
import urllib.request

url = f"http://127.0.0.1:{sys.argv[1]}/am/json/realms/root/authenticate"


def post(body):
    req = urllib.request.Request(url, data=json.dumps(body).encode() if body is not None else b"", method="POST",
                                 headers={"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req))


step = post(None)
step["callbacks"][0]["input"][0]["value"] = sys.argv[2]
step["callbacks"][1]["input"][0]["value"] = sys.argv[3]
print(post(step)["tokenId"])
