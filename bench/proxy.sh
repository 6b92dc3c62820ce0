#!/usr/bin/env bash
# Side-by-side proxy benchmark on loopback: an nginx backend measured directly, through nginx
# proxy_pass (1 worker, upstream keep-alive) and through txgate (1 worker), each proxy with its
# access log off and on (nginx: a buffered access_log, buffer=64k; txgate: log.access), and
# txgate's allow path (a session, a policy and a cached decision). For each target: req/s,
# latency, and the CPU time the server process(es) spent per request (utime + stime from
# /proc/PID/stat over the measured run). The order of the targets alternates between runs.
#
#   bash bench/proxy.sh [--quick] [--runs N] [--nginx-only] [--tls] [--handshakes] [--nginx-default-suites]
#                       [--log-json] [--response-bytes N | --request-bytes N | --chunked-response COUNTxSIZE]
#
#   --quick        3 s per measurement (instead of BENCH_DURATION, default 10) and 1 s warm-up
#   --runs N       repeat the measurement N times and print the median of each column at the end
#   --nginx-only   measure only the backend and nginx proxy_pass (no txgate build or run)
#   --tls          the proxies listen with TLS (one self-signed P-256 certificate for both,
#                  ECDHE, keep-alive: wrk's connections do one handshake each); the backend
#                  stays plain HTTP; nginx gets txgate's TLS policy: TLS 1.2 and 1.3 (nginx
#                  before 1.23.4 stops at TLS 1.2 by default), the same suites in the same order,
#                  the server's order first (AES-128-GCM: wrk, as OpenSSL, asks AES-256 first)
#   --handshakes   with --tls: every request says `Connection: close`, so each is a new
#                  connection and a full TLS handshake (handshakes per second, CPU per handshake)
#   --nginx-default-suites  with --tls: nginx keeps its own suite choice (the client's order)
#   --log-json     nginx's logged target writes txgate's access line (the same JSON members;
#                  bench/lib.sh's nginx_txgate_log_format) instead of its `combined` line
#   --response-bytes N  the backend answers every request with a file of N bytes (a download)
#   --request-bytes N   every request is a POST carrying N bytes (an upload)
#   --chunked-response COUNTxSIZE  the backend (bench/chunked-backend.py) answers every request
#                  with COUNT chunks of SIZE bytes (an event stream): the cost of each chunk
#                  With any of these, nginx keeps bodies in memory as txgate does: a request's whole
#                  (`client_body_buffer_size` N), and up to 1 MiB of a response the client has not
#                  taken yet (`proxy_buffers 16 64k`, no temporary file: txgate's high-water mark).
#                  Its defaults write a body larger than 8 or 16 KiB to a temporary file, and
#                  `proxy_buffering off` reads a response 4 KiB at a time: both cost it more.
#
# Environment: BENCH_CONNECTIONS (default 50), BENCH_DURATION (seconds, default 10),
# BENCH_WARMUP (seconds, default 2), TXGATE_BIN (use this txgate binary instead of building),
# BENCH_KEEP_TMP=1 (keep the temp dir with configs, logs and raw wrk output).
#
# Everything listens on 127.0.0.1 only. Every process the script starts, and its temp dir, is
# removed on exit, including on failure and Ctrl-C. Not part of `make test`.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SELF="$ROOT/bench/proxy.sh"
cd "$ROOT"   # swift build runs from the repo root; every other path below is absolute

# ---------------------------------------------------------------------------------------------
# Options

CONNECTIONS="${BENCH_CONNECTIONS:-50}"
DURATION="${BENCH_DURATION:-10}"
WARMUP="${BENCH_WARMUP:-2}"
RUNS=1
WITH_TXGATE=1
TLS=0
HANDSHAKES=0
NGINX_SUITES=txgate
NGINX_LOG_FORMAT=combined
RESPONSE_BYTES=0
REQUEST_BYTES=0
CHUNK_COUNT=0
CHUNK_SIZE=0

usage() { . "$ROOT/bench/lib.sh"; header_help "$SELF"; }  # the comment above

