#!/usr/bin/env python3
"""Serves one client metadata document over HTTPS, as an MCP client's host would, and logs each
request's path (one line each) so that a test can tell whether the gateway fetched it.

    metadata_server.py PORT CERT KEY DOCUMENT LOG

The document is served at its own path (the path of its `client_id`); anything else is a 404.
"""
import http.server
import json
import ssl
import sys
import urllib.parse

PORT, CERT, KEY, DOCUMENT, LOG = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
with open(DOCUMENT, "rb") as f:
    BODY = f.read()
PATH = urllib.parse.urlsplit(json.loads(BODY)["client_id"]).path


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(LOG, "a") as log:
            log.write(self.path + "\n")
        if self.path != PATH:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(CERT, KEY)
server.socket = context.wrap_socket(server.socket, server_side=True)
server.serve_forever()
