#!/usr/bin/env bash
# Worker scaling on the plain proxy: txgate with 1 and 2 workers, beside nginx proxy_pass with
# 1 and 2 worker processes as the reference for what the machine allows (wrk, the backend and
# the proxy share its cores). For each: req/s, p99, CPU µs per request of the proxy's
# processes (/proc/PID/stat), and the 2-worker / 1-worker throughput ratio. Rounds alternate
# the order of the targets; medians at the end.
#
#   bash bench/scaling.sh [ROUNDS]          (default 3)
#
# Environment: BENCH_DURATION (seconds, default 5), BENCH_CONNECTIONS (default 64),
# BENCH_THREADS (wrk threads, default 2), TXGATE_BIN (this binary instead of building one).
# Everything listens on 127.0.0.1; every process started and the temp dir are removed on exit.
# Not part of `make test`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
ROUNDS="${1:-3}"
DURATION="${BENCH_DURATION:-5}"
CONNECTIONS="${BENCH_CONNECTIONS:-64}"
THREADS="${BENCH_THREADS:-2}"
for v in ROUNDS DURATION CONNECTIONS THREADS; do
  [[ "${!v}" =~ ^[0-9]+$ ]] && [ "${!v}" -ge 1 ] || { echo "scaling.sh: $v must be a positive integer (got '${!v}')" >&2; exit 2; }
done
PATH="$PATH:/usr/sbin:/sbin"
for tool in nginx wrk python3; do
  command -v "$tool" >/dev/null || { echo "scaling.sh: '$tool' not found; run: bash scripts/install-deps.sh --bench" >&2; exit 1; }
done
if [ -z "${TXGATE_BIN:-}" ]; then swift build -c release --static-swift-stdlib --product txgate >/dev/null; fi
TXGATE="${TXGATE_BIN:-$(swift build -c release --show-bin-path)/txgate}"

TMP="$(mktemp -d "${TMPDIR:-/tmp}/txgate-scaling.XXXXXX")"
chmod 755 "$TMP"   # nginx workers drop to an unprivileged user when started as root
PIDS=()
BENCH_NAME=scaling.sh
. "$ROOT/bench/lib.sh"
trap bench_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# CPU ticks of a process and its children (nginx's master and workers; txgate is one process).
ticks() { cpu_ticks "$1" $(cat "/proc/$1/task/$1/children" 2>/dev/null); }

BACKEND="$(free_port)"
start_nginx_server backend 2 "$BACKEND" 'default_type text/plain; return 200 "hello from backend\n";'
declare -A PORT PID
for w in 1 2; do
  PORT[nginx$w]="$(free_port)"
  start_nginx_server "nginx$w" "$w" "${PORT[nginx$w]}" 'proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection "";'
  PID[nginx$w]=$STARTED
  PORT[txgate$w]="$(free_port)"
  python3 - "$TMP/txgate$w.json" "${PORT[txgate$w]}" "$BACKEND" "$w" <<'EOF'
import json, sys
path, port, backend, workers = sys.argv[1:]
json.dump({"listen": f"127.0.0.1:{port}", "workers": int(workers),
           "upstream": {"url": f"http://127.0.0.1:{backend}", "keepAlive": 64},
           "log": {"level": "warning", "access": False}, "limits": {"maxConnectionsPerClient": 0}}, open(path, "w"))
EOF
  "$TXGATE" serve --config "$TMP/txgate$w.json" </dev/null >"$TMP/txgate$w.log" 2>&1 & PIDS+=($!); PID[txgate$w]=$!
  wait_port "${PORT[txgate$w]}"
done

measure() {  # measure TARGET ROUND -> one line in results
  local t="$1" before after out
  wrk -t"$THREADS" -c"$CONNECTIONS" -d1s "http://127.0.0.1:${PORT[$t]}/" >/dev/null
  before="$(ticks "${PID[$t]}")"
  out="$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency "http://127.0.0.1:${PORT[$t]}/")"
  after="$(ticks "${PID[$t]}")"
  python3 - "$t" "$2" "$before" "$after" "$out" >>"$TMP/results" <<'EOF'
import os, re, sys
t, rnd, before, after, out = sys.argv[1:]
n = int(re.search(r"(\d+) requests in", out).group(1))
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
m = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
p99 = float(m.group(1)) * {"us": 0.001, "ms": 1, "s": 1000}[m.group(2)]
cpu = (int(after) - int(before)) / os.sysconf("SC_CLK_TCK") / n * 1e6
print(t, rnd, f"{rps:.0f}", f"{p99:.2f}", f"{cpu:.1f}")
EOF
}

TARGETS=(nginx1 nginx2 txgate1 txgate2)
for r in $(seq 1 "$ROUNDS"); do
  order=("${TARGETS[@]}"); [ $((r % 2)) -eq 0 ] && order=(txgate2 txgate1 nginx2 nginx1)
  for t in "${order[@]}"; do measure "$t" "$r"; echo "[scaling] round $r $(tail -n 1 "$TMP/results")" >&2; done
done

python3 - "$TMP/results" "$(nproc)" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = lambda t, i: statistics.median(float(r[i]) for r in rows if r[0] == t)
print(f"\nplain proxy; medians over the rounds; the machine has {sys.argv[2]} cores")
print(f"{'target':10} {'req/s':>8} {'p99 ms':>8} {'µs CPU/req':>11}")
for t in ("nginx1", "nginx2", "txgate1", "txgate2"):
    print(f"{t:10} {med(t, 2):8.0f} {med(t, 3):8.2f} {med(t, 4):11.1f}")
for name in ("nginx", "txgate"):
    print(f"{name}: 2 workers / 1 worker throughput {med(name + '2', 2) / med(name + '1', 2):.2f}")
print(f"txgate 2 workers / nginx 2 workers throughput {med('txgate2', 2) / med('nginx2', 2):.2f}")
EOF
