#!/usr/bin/env python3
"""Step-up cycle driver for bench/stepup.sh (Python 3 standard library only).

One cycle, as an SDK client does it:
  1. POST /transfer with a session and `x-authenticate-response: header` -> 401 SSOADVICE (a new TxId)
  2. POST /am/json/realms/root/authenticate?authIndexType=composite_advice&authIndexValue=<advice XML>
  3. POST the TOTP code into that step -> 200 (transaction COMPLETED)
  4. POST /transfer?_txid=<TxId> -> 201 from demo-bank (transaction consumed)

  stepup.py login  --port P --users bench0-999     logs every user in, prints {"user": token} JSON
  stepup.py run    --port P --tokens FILE --seconds S --concurrency C [--procs N]

`run` spreads its C threads over N processes (one GIL each), so that the client is less of a
bottleneck on a small machine.

A TOTP code is accepted once per user, within +-1 step of 30 s, so a user has three codes at a
time; each worker thread owns its own users and never reuses a code. `run` stops a thread early
when its users have no code left and says so (raise BENCH_USERS).
"""
import argparse
import base64
import hashlib
import hmac
import http.client
import json
import multiprocessing
import struct
import sys
import threading
import time
import urllib.parse

AUTH = "/am/json/realms/root/authenticate"
BODY = b'{"amount":100,"currency":"EUR","payee":"Bob"}'
JSON_HEADERS = {"Content-Type": "application/json", "Accept-API-Version": "resource=2.0, protocol=1.0"}


def totp(secret_b32, counter):
    key = base64.b32decode(secret_b32 + "=" * (-len(secret_b32) % 8))
    digest = hmac.new(key, struct.pack(">Q", counter), hashlib.sha1).digest()
    offset = digest[-1] & 0x0F
    value = struct.unpack(">I", digest[offset:offset + 4])[0] & 0x7FFFFFFF
    return "%06d" % (value % 1000000)


