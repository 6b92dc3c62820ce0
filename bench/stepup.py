#!/usr/bin/env python3
"""Step-up cycle driver for bench/stepup.sh (Python 3 standard library only).

One cycle, as an SDK client does it:
  1. POST /transfer with a session and `x-authenticate-response: header` -> 401 SSOADVICE (a new TxId)
  2. POST /am/json/realms/root/authenticate?authIndexType=composite_advice&authIndexValue=<advice XML>
  3. POST the TOTP code into that step -> 200 (transaction COMPLETED)
  4. POST /transfer?_txid=<TxId> -> 201 from demo-bank (transaction consumed)

  stepup.py login  --port P --users bench0-999     logs every user in, prints {"user": token} JSON
  stepup.py run    --port P --tokens FILE --seconds S --concurrency C [--procs N]

`run` keeps C connections busy, each driving cycles one after another, spread over N processes;
in each process they are asyncio tasks on one event loop with raw HTTP/1.1 over keep-alive
sockets (not threads with http.client: a thread waiting for the GIL after each reply added
latency, and http.client cost more CPU per cycle than the gateway did).

A TOTP code is accepted once per user, within +-1 step of 30 s, so a user has three codes at a
time; each connection owns its own users and never reuses a code. `run` stops a connection early
when its users have no code left and says so (raise BENCH_USERS).
"""
import asyncio
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


class AsyncClient:
    """One keep-alive connection on an asyncio loop, HTTP/1.1 written and read by hand (the
    gateway's answers carry Content-Length or are chunked); reconnects if the server closes it."""

    def __init__(self, port):
        self.port = port
        self.reader = self.writer = None

    def close(self):
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    async def request(self, method, target, body=b"", headers=()):
        head = "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: %d\r\n%s\r\n" % (
            method, target, self.port, len(body), "".join("%s: %s\r\n" % h for h in headers))
        message = head.encode("latin-1") + body
        for attempt in (1, 2):
            if self.writer is None:
                self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
            try:
                self.writer.write(message)
                status, fields, data = await self.response()
            except (ConnectionError, asyncio.IncompleteReadError):
                self.close()
                if attempt == 2:
                    raise
                continue
            if fields.get("connection", "").lower() == "close":
                self.close()
            return status, data

    async def response(self):
        lines = (await self.reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        fields = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                fields[name.strip().lower()] = value.strip()
        if "content-length" in fields:
            return status, fields, await self.reader.readexactly(int(fields["content-length"]))
        if fields.get("transfer-encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    while await self.reader.readuntil(b"\r\n") != b"\r\n":
                        pass
                    return status, fields, data
                data += (await self.reader.readexactly(size + 2))[:-2]
        return status, fields, b""


JSON_FIELDS = tuple(JSON_HEADERS.items())


async def cycle(client, token, code):
    session = ("iPlanetDirectoryPro", token)
    status, data = await client.request("POST", "/transfer", BODY,
                                        (("x-authenticate-response", "header"), ("Content-Type", "application/json"), session))
    if status != 401:
        raise CycleError("challenge: expected 401, got %d %s" % (status, data[:200]))
    txid = json.loads(data)["advices"]["TransactionConditionAdvice"][0]
    xml = ('<Advices><AttributeValuePair><Attribute name="TransactionConditionAdvice"/><Value>%s</Value>'
           '</AttributeValuePair></Advices>' % txid)
    target = AUTH + "?authIndexType=composite_advice&authIndexValue=" + urllib.parse.quote(xml, safe="")
    status, data = await client.request("POST", target, b"", JSON_FIELDS + (session,))
    if status != 200:
        raise CycleError("composite_advice start: %d %s" % (status, data[:200]))
    step = answer(json.loads(data), [code])
    status, data = await client.request("POST", AUTH, json.dumps(step).encode(), JSON_FIELDS + (session,))
    if status != 200:
        raise CycleError("TOTP submit: %d %s" % (status, data[:200]))
    status, data = await client.request("POST", "/transfer?_txid=" + txid, BODY, (("Content-Type", "application/json"), session))
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


def run_slice(args, tokens, users, nconns, ready, go, deadline, out):
    """Drives `nconns` connections over `users` in this process until the shared deadline, and
    sends back (latencies, errors, connections out of codes, CPU seconds) through `out`."""
    latencies = []
    errors = []
    exhausted = [0]

    async def work(mine, end):
        client = AsyncClient(args.port)
        used = {u: set() for u in mine}
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
                exhausted[0] += 1
                break
            u, counter = picked
            used[u].add(counter)
            t0 = time.monotonic()
            try:
                await cycle(client, tokens[u], totp(args.secret, counter))
            except Exception as e:
                errors.append("%s: %s" % (u, e))
                break
            latencies.append(time.monotonic() - t0)
        client.close()

    async def main():
        await asyncio.gather(*(work(users[i::nconns], deadline.value) for i in range(nconns)))

    ready.wait(timeout=120)   # every process is up
    go.wait(timeout=120)      # the parent has set the deadline
    cpu_started = time.process_time()
    asyncio.run(main())
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
        # Users are split between processes, then between each process's connections: no user (and
        # so no TOTP code) is ever shared. Connections are spread as evenly as the counts allow.
        nconns = len(range(p, args.concurrency, procs))
        mine = users[p::procs]
        receive, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=run_slice, args=(args, tokens, mine, nconns, ready, go, deadline, send), daemon=True)
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
    rn.add_argument("--concurrency", type=int, default=8, help="client connections in all")
    rn.add_argument("--procs", type=int, default=1, help="client processes the connections are spread over")
    args = p.parse_args()
    {"login": cmd_login, "run": cmd_run}[args.cmd](args)


if __name__ == "__main__":
    main()
