#!/usr/bin/env bash
# User-space instructions per proxied request (valgrind's callgrind), for txgate binaries and
# for nginx proxy_pass doing the same job, in one run: a plain nginx backend answers
# `200 "hello from backend\n"`; each proxy (1 worker, upstream keep-alive) runs under callgrind
# with instrumentation off until wrk has warmed it up, then on for one measured wrk run. The
# instruction count does not depend on the machine's load, so it is the figure to compare two
# builds by on a shared machine (CPU time per request, bench/proxy.sh, is the other).
#
#   bash bench/callgrind.sh [--tls] [--handshakes] [--allow] [--log | --log-json] [--sim] TXGATE_BIN...
#
#   --allow        txgate on its allow path (bench/proxy.sh's): a user, a SQLite store, a policy
#                  for authenticated users on every path; wrk sends a session token it logged in
#                  for, so each request looks up the session and the policy and takes the
#                  cached decision. nginx proxies as always (it has no such path): the ratio is
#                  what the allow path costs against a plain proxy.
#   --tls          the proxies listen with TLS (one self-signed P-256 certificate for all;
#                  keep-alive: wrk's connections do one handshake each, during the warm-up)
#   --handshakes   with --tls: every request carries `Connection: close`, so each one is a new
#                  connection and a full TLS handshake (what a handshake costs the server)
#   --log          access logs on both sides: nginx's buffered `combined` log to a file
#                  (`buffer=64k flush=1s`, as proxy.sh's), txgate's `log.access` at level info
#   --log-json     the same, nginx writing txgate's line instead (a `log_format` with
#                  `escape=json`: the same members, in the same order, as the same JSON types;
#                  the request id is nginx's connection and request numbers, not `$request_id`)
#   --sim          also simulate the caches and branch predictors (callgrind's simple model, so
#                  slower) and print, per request: first-level instruction and data misses,
#                  last-level misses and mispredicted branches. For two builds whose instruction
#                  counts agree and whose CPU times do not.
#
# Environment: BENCH_CONNECTIONS (default 4), BENCH_DURATION (measured seconds, default 5),
# BENCH_WARMUP (seconds, default 3), BENCH_KEEP_TMP=1 (keep the callgrind.out files).
# Prints, for nginx and each binary: requests, instructions (Ir) and Ir per request. Everything
# listens on 127.0.0.1; every process it started and its temp dir are removed on exit.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

TLS=0
HANDSHAKES=0
ALLOW=0
SIM=0
LOG=0
BINS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --tls) TLS=1 ;;
    --handshakes) HANDSHAKES=1 ;;
    --allow) ALLOW=1 ;;
    --sim) SIM=1 ;;
    --log) LOG=1 ;;
    --log-json) LOG=json ;;
    -h|--help) . "$ROOT/bench/lib.sh"; header_help "$0"; exit 0 ;;
    *) [ -x "$1" ] || { echo "callgrind.sh: $1 is not an executable" >&2; exit 2; }; BINS+=("$1") ;;
  esac
  shift
done
[ "$HANDSHAKES" = 0 ] || [ "$TLS" = 1 ] || { echo "callgrind.sh: --handshakes needs --tls" >&2; exit 2; }
for tool in valgrind callgrind_control objcopy wrk nginx openssl python3; do
  command -v "$tool" >/dev/null 2>&1 || PATH="$PATH:/usr/sbin:/sbin"
  command -v "$tool" >/dev/null 2>&1 || { echo "callgrind.sh: '$tool' not found" >&2; exit 2; }
done
CONNECTIONS="${BENCH_CONNECTIONS:-4}"
DURATION="${BENCH_DURATION:-5}"
WARMUP="${BENCH_WARMUP:-3}"

TMP="$(mktemp -d "${TMPDIR:-/tmp}/txgate-callgrind.XXXXXX")"
chmod 755 "$TMP"
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ "${BENCH_KEEP_TMP:-0}" = 1 ]; then echo "kept $TMP" >&2; else rm -rf "$TMP"; fi
}
trap cleanup EXIT INT TERM

BENCH_NAME=callgrind.sh
. "$ROOT/bench/lib.sh"

