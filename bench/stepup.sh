#!/usr/bin/env bash
# The full step-up cycle per second, on the SQLite store and on the Redis store, side by side in
# one run on loopback: challenge -> composite_advice start -> TOTP submit -> retry consumed.
#
#   bash bench/stepup.sh [--quick] [--rounds N] [--callgrind]
#
#   --quick       2 s per measurement (instead of BENCH_DURATION, default 5)
#   --rounds N    measure each store N times (default 3), alternating which goes first, and
#                 report the median of each
#   --callgrind   run both gateways under valgrind's callgrind, instrumented only while cycles
#                 are measured, and report user-space instructions per cycle (the figure to
#                 compare two builds by on a shared machine; times and CPU are then meaningless)
#
# Environment: BENCH_DURATION (seconds, default 5), BENCH_CONCURRENCY (client connections, default 8),
# BENCH_PROCS (client processes the connections are spread over, default 2), BENCH_WORKERS (each
# gateway's event loops, default 1), BENCH_USERS (users per round and store, default 1000 per
# second of BENCH_DURATION and at least 2000; each has three TOTP codes at a time), BENCH_KEEP_TMP=1
# (keep the temp dir with configs and logs), TXGATE_BIN (this txgate binary instead of building one),
# DEMO_BANK_BIN (this demo-bank likewise; with both, no Swift toolchain is needed). On a many-core
# machine, BENCH_GATEWAY_CORES, BENCH_CLIENT_CORES and BENCH_SERVICE_CORES (taskset core lists) pin
# the gateways, the client's processes, and redis-server with the backend, so that neither the
# client nor the services take the gateway's cores (bench/device-run.sh's step-up scaling section).
# BENCH_BACKEND: demo-bank (default) or nginx, four workers answering every request with a
# transfer's 201: demo-bank runs on one loop and spends about 0.15 ms a transfer, so from about
# 6,000 cycles a second it, not the gateway, sets the pace.
#
# Two gateways (BENCH_WORKERS each) in front of one backend, the same configuration except the
# store: SQLite (a file in the temp dir) and Redis (a redis-server started here, no persistence).
# Everything listens on 127.0.0.1. Every process started and the temp dir are removed on exit.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

DURATION="${BENCH_DURATION:-5}"
CONCURRENCY="${BENCH_CONCURRENCY:-8}"
PROCS="${BENCH_PROCS:-2}"
WORKERS="${BENCH_WORKERS:-1}"
ROUNDS=3
CALLGRIND=0
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) DURATION=2 ;;
    --callgrind) CALLGRIND=1 ;;
    --rounds) [ $# -ge 2 ] || { echo "stepup.sh: --rounds needs a number" >&2; exit 2; }; ROUNDS="$2"; shift ;;
    -h|--help) . "$ROOT/bench/lib.sh"; header_help "$0"; exit 0 ;;
    *) echo "stepup.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
# A user can pass at most three codes per run (steps -1, 0, +1), and one gateway worker does about
# 1,100 cycles/s on this kind of machine: 1000 users per second leaves a margin.
USERS="${BENCH_USERS:-$((DURATION * 1000 > 2000 ? DURATION * 1000 : 2000))}"
for v in DURATION CONCURRENCY PROCS WORKERS USERS ROUNDS; do
  [[ "${!v}" =~ ^[0-9]+$ ]] && [ "${!v}" -ge 1 ] || { echo "stepup.sh: $v must be a positive integer (got '${!v}')" >&2; exit 2; }
done
command -v redis-server >/dev/null || { echo "stepup.sh: redis-server not found; run: bash scripts/install-deps.sh" >&2; exit 1; }
if [ "$CALLGRIND" = 1 ]; then
  for tool in valgrind callgrind_control objcopy; do
    command -v "$tool" >/dev/null || { echo "stepup.sh: --callgrind needs '$tool' (apt-get install valgrind binutils)" >&2; exit 2; }
  done
fi

log() { printf '[stepup] %s\n' "$*" >&2; }
die() { printf '\n[stepup] FAIL: %s\n\n' "$*" >&2; exit 1; }

TMP="$(mktemp -d "${TMPDIR:-/tmp}/txgate-stepup.XXXXXX")"
PIDS=()   # only these (our own children) are ever signalled
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  if [ "${BENCH_KEEP_TMP:-0}" = 1 ]; then log "kept $TMP"; else rm -rf "$TMP"; fi
  exit "$rc"
}
# Cleanup runs once, on exit; a signal only decides the exit status (a cleanup trap on INT would
# return into the script, which would then carry on against stopped servers).
trap cleanup EXIT
trap 'echo >&2; log "interrupted"; exit 130' INT
trap 'exit 143' TERM

