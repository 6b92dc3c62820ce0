#!/usr/bin/env bash
# The allow path with an OAuth access token against the same path with a session, in one run on
# one gateway, over alternating rounds: gateway CPU time per request (from /proc/PID/stat, utime +
# stime) and requests/s, GET /accounts through a policy that needs an authenticated subject.
#
#   bash bench/bearer.sh [ROUNDS]
#
# The session path looks the session up in the store (SQLite, on its thread) on every request;
# the bearer path verifies the ES256 access token once per worker (AccessTokenCache) and then
# costs a dictionary lookup. Environment: BENCH_DURATION (seconds per measurement, default 5),
# BENCH_CONNECTIONS (default 32), TXGATE_BIN (a txgate binary instead of the release build).
# Everything listens on 127.0.0.1; every process started and the temp dir are removed on exit.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS="${1:-3}"
DURATION="${BENCH_DURATION:-5}"
CONNECTIONS="${BENCH_CONNECTIONS:-32}"
command -v wrk >/dev/null || { echo "bearer.sh: wrk is missing (bash scripts/install-deps.sh --bench)" >&2; exit 2; }

cd "$ROOT"
swift build -c release --static-swift-stdlib --product demo-bank >/dev/null
[ -n "${TXGATE_BIN:-}" ] || swift build -c release --static-swift-stdlib --product txgate >/dev/null
BIN="$(swift build -c release --show-bin-path)"
TXGATE="${TXGATE_BIN:-$BIN/txgate}"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/txgate-bearer.XXXXXX")"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT INT TERM

BENCH_NAME=bearer.sh
. "$ROOT/bench/lib.sh"

BANK_PORT="$(free_port)"; PORT="$(free_port)"
"$BIN/demo-bank" --listen "127.0.0.1:$BANK_PORT" >"$TMP/bank.log" 2>&1 & PIDS+=($!)
wait_port "$BANK_PORT" $! demo-bank
HASH="$(printf 'bench-password' | "$TXGATE" hash-password 2>/dev/null | tail -n 1)"
python3 "$ROOT/bench/bearer_setup.py" config "$TMP" "$BANK_PORT" "$PORT" "$HASH"
"$TXGATE" serve --config "$TMP/gateway.json" >"$TMP/gw.log" 2>&1 & GW=$!; PIDS+=($GW)
wait_port "$PORT" "$GW" txgate
# A session (the login journey), then an access token for it (authorize with PKCE, code exchange).
read -r SESSION ACCESS < <(python3 "$ROOT/bench/bearer_setup.py" tokens "$PORT")

measure() {  # header: prints "µs-per-request req/s"
  local before after requests
  wrk -t1 -c"$CONNECTIONS" -H "$1" -d1s "http://127.0.0.1:$PORT/accounts" >/dev/null
  before="$(cpu_ticks "$GW")"
  wrk -t1 -c"$CONNECTIONS" -H "$1" -d"${DURATION}s" "http://127.0.0.1:$PORT/accounts" >"$TMP/wrk.txt"
  after="$(cpu_ticks "$GW")"
  if grep -q "Non-2xx" "$TMP/wrk.txt"; then echo "bearer.sh: non-2xx answers" >&2; cat "$TMP/wrk.txt" >&2; exit 1; fi
  requests="$(awk '/requests in/ {print $1}' "$TMP/wrk.txt")"
  python3 -c "import os; t=os.sysconf('SC_CLK_TCK'); print(f'{($after-$before)/t/$requests*1e6:.1f} {$requests/$DURATION:.0f}')"
}

printf '%-8s %-6s %10s %10s\n' subject round "µs CPU/req" "req/s"
declare -A CPU
for round in $(seq 1 "$ROUNDS"); do
  order=(session bearer); [ $((round % 2)) -eq 0 ] && order=(bearer session)
  for kind in "${order[@]}"; do
    if [ "$kind" = session ]; then r="$(measure "iPlanetDirectoryPro: $SESSION")"; else r="$(measure "Authorization: Bearer $ACCESS")"; fi
    printf '%-8s %-6s %10s %10s\n' "$kind" "$round" $r
    CPU["$kind"]="${CPU["$kind"]:-} ${r%% *}"
  done
done
python3 -c "
import statistics
s=[float(x) for x in '${CPU[session]}'.split()]; b=[float(x) for x in '${CPU[bearer]}'.split()]
print(f'median µs CPU/request: session {statistics.median(s):.1f}, bearer {statistics.median(b):.1f}, bearer/session {statistics.median(b)/statistics.median(s):.2f}')"