SCHEME=http
if [ "$TLS" = 1 ]; then
  SCHEME=https
  bench_tls_cert "$TMP/cert.pem" "$TMP/key.pem" || exit 1
fi

# nginx_conf DIR PORT LOCATION [UPSTREAM_BLOCK] [SSL: 1]
nginx_conf() {
  local dir="$1" port="$2" location="$3" upstream="${4:-}" ssl="${5:-0}" listen
  mkdir -p "$dir"
  listen="listen 127.0.0.1:$port;"
  # TLS 1.3 as txgate: nginx before 1.23.4 (Debian 12 has 1.22) allows only up to TLS 1.2 by default.
  # and txgate's suites in txgate's order.
  [ "$ssl" = 1 ] && listen="listen 127.0.0.1:$port ssl; ssl_certificate $TMP/cert.pem; ssl_certificate_key $TMP/key.pem; ssl_protocols TLSv1.2 TLSv1.3;
        $(nginx_txgate_tls_suites)"
  cat >"$dir/nginx.conf" <<EOF
worker_processes 1;
master_process off;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $dir/cbt; proxy_temp_path $dir/pt; fastcgi_temp_path $dir/ft;
    uwsgi_temp_path $dir/ut; scgi_temp_path $dir/st;
    keepalive_requests 1000000;
$upstream
    server {
        $listen
        location / {
$location
        }
    }
}
EOF
}

B="$(free_port)"
nginx_conf "$TMP/backend" "$B" '            default_type text/plain;
            return 200 "hello from backend\n";'
nginx -p "$TMP/backend" -c "$TMP/backend/nginx.conf" -e "$TMP/backend/error.log" </dev/null >/dev/null 2>&1 &
PIDS+=($!)
wait_port "$B"

WRK_ARGS=()
[ "$HANDSHAKES" = 1 ] && WRK_ARGS=(-H "Connection: close")
NGINX_WRK_ARGS=("${WRK_ARGS[@]}")

# measure NAME PID PORT: warm up, instrument one wrk run (with WRK_ARGS), print the figures.
measure() {
  local name="$1" pid="$2" port="$3" requests ir
  wrk -t1 -c"$CONNECTIONS" -d"${WARMUP}s" "${WRK_ARGS[@]}" "$SCHEME://127.0.0.1:$port/" >"$TMP/warmup.txt" 2>&1
  callgrind_control -z "$pid" >/dev/null 2>&1
  callgrind_control -i on "$pid" >/dev/null 2>&1
  wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" "${WRK_ARGS[@]}" "$SCHEME://127.0.0.1:$port/" >"$TMP/wrk-$name.txt" 2>&1
  callgrind_control -i off "$pid" >/dev/null 2>&1
  callgrind_control -d "$name" "$pid" >/dev/null 2>&1
  sleep 1
  requests="$(awk '/requests in/ { print $1 }' "$TMP/wrk-$name.txt")"
  if grep -q 'Non-2xx' "$TMP/wrk-$name.txt"; then echo "callgrind.sh: $name answered non-2xx:" >&2; cat "$TMP/wrk-$name.txt" >&2; exit 1; fi
  ir="$(cat "$TMP/callgrind.out.$pid"* 2>/dev/null | awk '/^totals:/ { s += $2 } END { print s + 0 }')"
  printf '%-40s %8s requests %14s Ir %10.0f Ir/request\n' "$name" "$requests" "$ir" "$(awk -v a="$ir" -v b="$requests" 'BEGIN { print (b > 0) ? a / b : 0 }')"
  [ "$SIM" = 1 ] || return 0
  # Each dump names its events ("events: Ir Dr Dw I1mr D1mr ...") before its totals.
  cat "$TMP/callgrind.out.$pid"* 2>/dev/null | awk -v n="$requests" -v name="$name" '
    /^events:/ { for (i = 2; i <= NF; i++) ev[i] = $i }
    /^totals:/ { for (i = 2; i <= NF; i++) t[ev[i]] += $i }
    END { if (n <= 0) exit
      printf "%-40s per request: I1 misses %.1f, D1 misses %.1f, LL misses %.2f, mispredicted: conditional %.1f (of %.0f), indirect %.1f (of %.0f)\n", name,
        t["I1mr"] / n, (t["D1mr"] + t["D1mw"]) / n, (t["ILmr"] + t["DLmr"] + t["DLmw"]) / n, t["Bcm"] / n, t["Bc"] / n, t["Bim"] / n, t["Bi"] / n }'
}

