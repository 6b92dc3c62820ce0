#!/usr/bin/env bash
# The remote PDP and forward-auth, side by side on loopback, in one run over alternating rounds:
#   embedded   txgate B as the proxy, its own policies (session + policy + cached decision)
#   remote     txgate A (pdp.type am → B) as the proxy: the cached allow path
#   authz      nginx auth_request → txgate B's /-/authz, nginx proxying
# all in front of one nginx backend, GET /accounts with a session. Reports req/s and the CPU
# µs per request of the processes on the path (txgate from /proc/PID/stat; nginx's worker too
# for authz), and the ratios the issue asks for (txgate as the proxy vs nginx + auth_request).
#
#   bash bench/pdp.sh [ROUNDS]
#
# Environment: BENCH_DURATION (seconds per measurement, default 5), BENCH_CONNECTIONS (default 32),
# TXGATE_BIN (a release txgate; default: swift build -c release --static-swift-stdlib).
# Everything listens on 127.0.0.1; every process started and the temp dir are removed on exit.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS="${1:-3}"
DURATION="${BENCH_DURATION:-5}"
CONNECTIONS="${BENCH_CONNECTIONS:-32}"
PATH="$PATH:/usr/sbin:/sbin"
for tool in wrk nginx python3; do
  command -v "$tool" >/dev/null || { echo "pdp.sh: $tool is missing (bash scripts/install-deps.sh --bench)" >&2; exit 2; }
done
cd "$ROOT"
if [ -n "${TXGATE_BIN:-}" ]; then TXGATE="$TXGATE_BIN"; else
  swift build -c release --static-swift-stdlib --product txgate >/dev/null
  TXGATE="$(swift build -c release --show-bin-path)/txgate"
fi
TMP="$(mktemp -d "${TMPDIR:-/tmp}/txgate-pdp.XXXXXX")"
chmod 755 "$TMP"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT INT TERM

BENCH_NAME=pdp.sh
. "$ROOT/bench/lib.sh"

BACKEND="$(free_port)" NGINX_PORT="$(free_port)" B="$(free_port)" A="$(free_port)"
nginx_start() {  # DIR: starts nginx with DIR/nginx.conf, sets NGINX_PID (master) and NGINX_WORKER
  "$(command -v nginx)" -p "$1" -c "$1/nginx.conf" -e "$1/error.log" -g 'daemon off;' </dev/null >"$1/out.log" 2>&1 &
  NGINX_PID=$!; PIDS+=("$NGINX_PID")
}
mkdir -p "$TMP/backend" "$TMP/authz"
cat >"$TMP/backend/nginx.conf" <<EOF
worker_processes 1; pid $TMP/backend/nginx.pid; events { worker_connections 4096; }
http { access_log off; keepalive_requests 1000000;
  server { listen 127.0.0.1:$BACKEND; location / { default_type application/json; return 200 '{"accounts":[]}'; } } }