BACKEND_KIND="${BENCH_BACKEND:-demo-bank}"
case "$BACKEND_KIND" in
  demo-bank) ;;
  nginx) command -v nginx >/dev/null || PATH="$PATH:/usr/sbin"
         command -v nginx >/dev/null || { echo "stepup.sh: BENCH_BACKEND=nginx, but nginx is not installed" >&2; exit 1; } ;;
  *) echo "stepup.sh: BENCH_BACKEND must be demo-bank or nginx (got '$BACKEND_KIND')" >&2; exit 2 ;;
esac
BUILD=()   # what must be built here (nothing, when both binaries are given: no toolchain needed)
[ -n "${TXGATE_BIN:-}" ] || BUILD+=(txgate)
[ "$BACKEND_KIND" != demo-bank ] || [ -n "${DEMO_BANK_BIN:-}" ] || BUILD+=(demo-bank)
if [ ${#BUILD[@]} -gt 0 ]; then
  log "building (release): ${BUILD[*]}"
  for product in "${BUILD[@]}"; do swift build -c release --static-swift-stdlib --product "$product" >/dev/null; done
  BIN="$(swift build -c release --show-bin-path)"
fi
TXGATE="${TXGATE_BIN:-${BIN:-}/txgate}"
BANK="${DEMO_BANK_BIN:-${BIN:-}/demo-bank}"
GATEWAY=("$TXGATE")
# taskset prefixes (empty: not pinned); taskset execs the command, so $! stays the server's pid.
PIN_GATEWAY=(); [ -z "${BENCH_GATEWAY_CORES:-}" ] || PIN_GATEWAY=(taskset -c "$BENCH_GATEWAY_CORES")
PIN_CLIENT=(); [ -z "${BENCH_CLIENT_CORES:-}" ] || PIN_CLIENT=(taskset -c "$BENCH_CLIENT_CORES")
PIN_SERVICE=(); [ -z "${BENCH_SERVICE_CORES:-}" ] || PIN_SERVICE=(taskset -c "$BENCH_SERVICE_CORES")
if [ "$CALLGRIND" = 1 ]; then
  # Valgrind 3.19 cannot read the DWARF 5 of Swift's release builds: a copy without debug
  # information (function names are kept).
  objcopy --strip-debug "$TXGATE" "$TMP/txgate"
  GATEWAY=(valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$TMP/callgrind.out.%p" "$TMP/txgate")
fi

BENCH_NAME=stepup.sh
. "$ROOT/bench/lib.sh"

BANK_PORT=$(free_port); REDIS_PORT=$(free_port); SQLITE_PORT=$(free_port); RPORT=$(free_port)
SECRET=JBSWY3DPEHPK3PXP
PASSWORD=bench-password
TOTAL_USERS=$((USERS * ROUNDS))

# One config per store. The password hash is scrypt at a low cost (bench_password_hash) so that logging in
# thousands of users before the measurement is quick; no password is checked during a cycle.
python3 - "$TMP" "$BANK_PORT" "$SQLITE_PORT" "$RPORT" "$REDIS_PORT" "$TOTAL_USERS" "$SECRET" "$(bench_password_hash "$PASSWORD")" "$WORKERS" <<'EOF'
import json, os, sys
tmp, bank, sport, rport, redis, n, secret, phash, workers = sys.argv[1:]
workers = int(workers)
def config(port, store):
    return {
        "listen": "127.0.0.1:%s" % port, "publicUrl": "http://127.0.0.1:%s" % port, "workers": workers,
        "upstream": {"url": "http://127.0.0.1:%s" % bank, "keepAlive": 64},
        "log": {"level": "warning", "access": False},
        "store": store,
        "users": [{"username": "bench%d" % i, "passwordHash": phash, "totpSecret": secret} for i in range(int(n))],
        "loginJourney": "Login",
        "journeys": {"Login": [{"type": "UsernamePassword"}], "ConfirmTransaction": [{"type": "TOTP"}]},
        "security": {"maxPendingTransactions": 1000000},
        "policies": [
            {"name": "transfer", "resources": ["/transfer"], "actions": ["POST"], "subjects": "authenticated",
             "transaction": {"journey": "ConfirmTransaction", "ttlS": 180,
                             "bind": {"body": ["/amount", "/currency", "/payee"]},
                             "display": "Approve {amount} {currency} to {payee}?"}},
        ],
    }
json.dump(config(sport, {"type": "sqlite", "path": os.path.join(tmp, "txgate.db")}), open(os.path.join(tmp, "sqlite.json"), "w"))
json.dump(config(rport, {"type": "redis", "url": "redis://127.0.0.1:%s/0" % redis, "keyPrefix": "bench:"}),
          open(os.path.join(tmp, "redis.json"), "w"))
EOF

export TXGATE_SIGNING_KEY="bench-$(python3 -c 'import secrets; print(secrets.token_hex(32))')"
"${PIN_SERVICE[@]}" redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP" >"$TMP/redis.log" 2>&1 & REDIS_PID=$!; PIDS+=($!)
wait_port "$REDIS_PORT" "$REDIS_PID" redis-server
if [ "$BACKEND_KIND" = nginx ]; then
  chmod 755 "$TMP"   # nginx's workers drop to an unprivileged user when started as root
  BACKEND=$BANK_PORT   # start_nginx_server's upstream block (this server proxies nothing)
  start_nginx_server bank 4 "$BANK_PORT" \
    "default_type application/json; return 201 '{\"status\":\"executed\"}';" "${BENCH_SERVICE_CORES:-}"
  BANK_PID=$STARTED
else
  "${PIN_SERVICE[@]}" "$BANK" --listen "127.0.0.1:$BANK_PORT" >"$TMP/bank.log" 2>&1 & BANK_PID=$!; PIDS+=($!)
  wait_port "$BANK_PORT" "$BANK_PID" demo-bank
fi
# The backend's CPU ticks so far: its process and, for nginx, its workers.
backend_ticks() { cpu_ticks "$BANK_PID" $(pgrep -P "$BANK_PID"); }
"${PIN_GATEWAY[@]}" "${GATEWAY[@]}" serve --config "$TMP/sqlite.json" >"$TMP/sqlite.log" 2>&1 & SQLITE_PID=$!; PIDS+=($!)
"${PIN_GATEWAY[@]}" "${GATEWAY[@]}" serve --config "$TMP/redis.json" >"$TMP/redis-gw.log" 2>&1 & REDIS_GW_PID=$!; PIDS+=($!)
wait_port "$SQLITE_PORT" "$SQLITE_PID" "txgate (sqlite)"
wait_port "$RPORT" "$REDIS_GW_PID" "txgate (redis)"

DRIVER="$ROOT/bench/stepup.py"
log "logging in $TOTAL_USERS users on each gateway (not measured)"
for r in $(seq 0 $((ROUNDS - 1))); do
  range="bench$((r * USERS))-$(((r + 1) * USERS - 1))"
  "${PIN_CLIENT[@]}" python3 "$DRIVER" login --port "$SQLITE_PORT" --users "$range" --password "$PASSWORD" >"$TMP/tokens-sqlite-$r.json"
  "${PIN_CLIENT[@]}" python3 "$DRIVER" login --port "$RPORT" --users "$range" --password "$PASSWORD" >"$TMP/tokens-redis-$r.json"
done

# User time only (clock ticks) a process has used so far (cpu_ticks, bench/lib.sh: user + system).
user_ticks() { awk '{ sub(/^.*\) /, ""); print $12 }' "/proc/$1/stat"; }
# CPU ticks of the SQLite store's threads: its own (named "txgate.store"), where every SQLite call
# runs, and the libdispatch threads (named "...qos..."), where its checkpoints run (and, in builds
# before the store had a thread of its own, every call); the event loops are threads of their own.
# (cpu_ticks reads /proc/PID/task/TID/stat as it reads a process's.)
store_ticks() {
  local t tasks=()
  for t in /proc/"$1"/task/*; do
    grep -qE 'qos|txgate\.store' "$t/comm" 2>/dev/null && tasks+=("$1/task/${t##*/}")
  done
  cpu_ticks "${tasks[@]}"
}

# Context switches of all a process's threads so far (voluntary: it waited, for a socket, the
# store's queue or a lock; involuntary: it was preempted): the wake-ups each cycle costs.
ctx_switches() {
  cat /proc/"$1"/task/*/status 2>/dev/null | awk '/^(non)?voluntary_ctxt_switches:/ { s += $2 } END { print s + 0 }'
}
# redis-server's commands and socket reads (one read takes every command that arrived
# together: a round trip, however many commands were pipelined in it) so far. A counter, not
# the measurement: one that cannot be read says so and counts nothing.
redis_counts() {
  local stats counts
  if stats=$(redis_inline "$REDIS_PORT" INFO stats) \
     && counts=$(printf '%s\n' "$stats" | tr -d '\r' | awk -F: '$1 == "total_commands_processed" { c = $2 } $1 == "total_reads_processed" { r = $2 } END { if (c != "" && r != "") print c, r }') \
     && [ -n "$counts" ]; then
    echo "$counts"
  else
    echo "stepup.sh: redis-server's counts: unreadable" >&2
    echo "0 0"
  fi
}

measure() {  # store round
  local port=$SQLITE_PORT gw=$SQLITE_PID
  [ "$1" = redis ] && port=$RPORT && gw=$REDIS_GW_PID
  local gw0 gu0 gd0 rd0 bk0 t0
  if [ "$CALLGRIND" = 1 ]; then
    callgrind_control -z "$gw" >/dev/null 2>&1
    callgrind_control -i on "$gw" >/dev/null 2>&1
  fi
  gw0=$(cpu_ticks "$gw"); gu0=$(user_ticks "$gw"); gd0=$(store_ticks "$gw"); rd0=$(cpu_ticks "$REDIS_PID"); bk0=$(backend_ticks); t0=$(date +%s.%N)
  cs0=$(ctx_switches "$gw"); rc0=$(redis_counts)
  "${PIN_CLIENT[@]}" python3 "$DRIVER" run --port "$port" --tokens "$TMP/tokens-$1-$2.json" --secret "$SECRET" \
    --seconds "$DURATION" --concurrency "$CONCURRENCY" --procs "$PROCS" >"$TMP/result-$1-$2.json" \
    || die "$1 round $(($2 + 1)): $(cat "$TMP/result-$1-$2.json")"
  local ir=0
  if [ "$CALLGRIND" = 1 ]; then
    callgrind_control -i off "$gw" >/dev/null 2>&1
    callgrind_control -d "$1-$2" "$gw" >/dev/null 2>&1
    sleep 1
    # The newest dump is this measurement's (each dump holds what was counted since the last).
    ir="$(awk '/^totals:/ { s += $2 } END { print s + 0 }' "$(ls -t "$TMP/callgrind.out.$gw".* | head -1)")"
  fi
  # The gateway's (and redis-server's, the backend's) share of a core during the run. The window
  # includes the client's start-up (a few ms), so these are slight underestimates.
  python3 - "$TMP/result-$1-$2.json" "$gw0" "$(cpu_ticks "$gw")" "$rd0" "$(cpu_ticks "$REDIS_PID")" \
    "$bk0" "$(backend_ticks)" "$t0" "$(date +%s.%N)" "$(getconf CLK_TCK)" "$ir" "$gu0" "$(user_ticks "$gw")" "$gd0" "$(store_ticks "$gw")" \
    "$cs0" "$(ctx_switches "$gw")" "$rc0" "$(redis_counts)" <<'PY'
import json, sys
path, g0, g1, r0, r1, b0, b1, t0, t1, hz, ir, u0, u1, d0, d1, cs0, cs1, rc0, rc1 = sys.argv[1:]
d = json.load(open(path))
if int(ir):
    d["instructions_per_cycle"] = int(ir) // max(1, d["cycles"])
wall = float(t1) - float(t0)
d["gateway_cpu"] = round((int(g1) - int(g0)) / int(hz) / wall, 2)
d["redis_cpu"] = round((int(r1) - int(r0)) / int(hz) / wall, 2)
d["bank_cpu"] = round((int(b1) - int(b0)) / int(hz) / wall, 2)
d["gateway_cpu_ms_per_cycle"] = round((int(g1) - int(g0)) / int(hz) * 1000 / max(1, d["cycles"]), 3)
d["gateway_user_ms_per_cycle"] = round((int(u1) - int(u0)) / int(hz) * 1000 / max(1, d["cycles"]), 3)
# Threads come and go: a dispatch thread that ended during the run takes its ticks with it.
d["store_thread_ms_per_cycle"] = round(max(0, int(d1) - int(d0)) / int(hz) * 1000 / max(1, d["cycles"]), 3)
d["redis_ms_per_cycle"] = round((int(r1) - int(r0)) / int(hz) * 1000 / max(1, d["cycles"]), 3)
d["gateway_context_switches_per_cycle"] = round((int(cs1) - int(cs0)) / max(1, d["cycles"]), 2)
(c0, n0), (c1, n1) = (map(int, x.split()) for x in (rc0, rc1))
d["redis_commands_per_cycle"] = round((c1 - c0) / max(1, d["cycles"]), 2)
d["redis_reads_per_cycle"] = round((n1 - n0) / max(1, d["cycles"]), 2)
json.dump(d, open(path, "w"))
PY
  log "$1 round $(($2 + 1)): $(cat "$TMP/result-$1-$2.json")"
}

log "measuring: $ROUNDS rounds x ${DURATION}s per store, $CONCURRENCY client connections in $PROCS processes, $WORKERS gateway worker(s) each"
for r in $(seq 0 $((ROUNDS - 1))); do
  if [ $((r % 2)) = 0 ]; then measure sqlite "$r"; measure redis "$r"; else measure redis "$r"; measure sqlite "$r"; fi
done

python3 - "$TMP" "$ROUNDS" "$DURATION" "$CONCURRENCY" "$PROCS" "$WORKERS" "$BACKEND_KIND" <<'EOF'
import json, os, statistics, sys
tmp, rounds, duration, conc, procs, workers, backend = sys.argv[1], int(sys.argv[2]), *sys.argv[3:]
res = {s: [json.load(open(os.path.join(tmp, "result-%s-%d.json" % (s, r)))) for r in range(rounds)] for s in ("sqlite", "redis")}
def med(s, k): return statistics.median(x[k] for x in res[s])
print()
print("step-up cycles (challenge, composite_advice start, TOTP submit, retry consumed); median of %d rounds of %s s, "
      "%s client connections in %s processes, %s gateway worker(s), backend %s" % (rounds, duration, conc, procs, workers, backend))
print()
print("| store | cycles/s | p50 ms | p90 ms | p99 ms | gateway CPU | ms CPU/cycle (user) | of which the store's thread | redis-server CPU (ms/cycle) | backend CPU | client CPU | per round (cycles/s) |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
for s in ("sqlite", "redis"):
    print("| %s | %.1f | %.2f | %.2f | %.2f | %.2f | %.3f (%.3f) | %.3f | %.2f (%.3f) | %.2f | %.2f | %s |" % (
        s, med(s, "cycles_per_s"), med(s, "p50_ms"), med(s, "p90_ms"), med(s, "p99_ms"), med(s, "gateway_cpu"),
        med(s, "gateway_cpu_ms_per_cycle"), med(s, "gateway_user_ms_per_cycle"), med(s, "store_thread_ms_per_cycle"),
        med(s, "redis_cpu"), med(s, "redis_ms_per_cycle"), med(s, "bank_cpu"), med(s, "client_cpu"),
        ", ".join(str(x["cycles_per_s"]) for x in res[s])))
print("(CPU: cores busy on average during the run, medians; ms CPU/cycle: the gateway's; the store's thread: the")
print("SQLite store's own thread and the libdispatch threads of its checkpoints; the machine has %d cores)" % os.cpu_count())
print()
print("per cycle (medians): gateway context switches, sqlite %.2f, redis %.2f; redis-server commands %.2f, "
      "in %.2f socket reads (round trips)" % (
    med("sqlite", "gateway_context_switches_per_cycle"), med("redis", "gateway_context_switches_per_cycle"),
    med("redis", "redis_commands_per_cycle"), med("redis", "redis_reads_per_cycle")))
print()
print("redis/sqlite: throughput %.2fx, p50 %.2fx, p99 %.2fx, gateway CPU per cycle %.2fx" % (
    med("redis", "cycles_per_s") / med("sqlite", "cycles_per_s"), med("redis", "p50_ms") / med("sqlite", "p50_ms"),
    med("redis", "p99_ms") / med("sqlite", "p99_ms"),
    med("redis", "gateway_cpu_ms_per_cycle") / med("sqlite", "gateway_cpu_ms_per_cycle")))
if all("instructions_per_cycle" in x for s in res for x in res[s]):
    print()
    print("callgrind, user-space instructions per cycle (median): sqlite %d, redis %d" % (
        med("sqlite", "instructions_per_cycle"), med("redis", "instructions_per_cycle")))
short = [s for s in res for x in res[s] if x["threads_out_of_codes"]]
if short:
    print("NOTE: some client connections ran out of TOTP codes (%s), so fewer ran to the end: raise BENCH_USERS"
          % ", ".join(sorted(set(short))))
EOF