while [ $# -gt 0 ]; do
  case "$1" in
    --quick) DURATION=3; WARMUP=1 ;;
    --runs) [ $# -ge 2 ] || { echo "proxy.sh: --runs needs a number" >&2; exit 2; }; RUNS="$2"; shift ;;
    --runs=*) RUNS="${1#--runs=}" ;;
    --nginx-only) WITH_TXGATE=0 ;;
    --tls) TLS=1 ;;
    --handshakes) TLS=1; HANDSHAKES=1 ;;
    --nginx-default-suites) NGINX_SUITES=default ;;
    --log-json) NGINX_LOG_FORMAT=txgate ;;
    --response-bytes|--request-bytes)
      [ $# -ge 2 ] || { echo "proxy.sh: $1 needs a number of bytes" >&2; exit 2; }
      if [ "$1" = --response-bytes ]; then RESPONSE_BYTES="$2"; else REQUEST_BYTES="$2"; fi
      shift ;;
    --chunked-response)
      [[ "${2:-}" =~ ^([0-9]+)x([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -ge 1 ] && [ "${BASH_REMATCH[2]}" -ge 1 ] || {
        echo "proxy.sh: --chunked-response needs COUNTxSIZE, both at least 1 (e.g. 1000x16)" >&2; exit 2; }
      CHUNK_COUNT="${BASH_REMATCH[1]}"; CHUNK_SIZE="${BASH_REMATCH[2]}"
      shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "proxy.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

for v in CONNECTIONS DURATION WARMUP RUNS; do
  [[ "${!v}" =~ ^[0-9]+$ ]] && [ "${!v}" -ge 1 ] || { echo "proxy.sh: $v must be a positive integer (got '${!v}')" >&2; exit 2; }
done
for v in RESPONSE_BYTES REQUEST_BYTES; do
  [[ "${!v}" =~ ^[0-9]+$ ]] || { echo "proxy.sh: --$(echo "${v%_BYTES}" | tr 'A-Z' 'a-z')-bytes must be a number of bytes (got '${!v}')" >&2; exit 2; }
done
if [ $(( (RESPONSE_BYTES > 0) + (REQUEST_BYTES > 0) + (CHUNK_COUNT > 0) )) -gt 1 ]; then
  echo "proxy.sh: give one of --response-bytes, --request-bytes and --chunked-response" >&2; exit 2
fi

for tool in nginx wrk curl timeout; do
  command -v "$tool" >/dev/null 2>&1 || PATH="$PATH:/usr/sbin:/sbin"
  command -v "$tool" >/dev/null 2>&1 || {
    echo "proxy.sh: '$tool' not found; run: bash scripts/install-deps.sh --bench" >&2; exit 1; }
done
NGINX="$(command -v nginx)"

log() { printf '[bench] %s\n' "$*" >&2; }
die() { printf '\n[bench] FAIL: %s\n\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------------------------------------
# Process bookkeeping and cleanup. Only PIDs recorded here are ever signalled.

TMP=""
SERVER_PIDS=()      # our direct children (nginx masters, txgate), in start order
EXTRA_PIDS=()       # nginx workers (grandchildren), recorded after start-up
CHILD=""            # the foreground helper we are waiting on (build, wrk)

is_alive() {  # running and not a zombie
  local pid="$1" state
  kill -0 "$pid" 2>/dev/null || return 1
  if [ -r "/proc/$pid/stat" ]; then
    state="$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)" || return 1
    [ "$state" != "Z" ] && [ "$state" != "X" ]
  fi
}

children_of() {  # direct children of a PID
  local pid="$1" f
  if [ -r "/proc/$pid/task/$pid/children" ]; then
    cat "/proc/$pid/task/$pid/children" 2>/dev/null || true
  elif command -v pgrep >/dev/null 2>&1; then
    pgrep -P "$pid" 2>/dev/null || true
  fi
}

stop_pid() {  # TERM, then KILL after ~5 s
  local pid="$1" i
  is_alive "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 50; i++)); do is_alive "$pid" || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
}

cleanup() {
  local rc=$? i pid
  trap - EXIT INT TERM HUP
  set +e
  [ -n "$CHILD" ] && stop_pid "$CHILD"
  # Stop in reverse order of start (txgate, proxy nginx, backend nginx).
  for ((i = ${#SERVER_PIDS[@]} - 1; i >= 0; i--)); do stop_pid "${SERVER_PIDS[$i]}"; done
  for pid in "${EXTRA_PIDS[@]}"; do
    # A worker outlives its master only if the master was killed; make sure it is still nginx.
    if is_alive "$pid" && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q '^nginx'; then
      stop_pid "$pid"
    fi
  done
  wait 2>/dev/null
  if [ -n "$TMP" ] && [ -d "$TMP" ]; then
    if [ "${BENCH_KEEP_TMP:-0}" = 1 ]; then log "kept $TMP"; else rm -rf "$TMP"; fi
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'echo >&2; log "interrupted"; exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# run_child OUTFILE CMD...: runs CMD in the background with its output in OUTFILE and waits for
# it, so that Ctrl-C is handled at once. (The redirection must not wrap this function: the
# traps would run with it and their messages would end up in OUTFILE.)
run_child() {
  local rc=0 out="$1"
  shift
  "$@" >"$out" 2>&1 </dev/null &
  CHILD=$!
  wait "$CHILD" || rc=$?
  CHILD=""
  return "$rc"
}

TMP="$(mktemp -d "${TMPDIR:-/tmp}/txgate-bench.XXXXXX")"
chmod 755 "$TMP"   # nginx workers drop to an unprivileged user when started as root

# ---------------------------------------------------------------------------------------------
# 1. Build txgate (release) if needed

TXGATE=""
if [ "$WITH_TXGATE" = 1 ]; then
  if [ -n "${TXGATE_BIN:-}" ]; then
    [ -x "$TXGATE_BIN" ] || die "TXGATE_BIN=$TXGATE_BIN is not an executable"
    TXGATE="$TXGATE_BIN"
  else
    command -v swift >/dev/null 2>&1 || die "swift not found (needed to build txgate)"
    log "building txgate (swift build -c release --static-swift-stdlib --product txgate)"
    run_child "$TMP/build.log" swift build -c release --static-swift-stdlib --product txgate || {
      tail -n 40 "$TMP/build.log" >&2; die "swift build -c release --static-swift-stdlib --product txgate failed"; }
    TXGATE="$(swift build -c release --show-bin-path)/txgate"
    [ -x "$TXGATE" ] || die "built, but $TXGATE is missing"
  fi
fi

# ---------------------------------------------------------------------------------------------
# 2. Ports and servers

BENCH_NAME=proxy.sh
. "$ROOT/bench/lib.sh"   # cpu_ticks, nginx_txgate_log_format (its ports and waits are below)

# Free ports are picked below the kernel's ephemeral range (wrk's client ports come from there).
read -r EPH_LO EPH_HI < /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || { EPH_LO=32768; EPH_HI=60999; }
if [ "$EPH_LO" -gt 12000 ]; then PORT_LO=10000; PORT_HI=$((EPH_LO - 1))
elif [ "$EPH_HI" -lt 64000 ]; then PORT_LO=$((EPH_HI + 1)); PORT_HI=65535
else PORT_LO=20000; PORT_HI=60000; fi

USED_PORTS=" "
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pick_port() {  # sets PICKED (not run in a subshell: USED_PORTS must persist)
  local p i
  for ((i = 0; i < 200; i++)); do
    p=$((PORT_LO + (RANDOM * 32768 + RANDOM) % (PORT_HI - PORT_LO + 1)))
    [[ "$USED_PORTS" == *" $p "* ]] && continue
    port_open "$p" && continue
    USED_PORTS+="$p "
    PICKED="$p"; return 0
  done
  die "no free port found in $PORT_LO-$PORT_HI"
}

wait_listening() {  # wait_listening PID PORT SECONDS: whether PID listens on PORT within SECONDS
  local pid="$1" port="$2" secs="$3" i
  for ((i = 0; i < secs * 20; i++)); do
    is_alive "$pid" || return 1
    port_open "$port" && return 0
    sleep 0.05
  done
  return 1
}

# nginx config: nginx_conf DIR PORT SERVER_BLOCK_BODY [HTTP_EXTRA]
nginx_conf() {
  local dir="$1" port="$2" location="$3" extra="${4:-}"
  mkdir -p "$dir"
  cat >"$dir/nginx.conf" <<EOF
worker_processes 1;
pid $dir/nginx.pid;
lock_file $dir/nginx.lock;
error_log $dir/error.log warn;

events {
    worker_connections 4096;
}

http {
    access_log off;
    client_body_temp_path $dir/client_body_temp;
    proxy_temp_path $dir/proxy_temp;
    fastcgi_temp_path $dir/fastcgi_temp;
    uwsgi_temp_path $dir/uwsgi_temp;
    scgi_temp_path $dir/scgi_temp;
    # Keep client connections open for the whole run (the default, 1000, makes wrk reconnect).
    keepalive_requests 1000000;
    client_max_body_size 0;
$extra
    server {
        listen 127.0.0.1:$port;
        location / {
$location
        }
    }
}
EOF
}

start_nginx() {  # start_nginx NAME DIR -> sets STARTED_PID
  local name="$1" dir="$2"
  "$NGINX" -t -q -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" >"$dir/test.log" 2>&1 || {
    cat "$dir/test.log" >&2; die "$name: nginx -t rejected $dir/nginx.conf"; }
  "$NGINX" -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" -g 'daemon off;' \
    </dev/null >"$dir/stdout.log" 2>&1 &
  STARTED_PID=$!
  SERVER_PIDS+=("$STARTED_PID")
}

# Each start_* function starts a server on a fresh port, retrying with another port if it
# cannot listen; it sets the port (B, N, T) and the PID.
start_backend() {
  local port dir="$TMP/backend" attempt
  for attempt in 1 2 3; do
    pick_port; port="$PICKED"
    if [ "$CHUNK_COUNT" -gt 0 ]; then
      mkdir -p "$dir"
      python3 "$ROOT/bench/chunked-backend.py" "$port" "$CHUNK_COUNT" "$CHUNK_SIZE" </dev/null >"$dir/error.log" 2>&1 &
      STARTED_PID=$!
      SERVER_PIDS+=("$STARTED_PID")
    else
      if [ "$RESPONSE_BYTES" -gt 0 ]; then
        nginx_conf "$dir" "$port" "            root $TMP/www;
            try_files /body.bin =404;
            default_type application/octet-stream;
            sendfile on;"
      else
        nginx_conf "$dir" "$port" '            default_type text/plain;
            return 200 "hello from backend\n";'
      fi
      start_nginx backend "$dir"
    fi
    if wait_listening "$STARTED_PID" "$port" 10; then
      BACKEND_PID=$STARTED_PID; B="$port"; return 0
    fi
    stop_pid "$STARTED_PID"; log "backend did not listen on $port (attempt $attempt)"
  done
  tail -n 20 "$dir/error.log" >&2 || true
  die "backend failed to start"
}

start_nginx_proxy() {  # start_nginx_proxy DIR_NAME [ACCESS_LOG_LINE] -> sets N, PROXY_PID
  local port dir="$TMP/$1" attempt access="${2:-}"
  for attempt in 1 2 3; do
    pick_port; port="$PICKED"
    nginx_conf "$dir" "$port" "            proxy_pass http://backend_upstream;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
$([ "$RESPONSE_BYTES$CHUNK_COUNT" != 00 ] && echo "            proxy_buffers 16 64k;
            proxy_busy_buffers_size 128k;
            proxy_max_temp_file_size 0;")
$([ "$REQUEST_BYTES" -gt 0 ] && echo "            client_body_buffer_size $((REQUEST_BYTES > 16384 ? REQUEST_BYTES : 16384));")
$access" "    upstream backend_upstream {
        server 127.0.0.1:$B;
        keepalive 64;
        keepalive_requests 1000000;
    }
$([ "$NGINX_LOG_FORMAT" = txgate ] && nginx_txgate_log_format txgate)"
    if [ "$TLS" = 1 ]; then
      local suites=""
      [ "$NGINX_SUITES" = txgate ] && suites="\\n        $(nginx_txgate_tls_suites)"
      sed -i "s|listen 127.0.0.1:$port;|listen 127.0.0.1:$port ssl;\\n        ssl_certificate $TMP/cert.pem;\\n        ssl_certificate_key $TMP/key.pem;\\n        ssl_protocols TLSv1.2 TLSv1.3;$suites|" "$dir/nginx.conf"
    fi
    start_nginx "nginx proxy" "$dir"
    if wait_listening "$STARTED_PID" "$port" 10; then
      PROXY_PID=$STARTED_PID; N="$port"; return 0
    fi
    stop_pid "$STARTED_PID"; log "proxy nginx did not listen on $port (attempt $attempt)"
  done
  tail -n 20 "$dir/error.log" >&2 || true
  die "proxy nginx failed to start"
}

# txgate_config KIND PORT DIR: plain (access log off), log (access log on, to a file), allow
# (access log off; a user, a store, a policy for authenticated users on every path).
txgate_config() {
  local kind="$1" port="$2" dir="$3"
  python3 - "$kind" "$port" "$dir" "$B" "${BENCH_HASH:-}" "$TLS" "$TMP" "$REQUEST_BYTES" >"$dir/gateway.json" <<'PY'
import json, sys
kind, port, d, backend, hash_, tls, tmp, request_bytes = sys.argv[1:9]
c = {"listen": f"127.0.0.1:{port}", "workers": 1, "upstream": {"url": f"http://127.0.0.1:{backend}", "keepAlive": 64},
     "log": {"level": "info" if kind == "log" else "warning", "access": kind == "log"},
     "limits": {"maxConnectionsPerClient": 0}}
if int(request_bytes) > 10485760:  # the default limits.maxBodyBytes
    c["limits"]["maxBodyBytes"] = int(request_bytes)
if kind == "allow":
    c.update({"users": [{"username": "bench", "passwordHash": hash_, "email": "bench@example.com"}],
              "journeys": {"Login": [{"type": "UsernamePassword"}]},
              "store": {"path": f"{d}/txgate.db"}, "secrets": {"signingKeyFile": f"{d}/signing.key"},
              "policies": [{"name": "everything", "resources": ["/**"], "actions": ["GET", "POST"], "subjects": "authenticated"}]})
if tls == "1":
    c["tls"] = {"certificate": f"{tmp}/cert.pem", "privateKey": f"{tmp}/key.pem"}
print(json.dumps(c))
PY
}

login_token() {  # login_token PORT: a session token for the bench user
  python3 "$ROOT/bench/login.py" "$1" bench bench-password "$SCHEME"
}

start_txgate() {  # start_txgate KIND -> sets T, TXGATE_PID
  local kind="$1" port dir="$TMP/txgate-$1" attempt
  mkdir -p "$dir"
  for attempt in 1 2 3; do
    pick_port; port="$PICKED"
    txgate_config "$kind" "$port" "$dir"
    if ! "$TXGATE" check --config "$dir/gateway.json" >"$dir/check.log" 2>&1; then
      cat "$dir/check.log" >&2; die "txgate check rejected $dir/gateway.json"
    fi
    "$TXGATE" serve --config "$dir/gateway.json" --workers 1 </dev/null >"$dir/stdout.log" 2>"$dir/txgate.log" &
    STARTED_PID=$!
    SERVER_PIDS+=("$STARTED_PID")
    if wait_listening "$STARTED_PID" "$port" 20; then
      TXGATE_PID=$STARTED_PID; T="$port"; return 0
    fi
    stop_pid "$STARTED_PID"; log "txgate did not listen on $port (attempt $attempt)"
  done
  tail -n 20 "$dir/txgate.log" >&2 || true
  die "txgate ($kind) failed to start"
}

record_workers() { local pid; for pid in $(children_of "$1"); do EXTRA_PIDS+=("$pid"); done; }

# A real request through each target must return the backend's body with status 200.
check_target() {  # check_target NAME PORT HEADER SCHEME
  local name="$1" port="$2" header="${3:-}" scheme="${4:-http}" code body args=()
  [ -n "$header" ] && args=(-H "$header")
  [ "$REQUEST_BYTES" -gt 0 ] && args+=(-H 'Content-Type: application/octet-stream' --data-binary "@$TMP/request.bin")
  code="$(curl -ksS --max-time 10 "${args[@]}" -o "$TMP/check.body" -w '%{http_code}' "$scheme://127.0.0.1:$port/")" || code="curl-error"
  if [ "$RESPONSE_BYTES$CHUNK_COUNT" != 00 ]; then
    [ "$code" = 200 ] && cmp -s "$TMP/check.body" "$TMP/expected.body" && return 0
    die "$name (127.0.0.1:$port) answered status $code and $(stat -c %s "$TMP/check.body" 2>/dev/null || echo 0) bytes, not the backend's $(stat -c %s "$TMP/expected.body") bytes"
  fi
  body="$(cat "$TMP/check.body" 2>/dev/null || true)"
  if [ "$code" != 200 ] || [ "$body" != "hello from backend" ]; then
    die "$name (127.0.0.1:$port) answered status $code, body: ${body:0:300}"
  fi
}

declare -A NAME=([direct]="direct" [nginx]="nginx proxy_pass" [nginx-log]="nginx +access log"
                 [txgate]="txgate" [txgate-log]="txgate +access log" [txgate-allow]="txgate allow path")
[ "$NGINX_LOG_FORMAT" = txgate ] && NAME[nginx-log]="nginx +txgate's log line"
SCHEME=http
if [ "$TLS" = 1 ]; then
  SCHEME=https
  bench_tls_cert "$TMP/cert.pem" "$TMP/key.pem" || exit 1
  suffix="(TLS)"; [ "$HANDSHAKES" = 1 ] && suffix="(TLS, new conn.)"
  for t in nginx nginx-log txgate txgate-log txgate-allow; do NAME[$t]="${NAME[$t]} $suffix"; done
  [ "$HANDSHAKES" = 1 ] && NAME[direct]="direct (new conn.)"
fi
# The backend is plain HTTP; with --tls, the proxies are HTTPS.
scheme_of() { if [ "$1" = direct ]; then echo http; else echo "$SCHEME"; fi; }
if [ "$RESPONSE_BYTES" -gt 0 ]; then
  mkdir -p "$TMP/www"
  head -c "$RESPONSE_BYTES" /dev/urandom >"$TMP/www/body.bin"
  chmod -R a+rX "$TMP/www"
  cp "$TMP/www/body.bin" "$TMP/expected.body"
fi
x_bytes() { head -c "$1" /dev/zero | tr '\0' x; }  # N bytes of "x"
# The body the chunked backend's answer decodes to.
[ "$CHUNK_COUNT" -gt 0 ] && x_bytes $((CHUNK_COUNT * CHUNK_SIZE)) >"$TMP/expected.body"
if [ "$REQUEST_BYTES" -gt 0 ]; then
  x_bytes "$REQUEST_BYTES" >"$TMP/request.bin"
  cat >"$TMP/post.lua" <<EOF
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/octet-stream"
local f = assert(io.open("$TMP/request.bin", "rb"))
wrk.body = f:read("*a")
f:close()
EOF
fi
declare -A PORT PIDS_OF HEADER
start_backend
record_workers "$BACKEND_PID"
PORT[direct]="$B"; PIDS_OF[direct]="$BACKEND_PID $(children_of "$BACKEND_PID")"
start_nginx_proxy nginx-proxy
record_workers "$PROXY_PID"
PORT[nginx]="$N"; PIDS_OF[nginx]="$PROXY_PID $(children_of "$PROXY_PID")"
start_nginx_proxy nginx-proxy-log "            access_log $TMP/nginx-proxy-log/access.log $NGINX_LOG_FORMAT buffer=64k flush=1s;"
record_workers "$PROXY_PID"
PORT[nginx-log]="$N"; PIDS_OF[nginx-log]="$PROXY_PID $(children_of "$PROXY_PID")"
TARGETS=(direct nginx nginx-log)
if [ "$WITH_TXGATE" = 1 ]; then
  BENCH_HASH="$(printf 'bench-password' | "$TXGATE" hash-password 2>/dev/null | tail -n 1)"
  for kind in plain log allow; do
    start_txgate "$kind"
    t="txgate-$kind"; [ "$kind" = plain ] && t=txgate
    TARGETS+=("$t"); PORT[$t]="$T"; PIDS_OF[$t]="$TXGATE_PID"
  done
  HEADER[txgate-allow]="iPlanetDirectoryPro: $(login_token "${PORT[txgate-allow]}")"
fi

for t in "${TARGETS[@]}"; do
  log "${NAME[$t]}: 127.0.0.1:${PORT[$t]}"
  check_target "${NAME[$t]}" "${PORT[$t]}" "${HEADER[$t]:-}" "$(scheme_of "$t")"
done

# ---------------------------------------------------------------------------------------------
# 3-4. Measure, parse, report

to_ms() {  # "216.00us" -> 0.216
  awk -v v="$1" 'BEGIN {
    if (match(v, /^[0-9.]+/) == 0) { print "nan"; exit }
    n = substr(v, 1, RLENGTH); u = substr(v, RLENGTH + 1)
    f = (u == "us") ? 0.001 : (u == "ms") ? 1 : (u == "s") ? 1000 : (u == "m") ? 60000 : (u == "h") ? 3600000 : -1
    if (f < 0) print "nan"; else printf "%.4f\n", n * f
  }'
}

# parse_wrk FILE -> "rps p50 p99 non2xx connect read write timeout"
parse_wrk() {
  local f="$1" rps p50 p99 non2xx sock
  rps="$(awk '/^Requests\/sec:/ {print $2}' "$f")"
  p50="$(awk '$1 == "50%" {print $2; exit}' "$f")"
  p99="$(awk '$1 == "99%" {print $2; exit}' "$f")"
  non2xx="$(awk -F': *' '/Non-2xx or 3xx responses:/ {print $2+0}' "$f")"
  sock="$(awk '/Socket errors:/ {gsub(",", ""); print $4, $6, $8, $10}' "$f")"
  [ -n "$rps" ] && [ -n "$p50" ] && [ -n "$p99" ] || return 1
  echo "$rps $(to_ms "$p50") $(to_ms "$p99") ${non2xx:-0} ${sock:-0 0 0 0}"
}

run_wrk() {  # run_wrk PORT SECONDS OUTFILE HEADER SCHEME
  local port="$1" secs="$2" out="$3" header="${4:-}" scheme="${5:-http}" args=()
  [ -n "$header" ] && args=(-H "$header")
  [ "$HANDSHAKES" = 1 ] && args+=(-H "Connection: close")
  [ "$REQUEST_BYTES" -gt 0 ] && args+=(-s "$TMP/post.lua")
  run_child "$out" timeout -k 5 $((secs + 30)) wrk -t1 -c"$CONNECTIONS" -d"${secs}s" --latency "${args[@]}" \
    "$scheme://127.0.0.1:$port/"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 > 0) printf "%.2f", a / b; else printf "n/a" }'; }

ROW_FMT='%-26s %9s %8s %8s %11s %8s %9s\n'
print_header() { printf "$ROW_FMT" target req/s 'p50(ms)' 'p99(ms)' 'µs CPU/req' non-2xx sock-err; }
print_row() {  # NAME RPS P50 P99 CPU NON2XX SOCKERR
  printf "$ROW_FMT" "$1" "$(printf '%.0f' "$2")" "$(printf '%.3f' "$3")" "$(printf '%.3f' "$4")" "$(printf '%.1f' "$5")" "$6" "$7"
}
# print_ratios RPS P99 CPU: names of associative arrays indexed by target (one run, or the medians)
print_ratios() {
  [ "$WITH_TXGATE" = 1 ] || return 0
  local -n r="$1" p="$2" c="$3"
  printf '%-36s %6s %6s %6s\n' ratio CPU req/s p99
  printf '%-36s %6s %6s %6s\n' "txgate / nginx proxy_pass" "$(ratio "${c[txgate]}" "${c[nginx]}")" \
    "$(ratio "${r[txgate]}" "${r[nginx]}")" "$(ratio "${p[txgate]}" "${p[nginx]}")"
  printf '%-36s %6s %6s %6s\n' "txgate +log / nginx +log (buffered)" "$(ratio "${c[txgate-log]}" "${c[nginx-log]}")" \
    "$(ratio "${r[txgate-log]}" "${r[nginx-log]}")" "$(ratio "${p[txgate-log]}" "${p[nginx-log]}")"
  printf '%-36s %6s %6s %6s\n' "txgate allow path / txgate" "$(ratio "${c[txgate-allow]}" "${c[txgate]}")" \
    "$(ratio "${r[txgate-allow]}" "${r[txgate]}")" "$(ratio "${p[txgate-allow]}" "${p[txgate]}")"
}

declare -A RPS P50 P99 CPU NON2XX SOCKERR
FAILED=""

measure_target() {  # measure_target TARGET RUN
  local t="$1" run="$2" out="$TMP/wrk-$2-$1.txt" before after requests parsed
  log "run $run/$RUNS: ${NAME[$t]} (127.0.0.1:${PORT[$t]})"
  run_wrk "${PORT[$t]}" "$WARMUP" "$TMP/warmup.txt" "${HEADER[$t]:-}" "$(scheme_of "$t")" || { cat "$TMP/warmup.txt" >&2; die "wrk warm-up against ${NAME[$t]} failed"; }
  # shellcheck disable=SC2086
  before="$(cpu_ticks ${PIDS_OF[$t]})"
  run_wrk "${PORT[$t]}" "$DURATION" "$out" "${HEADER[$t]:-}" "$(scheme_of "$t")" || { cat "$out" >&2; die "wrk against ${NAME[$t]} failed"; }
  # shellcheck disable=SC2086
  after="$(cpu_ticks ${PIDS_OF[$t]})"
  parsed="$(parse_wrk "$out")" || { cat "$out" >&2; die "could not parse wrk output for ${NAME[$t]}"; }
  requests="$(awk '/requests in/ { print $1 }' "$out")"
  read -r rps p50 p99 non2xx s_conn s_read s_write s_timeout <<<"$parsed"
  RPS[$t,$run]=$rps; P50[$t,$run]=$p50; P99[$t,$run]=$p99; NON2XX[$t,$run]=$non2xx
  CPU[$t,$run]="$(awk -v d=$((after - before)) -v hz="$(getconf CLK_TCK)" -v n="$requests" 'BEGIN { printf "%.2f", (n > 0) ? (d / hz / n * 1e6) : 0 }')"
  SOCKERR[$t,$run]=$((s_conn + s_read + s_write + s_timeout))
  if [ "${SOCKERR[$t,$run]}" -gt 0 ]; then
    log "${NAME[$t]}: socket errors: connect $s_conn, read $s_read, write $s_write, timeout $s_timeout"
  fi
  if [ "$non2xx" -gt 0 ]; then
    log "${NAME[$t]}: $non2xx non-2xx/3xx responses"
    [[ "$t" == txgate* ]] && FAILED="${NAME[$t]} returned $non2xx non-2xx responses in run $run"
  fi
  if [[ "$t" == txgate* ]] && ! is_alive "${PIDS_OF[$t]}"; then FAILED="${NAME[$t]} exited during run $run"; fi
  return 0
}

log "wrk -t1 -c$CONNECTIONS -d${DURATION}s --latency, warm-up ${WARMUP}s, $RUNS run(s), order alternating$([ "$RESPONSE_BYTES" -gt 0 ] && echo ", responses of $RESPONSE_BYTES bytes")$([ "$REQUEST_BYTES" -gt 0 ] && echo ", POSTs of $REQUEST_BYTES bytes")$([ "$CHUNK_COUNT" -gt 0 ] && echo ", chunked responses of $CHUNK_COUNT chunks of $CHUNK_SIZE bytes")"
for ((run = 1; run <= RUNS; run++)); do
  order=("${TARGETS[@]}")
  if [ $((run % 2)) -eq 0 ]; then
    order=(); for ((i = ${#TARGETS[@]} - 1; i >= 0; i--)); do order+=("${TARGETS[$i]}"); done
  fi
  for t in "${order[@]}"; do measure_target "$t" "$run"; done

  echo
  [ "$RUNS" -gt 1 ] && echo "run $run/$RUNS"
  print_header
  declare -A R1=() P1=() C1=()
  for t in "${TARGETS[@]}"; do
    print_row "${NAME[$t]}" "${RPS[$t,$run]}" "${P50[$t,$run]}" "${P99[$t,$run]}" "${CPU[$t,$run]}" "${NON2XX[$t,$run]}" "${SOCKERR[$t,$run]}"
    R1[$t]="${RPS[$t,$run]}"; P1[$t]="${P99[$t,$run]}"; C1[$t]="${CPU[$t,$run]}"
  done
  print_ratios R1 P1 C1
  echo

  if [ -n "$FAILED" ]; then
    [ "$WITH_TXGATE" = 1 ] && { log "txgate logs (last 10 lines each):"; tail -n 10 "$TMP"/txgate-*/txgate.log >&2 || true; }
    die "$FAILED"
  fi
done

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
column() {  # column ARRAYNAME TARGET -> values across runs
  local -n arr="$1"; local r
  for ((r = 1; r <= RUNS; r++)); do echo "${arr[$2,$r]}"; done
}

if [ "$RUNS" -gt 1 ]; then
  declare -A M_RPS M_P50 M_P99 M_CPU S_NON2XX S_SOCK
  for t in "${TARGETS[@]}"; do
    M_RPS[$t]="$(median $(column RPS "$t"))"
    M_P50[$t]="$(median $(column P50 "$t"))"
    M_P99[$t]="$(median $(column P99 "$t"))"
    M_CPU[$t]="$(median $(column CPU "$t"))"
    S_NON2XX[$t]="$(column NON2XX "$t" | awk '{ s += $1 } END { print s + 0 }')"
    S_SOCK[$t]="$(column SOCKERR "$t" | awk '{ s += $1 } END { print s + 0 }')"
  done
  echo "median of $RUNS runs (non-2xx and sock-err: totals)"
  print_header
  for t in "${TARGETS[@]}"; do
    print_row "${NAME[$t]}" "${M_RPS[$t]}" "${M_P50[$t]}" "${M_P99[$t]}" "${M_CPU[$t]}" "${S_NON2XX[$t]}" "${S_SOCK[$t]}"
  done
  print_ratios M_RPS M_P99 M_CPU
  echo
fi
