#!/usr/bin/env bash
# Where the CPU goes with several workers, on a many-core machine: perf (cpu-clock, call graphs)
# over the proxy's cores while wrk drives txgate, then nginx proxy_pass, each with N workers
# pinned to cores 0..N-1 in front of an nginx backend on cores 12-15, wrk on 8-11 (the layout of
# the side-by-side many-core benchmark, devbench, whose bundle holds the binaries). Writes perf's
# reports as text.
#
#   bash bench/devbench-profile.sh BUNDLE PERF_DIR OUT_DIR [WORKERS]
#
# BUNDLE: an unpacked devbench bundle (bin/, lib/); its bin/txgate should keep its symbols.
# PERF_DIR: a perf binary and the shared libraries it needs (perf, lib/). Needs 16 cores and
# root (perf -a), unless BACKEND_CORES and WRK_CORES (taskset lists) say where else to run.
# TLS_CERT=P (P.crt, P.key): both proxies listen with TLS, keep-alive, on one policy (TLS 1.2 and
# 1.3, the same suites in the same order, the server's order first: bench/proxy.sh's --tls), and
# the reports are named txgate-tls-* and nginx-tls-*. TAG=S appends S to the reports' names.
# ROUNDS=R: no profile (PERF_DIR may be -); instead R alternating rounds of 5 s of wrk on each
# proxy, with req/s, p50, p90, p99, the CPU time a request costs the proxy's processes, the
# time their threads waited for a core (runnable, not running: lib.sh's runq_wait) a request
# and a wait (with a PERF_DIR, also their context switches, moves between cores and loop turns
# a request), their medians
# and txgate's ratios to nginx, in OUT_DIR/compare*.txt: the same layout and TLS policy on both
# sides, which devbench's TLS section does not give nginx. CONNS=C: wrk's connections (default
# 256). ACCESS_LOG=1: both proxies write an access line for every request to a file (nginx
# buffered, 64k, in txgate's JSON line: lib.sh's nginx_txgate_log_format; txgate's log.access),
# and the names get -log. PINNED=1: each proxy pins worker i to core i (txgate's `cpuAffinity`
# "auto", nginx's `worker_cpu_affinity auto`), and the names get -pinned.
# Everything listens on 127.0.0.1; what it starts is stopped on exit.
set -eu
B="$1"; PERF="$2"; OUT="$3"; N="${4:-8}"
BACKEND_CORES="${BACKEND_CORES:-12-15}"; WRK_CORES="${WRK_CORES:-8-11}"
[ "$(nproc)" -ge 16 ] || [ "$BACKEND_CORES" != 12-15 ] || { echo "devbench-profile.sh: needs 16 cores" >&2; exit 2; }
export LD_LIBRARY_PATH="$B/lib"
BENCH_NAME=devbench-profile.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"   # bench_cleanup, wait_port, cpu_ticks, runq_wait, nginx_txgate_tls_suites
TMP="$(mktemp -d)"; chmod 755 "$TMP"
PIDS=()
trap bench_cleanup EXIT
cores="0-$((N - 1))"
TAG="${TAG:-}"; scheme=http; listen_tls=""; txgate_tls=""
CONNS="${CONNS:-256}"
[[ "$CONNS" =~ ^[0-9]+$ ]] && [ "$CONNS" -ge 1 ] || { echo "devbench-profile.sh: CONNS must be a positive integer (got '$CONNS')" >&2; exit 2; }
nginx_log="access_log off;"; txgate_log='"level": "warning", "access": false'
if [ "${ACCESS_LOG:-0}" = 1 ]; then
  TAG="-log$TAG"
  nginx_log="$(nginx_txgate_log_format txgate) access_log $TMP/access.log txgate buffer=64k flush=1s;"
  txgate_log='"level": "info", "access": true'
fi
nginx_affinity=""; txgate_affinity=""
if [ "${PINNED:-0}" = 1 ]; then
  TAG="-pinned$TAG"; nginx_affinity="worker_cpu_affinity auto;"; txgate_affinity=', "cpuAffinity": "auto"'
fi
if [ -n "${TLS_CERT:-}" ]; then
  [ -f "$TLS_CERT.crt" ] && [ -f "$TLS_CERT.key" ] || { echo "devbench-profile.sh: no $TLS_CERT.crt and $TLS_CERT.key" >&2; exit 2; }
  TAG="-tls$TAG"; scheme=https
  listen_tls=" ssl; ssl_certificate $TLS_CERT.crt; ssl_certificate_key $TLS_CERT.key; ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache off; ssl_session_tickets off; $(nginx_txgate_tls_suites | sed 's/;$//')"
  txgate_tls=", \"tls\": {\"certificate\": \"$TLS_CERT.crt\", \"privateKey\": \"$TLS_CERT.key\"}"
