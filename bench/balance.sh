#!/usr/bin/env bash
# How evenly the proxies' workers share the client connections, and what the busiest worker
# does to the tail latency: txgate with W workers (each on its own SO_REUSEPORT listener; the
# kernel picks one by a hash of the connection's addresses, then `ConnectionBalancer` evens
# them out) beside nginx with W worker processes (one shared listening socket).
#
#   bash bench/balance.sh [ROUNDS]          (default 3)
#
# For each proxy and worker count, each round:
# - spread: BENCH_CONNECTIONS keep-alive connections opened and left idle after one request
#   each, then the connections each worker holds, counted exactly: for txgate, the client
#   sockets registered in each worker loop's epoll instance (/proc/PID/fdinfo); for nginx, the
#   client sockets each worker process holds. Printed sorted, with the busiest worker's count
#   over the mean (1.00: even);
# - load: `wrk -c BENCH_CONNECTIONS` for BENCH_DURATION seconds: req/s and p99.
# The rounds alternate the order of the targets; the summary gives medians.
#
# Environment: BENCH_WORKERS (worker counts, default "4 8"), BENCH_CONNECTIONS (default 256),
# BENCH_DURATION (seconds, default 4), BENCH_THREADS (wrk threads, default 2), TXGATE_BIN (this
# binary instead of building one), BASE_BIN (a second txgate binary, measured beside it as
# "base"). Everything listens on 127.0.0.1; every process started and the temp dir are removed
# on exit. On a machine with fewer cores than workers, the latency figures measure the
# scheduler as much as the proxies; the spread does not depend on the cores. Not part of
# `make test`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
ROUNDS="${1:-3}"
DURATION="${BENCH_DURATION:-4}"
CONNECTIONS="${BENCH_CONNECTIONS:-256}"
THREADS="${BENCH_THREADS:-2}"
WORKER_COUNTS="${BENCH_WORKERS:-4 8}"
for v in ROUNDS DURATION CONNECTIONS THREADS; do
  [[ "${!v}" =~ ^[0-9]+$ ]] && [ "${!v}" -ge 1 ] || { echo "balance.sh: $v must be a positive integer (got '${!v}')" >&2; exit 2; }
done
for w in $WORKER_COUNTS; do
  [[ "$w" =~ ^[0-9]+$ ]] && [ "$w" -ge 2 ] || { echo "balance.sh: BENCH_WORKERS must list worker counts of 2 or more (got '$w')" >&2; exit 2; }
done
PATH="$PATH:/usr/sbin:/sbin"
for tool in nginx wrk python3; do
  command -v "$tool" >/dev/null || { echo "balance.sh: '$tool' not found; run: bash scripts/install-deps.sh --bench" >&2; exit 1; }
done
if [ -z "${TXGATE_BIN:-}" ]; then swift build -c release --static-swift-stdlib --product txgate >/dev/null; fi
TXGATE="${TXGATE_BIN:-$(swift build -c release --show-bin-path)/txgate}"
[ -z "${BASE_BIN:-}" ] || [ -x "$BASE_BIN" ] || { echo "balance.sh: BASE_BIN '$BASE_BIN' is not an executable" >&2; exit 2; }

TMP="$(mktemp -d "${TMPDIR:-/tmp}/txgate-balance.XXXXXX")"
chmod 755 "$TMP"   # nginx workers drop to an unprivileged user when started as root
PIDS=()
BENCH_NAME=balance.sh
. "$ROOT/bench/lib.sh"
trap bench_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

start_txgate() {  # start_txgate NAME BINARY WORKERS PORT -> sets STARTED
  python3 - "$TMP/$1.json" "$4" "$BACKEND" "$3" <<'EOF'
import json, sys
path, port, backend, workers = sys.argv[1:]
json.dump({"listen": f"127.0.0.1:{port}", "workers": int(workers),
           "upstream": {"url": f"http://127.0.0.1:{backend}", "keepAlive": 64},
           "log": {"level": "warning", "access": False}, "limits": {"maxConnectionsPerClient": 0}}, open(path, "w"))
EOF
  "$2" serve --config "$TMP/$1.json" </dev/null >"$TMP/$1.log" 2>&1 & PIDS+=($!)
  STARTED=$!
  wait_port "$4" "$STARTED" "txgate ($1)"
}

