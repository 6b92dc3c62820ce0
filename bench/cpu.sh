#!/usr/bin/env bash
# Gateway CPU time per request, two txgate binaries side by side over alternating rounds, for
# the plain proxy (no policies), the same with the access log on (to a file), the allow path
# (session + policy + cached decision), and the plain proxy carrying a POST with a small JSON
# body (demo-bank's POST /echo, which keeps nothing).
# CPU time comes from /proc/PID/stat (utime + stime of the gateway process), which a shared,
# noisy machine disturbs far less than req/s.
#
#   bash bench/cpu.sh OLD_TXGATE NEW_TXGATE [ROUNDS]
#
# Environment: BENCH_DURATION (seconds per measurement, default 5), BENCH_CONNECTIONS (default 32).
# Everything listens on 127.0.0.1; every process started and the temp dir are removed on exit.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
A="${1:?usage: bench/cpu.sh OLD_TXGATE NEW_TXGATE [ROUNDS]}"
B="${2:?usage: bench/cpu.sh OLD_TXGATE NEW_TXGATE [ROUNDS]}"
ROUNDS="${3:-3}"
DURATION="${BENCH_DURATION:-5}"
CONNECTIONS="${BENCH_CONNECTIONS:-32}"
for bin in "$A" "$B"; do [ -x "$bin" ] || { echo "cpu.sh: $bin is not an executable" >&2; exit 2; }; done
command -v wrk >/dev/null || { echo "cpu.sh: wrk is missing (bash scripts/install-deps.sh --bench)" >&2; exit 2; }

cd "$ROOT"
swift build -c release --static-swift-stdlib --product demo-bank >/dev/null
BANK="$(swift build -c release --show-bin-path)/demo-bank"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/txgate-cpu.XXXXXX")"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT INT TERM

BENCH_NAME=cpu.sh
. "$ROOT/bench/lib.sh"

BANK_PORT="$(free_port)"
"$BANK" --listen "127.0.0.1:$BANK_PORT" >"$TMP/bank.log" 2>&1 & PIDS+=($!)
wait_port "$BANK_PORT"

# plain: no policies, no access log; allow: demo-bank's policies, a session, GET /accounts.
python3 - "$TMP" "$BANK_PORT" <<'EOF'
import json, sys
tmp, bank = sys.argv[1], sys.argv[2]
base = {"upstream": {"url": f"http://127.0.0.1:{bank}"}, "workers": 1, "log": {"access": False, "level": "warning"}}
json.dump(base, open(f"{tmp}/plain.json", "w"))
json.dump(dict(base, log={"access": True, "level": "info"}), open(f"{tmp}/log.json", "w"))
allow = dict(base)
allow.update({
    "users": [{"username": "demo", "passwordHash": "$scrypt$ln=4,r=8,p=1$c2FsdHNhbHRzYWx0c2FsdA$" , "email": "d@example.com"}],
    "journeys": {"Login": [{"type": "UsernamePassword"}]},
    "store": {"path": f"{tmp}/txgate.db"}, "secrets": {"signingKeyFile": f"{tmp}/signing.key"},
    "policies": [{"name": "accounts", "resources": ["/accounts"], "actions": ["GET"], "subjects": "authenticated"}],
})
json.dump(allow, open(f"{tmp}/allow.json", "w"))
EOF
# A real password hash for the allow path's user.
HASH="$(printf 'bench-password' | "$A" hash-password 2>/dev/null | tail -n 1)"
python3 - "$TMP/allow.json" "$HASH" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1])); c["users"][0]["passwordHash"] = sys.argv[2]; json.dump(c, open(sys.argv[1], "w"))
EOF

login() { python3 "$ROOT/bench/login.py" "$1" demo bench-password; }  # a session token from port $1

# wrk's script for the POST kind.
cat >"$TMP/post.lua" <<'EOF'
wrk.method = "POST"
wrk.body = '{"amount":100,"currency":"EUR","payee":"Bob"}'
wrk.headers["Content-Type"] = "application/json"
EOF

measure() {  # binary, config, path, [header], [wrk script]: prints "µs-per-request req/s"
  local bin="$1" config="$2" path="$3" header="${4:-}" script="${5:-}" port pid before after requests
  port="$(free_port)"
  "$bin" serve --config "$config" --listen "127.0.0.1:$port" >"$TMP/gw.log" 2>&1 & pid=$!; PIDS+=($pid)
  wait_port "$port"
  if [ "$header" = "session" ]; then header="iPlanetDirectoryPro: $(login "$port")"; fi
  local args=(-t1 -c"$CONNECTIONS" --latency)
  [ -n "$header" ] && args+=(-H "$header")
  [ -n "$script" ] && args+=(-s "$script")
  wrk "${args[@]}" -d1s "http://127.0.0.1:$port$path" >/dev/null
  before="$(cpu_ticks "$pid")"
  wrk "${args[@]}" -d"${DURATION}s" "http://127.0.0.1:$port$path" >"$TMP/wrk.txt"
  after="$(cpu_ticks "$pid")"
  kill "$pid"; wait "$pid" 2>/dev/null || true
  grep -q "Non-2xx" "$TMP/wrk.txt" && { echo "cpu.sh: non-2xx answers from $bin on $path" >&2; cat "$TMP/wrk.txt" >&2; exit 1; }
  requests="$(awk '/requests in/ {print $1}' "$TMP/wrk.txt")"
  python3 -c "import os,sys; t=os.sysconf('SC_CLK_TCK'); d=$after-$before; r=$requests; print(f'{d/t/r*1e6:.1f} {r/$DURATION:.0f}')"
}

printf '%-7s %-6s %-6s %10s %10s\n' path round binary "µs CPU/req" "req/s"
declare -A SUM
for round in $(seq 1 "$ROUNDS"); do
  order=("A" "B"); [ $((round % 2)) -eq 0 ] && order=("B" "A")
  for which in "${order[@]}"; do
    bin="$A"; [ "$which" = "B" ] && bin="$B"
    for kind in plain log allow post; do
      case "$kind" in
        allow) r="$(measure "$bin" "$TMP/allow.json" /accounts session)" ;;
        post) r="$(measure "$bin" "$TMP/plain.json" /echo "" "$TMP/post.lua")" ;;
        *) r="$(measure "$bin" "$TMP/$kind.json" /health)" ;;
      esac
      printf '%-7s %-6s %-6s %10s %10s\n' "$kind" "$round" "$which" $r
      SUM["$kind$which"]="${SUM["$kind$which"]:-} ${r%% *}"
    done
  done
done
for kind in plain log allow post; do
  python3 -c "
import statistics
a=[float(x) for x in '${SUM["${kind}A"]}'.split()]; b=[float(x) for x in '${SUM["${kind}B"]}'.split()]
print(f'$kind: median µs CPU/request A {statistics.median(a):.1f}, B {statistics.median(b):.1f}, B/A {statistics.median(b)/statistics.median(a):.2f}')"
done