fi
perf() { LD_LIBRARY_PATH="$PERF/lib" "$PERF/perf" "$@"; }
# common LOG: the events block and the start of the http block, with LOG (the access log's directives).
common() {
  printf '%s\n' "events { worker_connections 8192; }" \
    "http { $1 client_body_temp_path $TMP/cb; proxy_temp_path $TMP/pt; fastcgi_temp_path $TMP/ft; uwsgi_temp_path $TMP/ut; scgi_temp_path $TMP/st;" \
    "  keepalive_requests 100000;"
}

cat > "$TMP/backend.conf" <<EOF
user root root; worker_processes 4; daemon off; pid $TMP/backend.pid; error_log $TMP/backend.err;
$(common "access_log off;")
  server { listen 127.0.0.1:19080 backlog=4096 reuseport; location / { default_type application/json; return 200 '{"accounts":[{"id":"A1","balance":"100.00"}]}\n'; } } }
EOF
cat > "$TMP/proxy.conf" <<EOF
user root root; worker_processes $N; $nginx_affinity daemon off; pid $TMP/proxy.pid; error_log $TMP/proxy.err;
$(common "$nginx_log")
  upstream be { server 127.0.0.1:19080; keepalive 64; keepalive_requests 100000; }
  server { listen 127.0.0.1:19081 backlog=4096 reuseport$listen_tls; location / { proxy_pass http://be; proxy_http_version 1.1; proxy_set_header Connection ""; } } }
EOF
cat > "$TMP/txgate.json" <<EOF
{"listen": "127.0.0.1:19082", "publicUrl": "http://127.0.0.1:19082", "workers": $N,
 "upstream": {"url": "http://127.0.0.1:19080", "keepAlive": 64}, "limits": {"maxConnectionsPerClient": 0},
 "log": {$txgate_log}$txgate_tls$txgate_affinity}
EOF

taskset -c "$BACKEND_CORES" "$B/bin/nginx" -c "$TMP/backend.conf" -p "$TMP" -e "$TMP/backend.err0" & PIDS+=($!)
wait_port 19080
start_txgate() {
  TXGATE_SIGNING_KEY="devbench-$(printf 'k%.0s' $(seq 40))" taskset -c "$cores" "$B/bin/txgate" serve --config "$TMP/txgate.json" > "$TMP/txgate.log" 2>&1 & PIDS+=($!)
  wait_port 19082
}
start_nginx() {
  taskset -c "$cores" "$B/bin/nginx" -c "$TMP/proxy.conf" -p "$TMP" -e "$TMP/proxy.err0" & PIDS+=($!)
  wait_port 19081
  sleep 0.3
}

if [ "${ROUNDS:-0}" -gt 0 ]; then
  start_txgate; gw=${PIDS[-1]}
  start_nginx; nx=${PIDS[-1]}
  # With perf (PERF_DIR not -): the proxy's context switches and moves between cores too, over
  # the measured run (a worker switched out or moved keeps its connections waiting: the tail),
  # and its loops' turns (epoll_wait calls, where the kernel has the syscall tracepoints): the
  # fewer turns a request, the more requests each turn serves before the next is read.
  stat_events=context-switches,cpu-migrations
  if [ "$PERF" != - ] && perf stat -e syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_pwait -- true >/dev/null 2>&1; then
    stat_events="$stat_events,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_pwait"
  fi
  measure() {  # name port pids... (the proxy's: txgate's process, nginx's master and workers)
    local name="$1" port="$2" t0 t1 q0 q1 out sw="- - -" stat=""
    shift 2
    taskset -c "$WRK_CORES" "$B/bin/wrk" -t4 -c"$CONNS" -d1s "$scheme://127.0.0.1:$port/accounts" >/dev/null
    if [ "$PERF" != - ]; then
      perf stat -x, -e "$stat_events" -p "$(IFS=,; echo "$*")" -o "$TMP/stat.txt" -- sleep 5 2>/dev/null & stat=$!
    fi
    t0=$(cpu_ticks "$@"); q0="$(runq_wait "$@")"
    out="$(taskset -c "$WRK_CORES" "$B/bin/wrk" -t4 -c"$CONNS" -d5s --latency "$scheme://127.0.0.1:$port/accounts")"
    t1=$(cpu_ticks "$@"); q1="$(runq_wait "$@")"
    if [ -n "$stat" ]; then
      wait "$stat" || true
      sw="$(awk -F, '$3 == "context-switches" { c = $1 } $3 == "cpu-migrations" { m = $1 } $3 ~ /epoll/ { e += $1; te = 1 }
        END { print (c == "" ? "-" : c), (m == "" ? "-" : m), (te ? e : "-") }' "$TMP/stat.txt")"
    fi
    printf '%s %s %s %s %s\n' "$name" "$((t1 - t0))" \
      "$(echo "$out" | awk '/requests in/ { n = $1 } /Requests\/sec/ { r = $2 } $1 == "50%" { p50 = $2 } $1 == "90%" { p90 = $2 } $1 == "99%" { p = $2 } END { print n, r, p50, p90, p }')" "$sw" \
      "$(echo "$q0 $q1" | awk '{ print $3 - $1, $4 - $2 }')"
  }
  for r in $(seq "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then order="txgate nginx"; else order="nginx txgate"; fi
    for t in $order; do
      if [ "$t" = txgate ]; then measure txgate 19082 "$gw"; else measure nginx 19081 "$nx" $(pgrep -P "$nx"); fi
    done
  done | python3 -c '
import statistics, sys
hz, workers, tag, conns = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
ms = lambda v: float(v[:-2]) / 1000 if v.endswith("us") else float(v[:-2]) if v.endswith("ms") else float(v[:-1]) * 1000
per_k = lambda v, n: float(v) * 1000 / n if v != "-" else float("nan")
rows = {}
for line in sys.stdin:
    name, ticks, n, rps, p50, p90, p99, cs, mig, turns, wait, slices = line.split()
    n, wait, slices = int(n), float(wait), float(slices)
    rows.setdefault(name, []).append((float(rps), ms(p50), ms(p90), ms(p99), int(ticks) / hz * 1e6 / n, per_k(cs, n), per_k(mig, n),
                                      per_k(turns, n), wait / 1e3 / n, wait / 1e3 / slices if slices else float("nan")))
    print(line.strip(), flush=True)
med = {k: [statistics.median(x[i] for x in v) for i in range(10)] for k, v in rows.items()}
kind = ("TLS" if "-tls" in tag else "plain") + (", access log" if "-log" in tag else "") + (", workers pinned" if "-pinned" in tag else "")
print("\n| %s worker(s), %s, %s connections | req/s | p50 ms | p90 ms | p99 ms | CPU us/req | switches/1k req | core moves/1k req | loop turns/1k req | waited for a core us/req | us a wait |" % (workers, kind, conns))
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for k in ("nginx", "txgate"):
    print("| %s | %.0f | %.2f | %.2f | %.2f | %.1f | %.1f | %.2f | %.1f | %.2f | %.1f |" % (k, *med[k]))
t, g = med["txgate"], med["nginx"]
print("txgate / nginx (medians of %d rounds): req/s %.2f, p50 %.2f, p99 %.2f, CPU %.2f" % (len(rows["txgate"]), t[0] / g[0], t[1] / g[1], t[3] / g[3], t[4] / g[4]))
' "$(getconf CLK_TCK)" "$N" "$TAG" "$CONNS" | tee "$OUT/compare$TAG.txt"
  if [ "${ACCESS_LOG:-0}" = 1 ]; then   # both wrote their lines (nginx flushes its buffer on exit)
    kill "$nx"; wait "$nx" 2>/dev/null || true
    for f in "$TMP/access.log" "$TMP/txgate.log"; do
      grep -q '"msg":"access"' "$f" || echo "devbench-profile.sh: no access line in $f" >&2
    done
  fi
  exit 0
fi

profile() {  # name port
  taskset -c "$WRK_CORES" "$B/bin/wrk" -t4 -c"$CONNS" -d1s "$scheme://127.0.0.1:$2/accounts" >/dev/null
  taskset -c "$WRK_CORES" "$B/bin/wrk" -t4 -c"$CONNS" -d7s "$scheme://127.0.0.1:$2/accounts" > "$OUT/$1-wrk.txt" &
  local w=$!
  sleep 2
  perf record -a -g -C "$cores" -F 1999 -o "$TMP/$1.data" -- sleep 3 2> "$TMP/$1.perf.err" >/dev/null
  wait "$w"
  perf report -i "$TMP/$1.data" --no-children --sort comm,dso --stdio -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -25 > "$OUT/$1-dso.txt"
  perf report -i "$TMP/$1.data" --no-children --sort sym --stdio -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -150 > "$OUT/$1-sym.txt"
  perf report -i "$TMP/$1.data" --children --sort sym --stdio -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -150 > "$OUT/$1-children.txt"
}

start_txgate
profile "txgate$TAG" 19082
kill "${PIDS[1]}"; wait "${PIDS[1]}" 2>/dev/null || true

start_nginx
profile "nginx$TAG" 19081
for f in "$OUT"/*-wrk.txt; do echo "$f: $(grep Requests/sec "$f")"; done