CG=(valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$TMP/callgrind.out.%p")
[ "$SIM" = 1 ] && CG+=(--cache-sim=yes --branch-sim=yes)

NGINX_LOG=""
NGINX_HTTP="    upstream backend_upstream { server 127.0.0.1:$B; keepalive 64; keepalive_requests 1000000; }"
[ "$LOG" = 1 ] && NGINX_LOG="
            access_log $TMP/proxy/access.log combined buffer=64k flush=1s;"
if [ "$LOG" = json ]; then
  NGINX_HTTP="$NGINX_HTTP
$(nginx_txgate_log_format txgate)"
  NGINX_LOG="
            access_log $TMP/proxy/access.log txgate buffer=64k flush=1s;"
fi
N="$(free_port)"
nginx_conf "$TMP/proxy" "$N" '            proxy_pass http://backend_upstream;
            proxy_http_version 1.1;
            proxy_set_header Connection "";'"$NGINX_LOG" "$NGINX_HTTP" "$TLS"
"${CG[@]}" nginx -p "$TMP/proxy" -c "$TMP/proxy/nginx.conf" -e "$TMP/proxy/error.log" </dev/null >"$TMP/proxy/valgrind.log" 2>&1 &
NPID=$!
PIDS+=("$NPID")
wait_port "$N" "$NPID"
measure "nginx proxy_pass" "$NPID" "$N"
kill "$NPID"; wait "$NPID" 2>/dev/null || true

# --allow: the bench user's password hash (scrypt at a low cost, so that logging in under
# callgrind is quick; no password is checked while measuring).
HASH=""
[ "$ALLOW" = 1 ] && HASH="$(bench_password_hash)"

i=0
for bin in "${BINS[@]}"; do
  i=$((i + 1))
  echo "txgate-$i: $bin"
  T="$(free_port)"
  python3 - "$T" "$B" "$TLS" "$TMP" "$i" "$HASH" "$([ "$LOG" = 0 ] && echo 0 || echo 1)" >"$TMP/gateway-$i.json" <<'PY'
import json, sys
port, backend, tls, tmp, i, hash_, log = sys.argv[1:8]
c = {"listen": f"127.0.0.1:{port}", "workers": 1, "upstream": {"url": f"http://127.0.0.1:{backend}", "keepAlive": 64},
     "log": {"level": "info" if log == "1" else "warning", "access": log == "1"}, "limits": {"maxConnectionsPerClient": 0}}
if hash_:
    c.update({"users": [{"username": "bench", "passwordHash": hash_}], "journeys": {"Login": [{"type": "UsernamePassword"}]},
              "store": {"path": f"{tmp}/txgate-{i}.db"}, "secrets": {"signingKeyFile": f"{tmp}/signing-{i}.key"},
              "policies": [{"name": "everything", "resources": ["/**"], "actions": ["GET"], "subjects": "authenticated"}]})
if tls == "1":
    c["tls"] = {"certificate": f"{tmp}/cert.pem", "privateKey": f"{tmp}/key.pem"}
print(json.dumps(c))
PY
  # Valgrind 3.19 cannot read the DWARF 5 of Swift's release builds: a copy without debug
  # information (function names are kept).
  objcopy --strip-debug "$bin" "$TMP/txgate-$i"
  "${CG[@]}" "$TMP/txgate-$i" serve --config "$TMP/gateway-$i.json" --workers 1 </dev/null >"$TMP/txgate-$i.log" 2>&1 &
  TPID=$!
  PIDS+=("$TPID")
  wait_port "$T" "$TPID"
  WRK_ARGS=("${NGINX_WRK_ARGS[@]}")
  if [ "$ALLOW" = 1 ]; then
    TOKEN="$(python3 "$ROOT/bench/login.py" "$T" bench bench-password "$SCHEME")"
    WRK_ARGS+=(-H "iPlanetDirectoryPro: $TOKEN")
  fi
  measure "txgate-$i" "$TPID" "$T"
  kill "$TPID"; wait "$TPID" 2>/dev/null || true
done