class Client:
    """One keep-alive connection; reconnects if the server closes it."""

    def __init__(self, port):
        self.port = port
        self.conn = None

    def request(self, method, target, body=None, headers=None):
        for attempt in (1, 2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            try:
                self.conn.request(method, target, body=body, headers=headers or {})
                r = self.conn.getresponse()
                data = r.read()
                if r.getheader("Connection", "").lower() == "close":
                    self.conn.close()
                    self.conn = None
                return r.status, data
            except (http.client.HTTPException, ConnectionError):
                self.conn.close()
                self.conn = None
                if attempt == 2:
                    raise


def answer(step, values):
    values = list(values)
    for cb in step.get("callbacks", []):
        inputs = cb.get("input") or []
        if inputs and values:
            inputs[0]["value"] = values.pop(0)
    return step


def login(client, user, password):
    status, data = client.request("POST", AUTH, b"", JSON_HEADERS)
    if status != 200:
        raise RuntimeError("login start for %s: %d %s" % (user, status, data[:200]))
    step = answer(json.loads(data), [user, password])
    status, data = client.request("POST", AUTH, json.dumps(step).encode(), JSON_HEADERS)
    if status != 200:
        raise RuntimeError("login of %s: %d %s" % (user, status, data[:200]))
    return json.loads(data)["tokenId"]


class CycleError(RuntimeError):
    pass


def cycle(client, token, code):
    session = {"iPlanetDirectoryPro": token}
    status, data = client.request("POST", "/transfer", BODY,
                                  {"x-authenticate-response": "header", "Content-Type": "application/json", **session})
    if status != 401:
        raise CycleError("challenge: expected 401, got %d %s" % (status, data[:200]))
    txid = json.loads(data)["advices"]["TransactionConditionAdvice"][0]
    xml = ('<Advices><AttributeValuePair><Attribute name="TransactionConditionAdvice"/><Value>%s</Value>'
           '</AttributeValuePair></Advices>' % txid)
    target = AUTH + "?authIndexType=composite_advice&authIndexValue=" + urllib.parse.quote(xml, safe="")
    status, data = client.request("POST", target, b"", {**JSON_HEADERS, **session})
    if status != 200:
        raise CycleError("composite_advice start: %d %s" % (status, data[:200]))
    step = answer(json.loads(data), [code])
    status, data = client.request("POST", AUTH, json.dumps(step).encode(), {**JSON_HEADERS, **session})
    if status != 200:
        raise CycleError("TOTP submit: %d %s" % (status, data[:200]))
    status, data = client.request("POST", "/transfer?_txid=" + txid, BODY, {"Content-Type": "application/json", **session})
    if status != 201:
        raise CycleError("retry: expected 201, got %d %s" % (status, data[:200]))


def users_arg(text):
    prefix, _, span = text.rpartition("-")
    head = prefix.rstrip("0123456789")
    first = int(prefix[len(head):])
    return ["%s%d" % (head, i) for i in range(first, int(span) + 1)]


def cmd_login(args):
    users = users_arg(args.users)
    tokens = {}
    lock = threading.Lock()
    errors = []

    def work(mine):
        client = Client(args.port)
        for u in mine:
            try:
                t = login(client, u, args.password)
            except Exception as e:  # report, do not hide
                errors.append("%s: %s" % (u, e))
                return
            with lock:
                tokens[u] = t

    threads = [threading.Thread(target=work, args=(users[i::args.concurrency],)) for i in range(args.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        sys.exit("stepup.py login: %d failures, first: %s" % (len(errors), errors[0]))
    json.dump(tokens, sys.stdout)


def run_slice(args, tokens, users, nthreads, ready, go, deadline, out):
    """Runs `nthreads` worker threads over `users` in this process until the shared deadline, and
    sends back (latencies, errors, threads out of codes, CPU seconds) through `out`."""
    latencies = []
    lock = threading.Lock()
    errors = []
    exhausted = [0]
    local_gate = threading.Barrier(nthreads + 1)

    def work(mine):
        client = Client(args.port)
        used = {u: set() for u in mine}
        mine_lat = []
        local_gate.wait()
        end = deadline.value
        i = 0
        while time.monotonic() < end:
            now = time.time()
            now_step = int(now) // 30
            # The previous step's code only while it stays accepted until the gateway checks it.
            # Oldest first: the gateway refuses a user's code older than the last one it took
            # (replay protection), so a user's codes must be spent in ascending order.
            candidates = ((now_step - 1,) if now % 30 < 25 else ()) + (now_step, now_step + 1)
            picked = None
            for k in range(len(mine)):
                u = mine[(i + k) % len(mine)]
                free = [c for c in candidates if c not in used[u]]
                if free:
                    picked = (u, free[0])
                    i = (i + k + 1) % len(mine)
                    break
            if picked is None:
                with lock:
                    exhausted[0] += 1
                break
            u, counter = picked
            used[u].add(counter)
            t0 = time.monotonic()
            try:
                cycle(client, tokens[u], totp(args.secret, counter))
            except Exception as e:
                with lock:
                    errors.append("%s: %s" % (u, e))
                break
            mine_lat.append(time.monotonic() - t0)
        with lock:
            latencies.extend(mine_lat)

    threads = [threading.Thread(target=work, args=(users[i::nthreads],)) for i in range(nthreads)]
    for t in threads:
        t.start()
    ready.wait(timeout=120)   # every process has its threads running
    go.wait(timeout=120)      # the parent has set the deadline
    cpu_started = time.process_time()
    local_gate.wait()
    for t in threads:
        t.join()
    out.send((latencies, errors, exhausted[0], time.process_time() - cpu_started))
    out.close()


def cmd_run(args):
    with open(args.tokens) as f:
        tokens = json.load(f)
    users = sorted(tokens)
    procs = max(1, min(args.procs, args.concurrency))
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Barrier(procs + 1)
    go = ctx.Barrier(procs + 1)
    deadline = ctx.Value("d", 0.0, lock=False)
    children = []
    for p in range(procs):
        # Users are split between processes, then between each process's threads: no user (and so
        # no TOTP code) is ever shared. Threads are spread as evenly as the counts allow.
        nthreads = len(range(p, args.concurrency, procs))
        mine = users[p::procs]
        receive, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=run_slice, args=(args, tokens, mine, nthreads, ready, go, deadline, send), daemon=True)
        proc.start()
        send.close()
        children.append((proc, receive))
    try:
        ready.wait(timeout=120)
    except threading.BrokenBarrierError:
        sys.exit("stepup.py run: a client process did not start")
    # CLOCK_MONOTONIC is system-wide on Linux, so every process compares against the same deadline.
    started = time.monotonic()
    deadline.value = started + args.seconds
    go.wait(timeout=120)
    latencies, errors, exhausted, client_cpu = [], [], 0, 0.0
    for proc, receive in children:
        try:
            lat, err, exh, cpu = receive.recv()
        except EOFError:
            lat, err, exh, cpu = [], ["client process %d died (exit code %s)" % (proc.pid, proc.exitcode)], 0, 0.0
        proc.join()
        latencies += lat
        errors += err
        exhausted += exh
        client_cpu += cpu
    elapsed = time.monotonic() - started
    latencies.sort()

    def pct(p):
        return round(latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000, 2) if latencies else None

    json.dump({"cycles": len(latencies), "seconds": round(elapsed, 2),
               "cycles_per_s": round(len(latencies) / elapsed, 1) if elapsed > 0 else 0,
               "p50_ms": pct(0.50), "p90_ms": pct(0.90), "p99_ms": pct(0.99),
               "max_ms": round(latencies[-1] * 1000, 2) if latencies else None, "errors": len(errors),
               "first_error": errors[0] if errors else None, "threads_out_of_codes": exhausted,
               "client_procs": procs, "client_cpu": round(client_cpu / elapsed, 2) if elapsed > 0 else 0}, sys.stdout)
    if errors:
        sys.exit(1)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    lg = sub.add_parser("login")
    lg.add_argument("--port", type=int, required=True)
    lg.add_argument("--users", required=True, help="e.g. bench0-999")
    lg.add_argument("--password", required=True)
    lg.add_argument("--concurrency", type=int, default=8)
    rn = sub.add_parser("run")
    rn.add_argument("--port", type=int, required=True)
    rn.add_argument("--tokens", required=True)
    rn.add_argument("--secret", required=True)
    rn.add_argument("--seconds", type=float, default=10)
    rn.add_argument("--concurrency", type=int, default=8, help="client threads in all")
    rn.add_argument("--procs", type=int, default=1, help="client processes the threads are spread over")
    args = p.parse_args()
    {"login": cmd_login, "run": cmd_run}[args.cmd](args)


if __name__ == "__main__":
    main()
