#!/usr/bin/env python3
"""A small stand-in for AM: it answers the agent's login journey (Name and Password callbacks),
session validation, and policies?_action=evaluate with the recorded answers of
evaluate-answers.json, chosen by the last path segment of the resource asked about. Every other
request is answered as the backend (so one process is both AM and upstream).

usage: fixture_am.py PORT AGENT_PASSWORD
"""
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = {c["name"]: c for c in json.load(open(os.path.join(HERE, "evaluate-answers.json")))["cases"]}
AGENT_PASSWORD = sys.argv[2]
AGENT_TOKEN = "fixture-agent-token"
USER_TOKEN = "fixture-user-token"
COUNTS = {}
SUBJECTS = {}
LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body, content_type="application/json"):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return json.loads(raw) if raw else {}
        except ValueError:
            return {}

    def do_GET(self):
        path = urlsplit(self.path).path
        if path.startswith("/-fixture/count/"):
            name = path.rsplit("/", 1)[1]
            with LOCK:
                self.answer(200, json.dumps({"count": COUNTS.get(name, 0), "subject": SUBJECTS.get(name)}))
            return
        self.answer(200, json.dumps({"upstream": path, "user": self.headers.get("X-TxGate-User")}))

    def do_POST(self):
        path = urlsplit(self.path).path
        body = self.body()
        if path.endswith("/authenticate"):
            self.authenticate(body)
        elif path.endswith("/sessions"):
            valid = body.get("tokenId") == USER_TOKEN
            self.answer(200, json.dumps({"valid": True, "uid": "demo", "realm": "/"} if valid else {"valid": False}))
        elif path.endswith("/policies"):
            self.evaluate(body)
        else:
            self.answer(200, json.dumps({"upstream": path}))

    def authenticate(self, body):
        callbacks = body.get("callbacks")
        if not callbacks:
            self.answer(200, json.dumps({"authId": "fixture-auth-id", "callbacks": [
                {"type": "NameCallback", "output": [{"name": "prompt", "value": "User Name"}],
                 "input": [{"name": "IDToken1", "value": ""}], "_id": 0},
                {"type": "PasswordCallback", "output": [{"name": "prompt", "value": "Password"}],
                 "input": [{"name": "IDToken2", "value": ""}], "_id": 1}]}))
            return
        values = [cb["input"][0]["value"] for cb in callbacks]
        if values == ["gateway-agent", AGENT_PASSWORD]:
            self.answer(200, json.dumps({"tokenId": AGENT_TOKEN, "successUrl": "/am/console", "realm": "/"}))
        else:
            self.answer(401, json.dumps({"code": 401, "reason": "Unauthorized", "message": "Login failure"}))

    def evaluate(self, body):
        if self.headers.get("iPlanetDirectoryPro") != AGENT_TOKEN:
            self.answer(401, json.dumps({"code": 401, "reason": "Unauthorized", "message": "Access Denied"}))
            return
        resource = body["resources"][0]
        name = urlsplit(resource).path.rsplit("/", 1)[1]
        with LOCK:
            COUNTS[name] = COUNTS.get(name, 0) + 1
            SUBJECTS[name] = body.get("subject")
        case = CASES.get(name)
        if case is None:
            self.answer(404, json.dumps({"code": 404, "message": "no such case"}))
            return
        self.answer(200, case["body"].replace("RESOURCE", resource))


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