EOF
nginx_start "$TMP/backend"; wait_port "$BACKEND"
cat >"$TMP/authz/nginx.conf" <<EOF
worker_processes 1; pid $TMP/authz/nginx.pid; events { worker_connections 4096; }
http { access_log off; keepalive_requests 1000000;
  client_body_temp_path $TMP/authz/body; proxy_temp_path $TMP/authz/proxy;
  upstream txgate { server 127.0.0.1:$B; keepalive 64; keepalive_requests 1000000; }
  upstream backend { server 127.0.0.1:$BACKEND; keepalive 64; keepalive_requests 1000000; }
  server { listen 127.0.0.1:$NGINX_PORT;
    location = /_txgate_authz { internal; proxy_pass http://txgate/-/authz; proxy_http_version 1.1;
      proxy_set_header Connection ""; proxy_pass_request_body off; proxy_set_header Content-Length "";
      proxy_set_header X-Original-URI \$request_uri; proxy_set_header X-Original-Method \$request_method; }
    location / { auth_request /_txgate_authz; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_pass http://backend; } } }
EOF

HASH="$(printf 'bench-password' | "$TXGATE" hash-password 2>/dev/null | tail -n 1)"
python3 - "$TMP" "$BACKEND" "$B" "$A" "$HASH" <<'EOF'
import json, sys
tmp, backend, b, a, h = sys.argv[1:]
log = {"access": False, "level": "warning"}
json.dump({"listen": f"127.0.0.1:{b}", "workers": 1, "upstream": {"url": f"http://127.0.0.1:{backend}"}, "log": log,
           "users": [{"username": "demo", "passwordHash": h}, {"username": "gateway-agent", "passwordHash": h}],
           "journeys": {"Login": [{"type": "UsernamePassword"}]},
           "store": {"path": f"{tmp}/b.db"}, "secrets": {"signingKeyFile": f"{tmp}/signing.key"},
           "security": {"policyEvaluators": ["gateway-agent"]},
           "forwardAuth": {"trustedProxies": ["127.0.0.1/32"]},
           "policies": [{"name": "accounts", "resources": ["/accounts"], "actions": ["GET"], "subjects": "authenticated"}]},
          open(f"{tmp}/b.json", "w"))
json.dump({"listen": f"127.0.0.1:{a}", "workers": 1, "upstream": {"url": f"http://127.0.0.1:{backend}"}, "log": log,
           "pdp": {"type": "am", "url": f"http://127.0.0.1:{b}/am",
                   "agent": {"username": "gateway-agent", "passwordFile": f"{tmp}/agent.pw"}}},
          open(f"{tmp}/a.json", "w"))
EOF
# The agent logs in with the same password as demo (one hash for both).
printf 'bench-password' >"$TMP/agent.pw"
"$TXGATE" serve --config "$TMP/b.json" >"$TMP/b.log" 2>&1 & B_PID=$!; PIDS+=("$B_PID"); wait_port "$B" "$B_PID" "txgate (B)"
"$TXGATE" serve --config "$TMP/a.json" >"$TMP/a.log" 2>&1 & A_PID=$!; PIDS+=("$A_PID"); wait_port "$A" "$A_PID" "txgate (A)"
nginx_start "$TMP/authz"; AUTHZ_MASTER=$NGINX_PID; wait_port "$NGINX_PORT"
AUTHZ_WORKER="$(cat "/proc/$AUTHZ_MASTER/task/$AUTHZ_MASTER/children" | awk '{print $1}')"

TOKEN="$(python3 "$ROOT/bench/login.py" "$B" demo bench-password)"

measure() {  # PORT PIDS...: prints "req/s µs-CPU-per-request"
  local port="$1" before after requests; shift
  local args=(-t1 -c"$CONNECTIONS" -H "iPlanetDirectoryPro: $TOKEN")
  wrk "${args[@]}" -d1s "http://127.0.0.1:$port/accounts" >"$TMP/warm.txt"
  before="$(cpu_ticks "$@")"
  wrk "${args[@]}" -d"${DURATION}s" "http://127.0.0.1:$port/accounts" >"$TMP/wrk.txt"
  after="$(cpu_ticks "$@")"
  if grep -q "Non-2xx" "$TMP/wrk.txt"; then echo "pdp.sh: non-2xx answers on port $port" >&2; cat "$TMP/wrk.txt" >&2; exit 1; fi
  requests="$(awk '/requests in/ {print $1}' "$TMP/wrk.txt")"
  python3 -c "import os; t=os.sysconf('SC_CLK_TCK'); r=$requests; print(f'{r/$DURATION:.0f} {($after-$before)/t/r*1e6:.1f}')"
}

declare -A PORTS=([embedded]=$B [remote]=$A [authz]=$NGINX_PORT)
declare -A CPU_PIDS=([embedded]="$B_PID" [remote]="$A_PID $B_PID" [authz]="$AUTHZ_WORKER $B_PID")
declare -A RPS CPU
printf '%-9s %-5s %10s %14s\n' target round req/s "µs CPU/req"
for round in $(seq 1 "$ROUNDS"); do
  order=(embedded remote authz); [ $((round % 2)) -eq 0 ] && order=(authz remote embedded)
  for t in "${order[@]}"; do
    read -r rps cpu <<<"$(measure "${PORTS[$t]}" ${CPU_PIDS[$t]})"
    printf '%-9s %-5s %10s %14s\n' "$t" "$round" "$rps" "$cpu"
    RPS[$t]="${RPS[$t]:-} $rps"; CPU[$t]="${CPU[$t]:-} $cpu"
  done
done
python3 - "${RPS[embedded]}" "${RPS[remote]}" "${RPS[authz]}" "${CPU[embedded]}" "${CPU[remote]}" "${CPU[authz]}" <<'EOF'
import statistics, sys
med = lambda s: statistics.median(float(x) for x in s.split())
e, r, z, ce, cr, cz = (med(s) for s in sys.argv[1:])
print(f"\nmedians: embedded {e:.0f} req/s ({ce:.1f} µs CPU/req, txgate)")
print(f"         remote A→B {r:.0f} req/s ({cr:.1f} µs CPU/req, A + B; B is idle on cached allows)")
print(f"         nginx auth_request → /-/authz {z:.0f} req/s ({cz:.1f} µs CPU/req, nginx worker + txgate)")
print(f"remote/embedded throughput: {r/e:.2f}")
print(f"txgate as the proxy / nginx + auth_request: throughput {e/z:.2f}x, CPU per request {cz/ce:.2f}x less (goal: >= 2x throughput)")
EOF
