#!/usr/bin/env python3
"""Issue 11 item 8: what 20 connections that each send 9 MiB of a 10 MiB body and then stall
cost the gateway, before and after the body timeout.

    bench/slow-bodies.py [BIN_DIR]   (default: the debug build, `swift build --show-bin-path`)

Starts demo-bank and txgate (plain proxy, one worker, default limits) from BIN_DIR, reads the
gateway's VmRSS from /proc/PID/status before, once the 20 bodies are in (peak), and 15 s
later (after limits.bodyTimeoutMs, 10 s), and prints the three figures and how many of the
connections the gateway had closed by then. Run it against two builds to compare.
"""
import json, os, socket, subprocess, sys, tempfile, time

N, SENT, DECLARED = 20, 9 << 20, 10 << 20
bindir = sys.argv[1] if len(sys.argv) > 1 else subprocess.check_output(["swift", "build", "--show-bin-path"], text=True).strip()

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def rss_mb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return -1

def wait_port(port, timeout=15):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close(); return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing listens on {port}")

tmp = tempfile.mkdtemp(prefix="txgate-slow-")
bank_port, gw_port = free_port(), free_port()
bank = subprocess.Popen([f"{bindir}/demo-bank", "--listen", f"127.0.0.1:{bank_port}"], stderr=subprocess.DEVNULL)
cfg = os.path.join(tmp, "gateway.json")
json.dump({"listen": f"127.0.0.1:{gw_port}", "workers": 1, "upstream": {"url": f"http://127.0.0.1:{bank_port}"},
           "log": {"level": "error", "access": False}}, open(cfg, "w"))
gw = subprocess.Popen([f"{bindir}/txgate", "serve", "--config", cfg], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp)
try:
    wait_port(bank_port); wait_port(gw_port)
    time.sleep(0.5)
    before = rss_mb(gw.pid)
    chunk = os.urandom(1 << 20)
    conns = []
    for i in range(N):
        c = socket.create_connection(("127.0.0.1", gw_port))
        c.sendall(f"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: {DECLARED}\r\n\r\n".encode())
        conns.append(c)
    for c in conns:
        for _ in range(SENT >> 20):
            c.sendall(chunk)
    time.sleep(1)
    peak = rss_mb(gw.pid)
    time.sleep(15)
    after = rss_mb(gw.pid)
    closed = 0
    for c in conns:
        c.settimeout(0.2)
        try:
            data = c.recv(65536)
            closed += 1 if data.startswith(b"HTTP/1.1 408") or data == b"" else 0
        except OSError as e:
            closed += 1 if not isinstance(e, socket.timeout) else 0
    print(f"{bindir}: VmRSS before {before:.0f} MB, with {N} x {SENT >> 20} MiB stalled {peak:.0f} MB, "
          f"16 s later {after:.0f} MB; {closed}/{N} connections answered 408 or closed")
    for c in conns:
        c.close()
finally:
    gw.kill(); bank.kill()