BACKEND="$(free_port)"
start_nginx_server backend 2 "$BACKEND" 'default_type text/plain; return 200 "hello from backend\n";'
declare -A PORT PID KIND
TARGETS=()
for w in $WORKER_COUNTS; do
  t="nginx-w$w"; PORT[$t]="$(free_port)"; KIND[$t]=nginx
  start_nginx_server "$t" "$w" "${PORT[$t]}" 'proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection "";'
  PID[$t]=$STARTED; TARGETS+=("$t")
  if [ -n "${BASE_BIN:-}" ]; then
    t="base-w$w"; PORT[$t]="$(free_port)"; KIND[$t]=txgate
    start_txgate "$t" "$BASE_BIN" "$w" "${PORT[$t]}"; PID[$t]=$STARTED; TARGETS+=("$t")
  fi
  t="txgate-w$w"; PORT[$t]="$(free_port)"; KIND[$t]=txgate
  start_txgate "$t" "$TXGATE" "$w" "${PORT[$t]}"; PID[$t]=$STARTED; TARGETS+=("$t")
done

# Opens N connections, one request each, keeps them open while the spread is counted, then
# closes them: prints the connections each worker holds, sorted, busiest first.
spread() {  # spread TARGET
  python3 - "${KIND[$1]}" "${PID[$1]}" "${PORT[$1]}" "$CONNECTIONS" <<'EOF'
import os, socket, sys, time
kind, pid, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
conns = []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n")
    conns.append(s)
for s in conns:
    got = b""
    while b"hello from backend" not in got:
        chunk = s.recv(4096)
        if not chunk: sys.exit("balance.sh: a connection closed before its response")
        got += chunk
time.sleep(0.2)

def inodes(state, local_port):
    """Socket inodes of 127.0.0.1 TCP sockets in `state` whose local port is `local_port`."""
    found = set()
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        f = line.split()
        if int(f[1].split(":")[1], 16) == local_port and f[3] == state:
            found.add(f[9])
    return found

def socket_inode(p, fd):
    try:
        link = os.readlink(f"/proc/{p}/fd/{fd}")
    except OSError:
        return None
    return link[8:-1] if link.startswith("socket:[") else None

clients = inodes("01", port)      # ESTABLISHED, the proxy's side of each client connection
listening = inodes("0A", port)    # LISTEN
counts = []
if kind == "nginx":
    children = [int(c) for c in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    for c in children:
        counts.append(sum(1 for fd in os.listdir(f"/proc/{c}/fd") if socket_inode(c, fd) in clients))
else:
    # Each worker's loop is an epoll instance that watches its listening socket.
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:[eventpoll]":
                continue
        except OSError:
            continue
        watched = [l.split()[1] for l in open(f"/proc/{pid}/fdinfo/{fd}") if l.startswith("tfd:")]
        kinds = [socket_inode(pid, t) for t in watched]
        if any(k in listening for k in kinds):
            counts.append(sum(1 for k in kinds if k in clients))
for s in conns:
    s.close()
counts.sort(reverse=True)
if sum(counts) != n:
    sys.exit(f"balance.sh: counted {sum(counts)} of {n} connections over the workers: {counts}")
print(" ".join(map(str, counts)))
EOF
}

measure() {  # measure TARGET ROUND -> one line in results
  local t="$1" counts out
  counts="$(spread "$t")"
  sleep 0.3
  wrk -t"$THREADS" -c"$CONNECTIONS" -d1s "http://127.0.0.1:${PORT[$t]}/" >/dev/null
  out="$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency "http://127.0.0.1:${PORT[$t]}/")"
  python3 - "$t" "$2" "$counts" "$out" >>"$TMP/results" <<'EOF'
import re, sys
t, rnd, counts, out = sys.argv[1:]
c = [int(x) for x in counts.split()]
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
m = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
p99 = float(m.group(1)) * {"us": 0.001, "ms": 1, "s": 1000}[m.group(2)]
print(t, rnd, f"{max(c) / (sum(c) / len(c)):.2f}", f"{rps:.0f}", f"{p99:.2f}", ",".join(map(str, c)))
EOF
}

for r in $(seq 1 "$ROUNDS"); do
  order=("${TARGETS[@]}")
  if [ $((r % 2)) -eq 0 ]; then
    order=(); for ((i = ${#TARGETS[@]} - 1; i >= 0; i--)); do order+=("${TARGETS[$i]}"); done
  fi
  for t in "${order[@]}"; do measure "$t" "$r"; echo "[balance] round $r: $(tail -n 1 "$TMP/results")" >&2; done
done

python3 - "$TMP/results" "$(nproc)" "$CONNECTIONS" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
targets = list(dict.fromkeys(r[0] for r in rows))
med = lambda t, i: statistics.median(float(r[i]) for r in rows if r[0] == t)
print(f"\n{sys.argv[3]} connections; medians over the rounds; the machine has {sys.argv[2]} cores")
print(f"{'target':12} {'busiest/mean':>12} {'req/s':>8} {'p99 ms':>8}  connections per worker, each round")
for t in targets:
    print(f"{t:12} {med(t, 2):12.2f} {med(t, 3):8.0f} {med(t, 4):8.2f}  " + "  ".join(r[5] for r in rows if r[0] == t))
EOF
