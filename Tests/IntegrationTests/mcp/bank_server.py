#!/usr/bin/env python3
"""An MCP server (the Python MCP SDK's MCPServer, Streamable HTTP) with one `transfer` tool, for
the MCP tests (McpStepUpTests): every call that reaches it is appended to LOG as one JSON line,
so the test counts executions. It has no authentication of its own: TxGate is in front.

    bank_server.py PORT LOG
"""
import json
import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

port, log = int(sys.argv[1]), sys.argv[2]
server = MCPServer("demo-bank")


@server.tool()
def transfer(amount: float, currency: str, payee: str) -> str:
    """Sends money to a payee."""
    with open(log, "a") as f:
        f.write(json.dumps({"amount": amount, "currency": currency, "payee": payee}) + "\n")
    return f"sent {amount} {currency} to {payee}"


@server.tool()
def balance() -> str:
    """The account's balance (needs no approval)."""
    return "1000 EUR"


server.run("streamable-http", host="127.0.0.1", port=port, json_response=True, stateless_http=True,
           transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
