#!/usr/bin/env bash
# Retains per request or per step-up cycle, and those of heap objects that more than one worker
# thread retains: each such retain (and its release) is an atomic write to a cache line every
# core then fetches back, a cost that grows with the workers and that the 2-core VM hardly
# shows. Every retain is an atomic instruction too (about 20 cycles, where callgrind counts
# one). Counts every `swift_retain`, `swift_retain_n` and `swift_bridgeObjectRetain` of a
# gateway with 2 workers, with uprobes (`perf probe` on the runtime: libswiftCore.so, or the binary
# itself when it is linked with --static-swift-stdlib; the object in %di, a
# call chain each), and the units of work with a uprobe on the binary, then prints the retains
# per unit, those of objects on the heap that two threads retained (each at least once per 100), and the places that
# retain those most.
#
#   bash bench/shared-retains.sh [--allow | --plain] [TXGATE_BIN]
#
#   (default)  the step-up cycle: `bench/stepup.sh`'s Redis round (2 workers), per cycle (a
#              uprobe on `TransactionRecord.approved`, once a cycle)
#   --allow    the allow path (callgrind.sh's: a user, a SQLite store, a policy for
#              authenticated users; wrk `-t2 -c8` with one session token), per request (a
#              uprobe on `ProxyPhase.handle`)
#   --plain    the plain proxy, per request
#
# --allow and --plain also print the places that retain heap objects most, shared or not.
# BENCH_KEEP_TMP=1 keeps the recording and its text. Needs root (uprobes), perf, and for
# --allow/--plain nginx and wrk. The uprobes slow the gateway down a hundredfold; the figures
# are counts per unit, which do not depend on that. Objects in the binary's or the runtime's
# own mappings (static metadata, the empty collections) are immortal: retaining them writes
# nothing, and they are left out. Not part of `make test`.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH_NAME=shared-retains.sh
. "$ROOT/bench/lib.sh"
MODE=stepup
case "${1:-}" in
  --allow) MODE=allow; shift ;;
  --plain) MODE=plain; shift ;;
  -h|--help) header_help "$0"; exit 0 ;;
esac
BIN="${1:-$ROOT/.build/release/txgate}"
[ -x "$BIN" ] || { echo "shared-retains.sh: $BIN is not an executable (swift build -c release --static-swift-stdlib first)" >&2; exit 2; }
TOOLS=(perf python3 redis-server)
[ "$MODE" = stepup ] || TOOLS=(perf python3 nginx wrk)
for tool in "${TOOLS[@]}"; do
  command -v "$tool" >/dev/null 2>&1 || PATH="$PATH:/usr/sbin:/sbin"
  command -v "$tool" >/dev/null 2>&1 || { echo "shared-retains.sh: '$tool' not found" >&2; exit 2; }
done
# The runtime's retains: in libswiftCore.so, or in the binary (--static-swift-stdlib).
LIB="$(ldd "$BIN" 2>/dev/null | awk '/libswiftCore.so/ { print $3 }' || true)"
[ -n "$LIB" ] || LIB="$BIN"
{ nm "$LIB"; nm -D "$LIB"; } 2>/dev/null | awk '$3 == "swift_retain" { f = 1 } END { exit !f }' \
  || { echo "shared-retains.sh: no swift_retain in $LIB" >&2; exit 2; }
TMP="$(mktemp -d "${TMPDIR:-/tmp}/txgate-retains.XXXXXX")"
STEPUP=""
PERF=""
PIDS=()
cleanup() {
  [ -n "$PERF" ] && kill -INT "$PERF" 2>/dev/null && wait "$PERF" 2>/dev/null
  [ -n "$STEPUP" ] && kill "$STEPUP" 2>/dev/null && wait "$STEPUP" 2>/dev/null
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  perf probe -q -d 'txgate_rt:*' 2>/dev/null || true
  perf probe -q -d 'txgate_unit:*' 2>/dev/null || true
  [ "${BENCH_KEEP_TMP:-0}" = 1 ] && echo "kept $TMP" >&2 || rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

perf probe -q -d 'txgate_rt:*' 2>/dev/null || true
perf probe -q -d 'txgate_unit:*' 2>/dev/null || true
if [ "$MODE" = stepup ]; then
  # Cycles are counted where each one approves its transaction, once (`TransactionRecord.approved`).
  UNIT="$(nm "$BIN" | awk '/TransactionRecordV8approved2by7passkey/ && $2 == "T" { s = $3 } END { print s }')"
  UNITS=cycle
else
  # Requests are counted where each is proxied, once (`ProxyPhase.handle`).
  UNIT="$(nm "$BIN" | awk '/ProxyPhaseV6handleyAA0D6StatusOAA14RequestContextCF$/ { s = $3 } END { print s }')"
  UNITS=request
fi
[ -n "$UNIT" ] || { echo "shared-retains.sh: no symbol to count each $UNITS by in $BIN" >&2; exit 2; }
perf probe -q -x "$BIN" "txgate_unit:txgate_cycle=$UNIT" >/dev/null
for f in swift_retain swift_retain_n swift_bridgeObjectRetain; do
  perf probe -q -x "$LIB" "txgate_rt:$f=$f obj=%di:u64" >/dev/null
done

if [ "$MODE" = stepup ]; then
  BENCH_WORKERS=2 BENCH_DURATION=10 BENCH_USERS=4000 BENCH_KEEP_TMP=1 TXGATE_BIN="$BIN" \
    bash "$ROOT/bench/stepup.sh" --rounds 1 >"$TMP/stepup.out" 2>&1 &
  STEPUP=$!
  # The Redis round starts once its driver runs.
  for _ in $(seq 1 1200); do
    pgrep -f 'stepup.py run .*tokens-redis' >/dev/null && break
    kill -0 "$STEPUP" 2>/dev/null || { cat "$TMP/stepup.out" >&2; exit 1; }
    sleep 0.1
  done
  GW="$(pgrep -f ' serve --config .*/redis.json' | head -1)"
  [ -n "$GW" ] || { echo "shared-retains.sh: no Redis gateway running" >&2; exit 1; }
  cp "/proc/$GW/maps" "$TMP/maps"
  perf record -q -e 'txgate_rt:*' -e txgate_unit:txgate_cycle -g -p "$GW" -o "$TMP/perf.data" >/dev/null 2>&1 &
  PERF=$!
  while pgrep -f 'stepup.py run .*tokens-redis' >/dev/null; do sleep 0.1; done
  kill -INT "$PERF"; wait "$PERF" 2>/dev/null || true
  PERF=""
  wait "$STEPUP" || { cat "$TMP/stepup.out" >&2; exit 1; }
  STEPUP=""
  rm -rf "$(sed -n 's/^\[stepup\] kept //p' "$TMP/stepup.out")"
else
  B="$(free_port)"
  mkdir -p "$TMP/backend"
  cat >"$TMP/backend/nginx.conf" <<EOF
worker_processes 1;
master_process off;
daemon off;
pid $TMP/backend/nginx.pid;
error_log $TMP/backend/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $TMP/backend/cbt; proxy_temp_path $TMP/backend/pt; fastcgi_temp_path $TMP/backend/ft;
    uwsgi_temp_path $TMP/backend/ut; scgi_temp_path $TMP/backend/st;
    keepalive_requests 1000000;
    server { listen 127.0.0.1:$B; location / { default_type text/plain; return 200 "hello from backend\n"; } }
}
EOF
  nginx -p "$TMP/backend" -c "$TMP/backend/nginx.conf" -e "$TMP/backend/error.log" </dev/null >/dev/null 2>&1 &
  PIDS+=($!)
  wait_port "$B" "$!" "nginx (backend)"
  # The bench user's password hash (scrypt at a low cost: logging in is not what is measured).
  HASH="$(bench_password_hash)"
  T="$(free_port)"
  python3 - "$T" "$B" "$TMP" "$MODE" "$HASH" >"$TMP/gateway.json" <<'PY'
import json, sys
port, backend, tmp, mode, hash_ = sys.argv[1:6]
c = {"listen": f"127.0.0.1:{port}", "workers": 2, "upstream": {"url": f"http://127.0.0.1:{backend}", "keepAlive": 64},
     "log": {"level": "warning", "access": False}, "limits": {"maxConnectionsPerClient": 0}}
if mode == "allow":
    c.update({"users": [{"username": "bench", "passwordHash": hash_}], "journeys": {"Login": [{"type": "UsernamePassword"}]},
              "store": {"path": f"{tmp}/txgate.db"}, "secrets": {"signingKeyFile": f"{tmp}/signing.key"},
              "policies": [{"name": "everything", "resources": ["/**"], "actions": ["GET"], "subjects": "authenticated"}]})
print(json.dumps(c))
PY
  "$BIN" serve --config "$TMP/gateway.json" </dev/null >"$TMP/gateway.log" 2>&1 &
  GW=$!
  PIDS+=("$GW")
  wait_port "$T" "$GW" txgate
  WRK_ARGS=(-t2 -c8)
  [ "$MODE" = allow ] && WRK_ARGS+=(-H "iPlanetDirectoryPro: $(python3 "$ROOT/bench/login.py" "$T" bench bench-password)")
  # Both workers warm (their upstream connections open, the session and the decision cached),
  # then 6 s recorded in the middle of a 10 s run.
  wrk "${WRK_ARGS[@]}" -d2s "http://127.0.0.1:$T/" >"$TMP/warmup.txt" 2>&1
  cp "/proc/$GW/maps" "$TMP/maps"
  wrk "${WRK_ARGS[@]}" -d10s "http://127.0.0.1:$T/" >"$TMP/wrk.txt" 2>&1 &
  WRK=$!
  sleep 2
  perf record -q -e 'txgate_rt:*' -e txgate_unit:txgate_cycle -g -p "$GW" -o "$TMP/perf.data" >/dev/null 2>&1 &
  PERF=$!
  sleep 6
  kill -INT "$PERF"; wait "$PERF" 2>/dev/null || true
  PERF=""
  wait "$WRK"
  if grep -q 'Non-2xx' "$TMP/wrk.txt"; then echo "shared-retains.sh: the gateway answered non-2xx:" >&2; cat "$TMP/wrk.txt" >&2; exit 1; fi
fi
perf script -i "$TMP/perf.data" -F tid,event,trace,ip,sym 2>/dev/null >"$TMP/retains.txt"

python3 - "$TMP/retains.txt" "$TMP/maps" "$UNITS" <<'PY'
import collections, re, subprocess, sys
events, maps, unit = sys.argv[1:]
# File-backed mappings hold immortal objects (static metadata, empty singletons): not counted.
files = []
for line in open(maps):
    p = line.split()
    if len(p) >= 6 and p[5].startswith("/"):
        a, b = (int(x, 16) for x in p[0].split("-"))
        files.append((a, b))
def heap(o):
    return 4096 < o < (1 << 47) and not any(a <= o < b for a, b in files)
count = collections.Counter(); threads = collections.defaultdict(collections.Counter); sites = collections.defaultdict(collections.Counter)
chains = collections.Counter()
total = units = 0
obj = tid = None; frames = []
def flush():
    global total
    if obj is None: return
    total += 1
    if not heap(obj): return
    callers = [f for f in frames if not f.startswith("swift_") and "ValueWitnesses" not in f and "RefCounts" not in f]
    chains[" <- ".join(callers[:3]) or "?"] += 1
    count[obj] += 1; threads[obj][tid] += 1; sites[obj][callers[0] if callers else "?"] += 1
for line in open(events):
    if "txgate_cycle" in line:
        flush(); obj = None; units += 1
    elif "obj=" in line:
        flush(); frames = []
        tid = line.split()[0]; obj = int(line.split("obj=")[1].split()[0])
    elif line.strip():
        p = line.strip().split(None, 1)
        if len(p) == 2: frames.append(re.sub(r"\+0x[0-9a-f]+", "", p[1]))
flush()
if units == 0: sys.exit(f"shared-retains.sh: no {unit} was recorded")
# Shared: retained by two threads or more, each at least once per 100 units. An object one
# worker retains on every request and another thread only now and then (a worker's loop, which
# a store callback retains) is not written from two cores at once.
shared = [o for o in count if sum(c * 100 >= units for c in threads[o].values()) > 1]
by_site = collections.Counter()
for o in shared:
    by_site.update(sites[o])
n = sum(count[o] for o in shared)
# Calls on a small string or an immortal object return without writing: counted apart.
print(f"{unit}s {units}; retain calls {total / units:.1f} per {unit}, of heap objects {sum(count.values()) / units:.1f}, "
      f"of heap objects two threads retained {n / units:.1f} ({len(shared)} objects)")
def show(title, counter, limit, width):
    top = [(s, c) for s, c in counter.most_common(limit) if c / units >= 0.05]
    if not top: return
    print(title)
    names = subprocess.run(["swift", "demangle", "--simplified"], input="\n".join(s for s, _ in top),
                           capture_output=True, text=True).stdout.splitlines()
    for (site, c), name in zip(top, names):
        print(f"{c / units:6.1f}  {name[:width]}")
show("shared, by place:", by_site, 15, 150)
if unit == "request":
    show("retains of heap objects, by place (three frames):", chains, 40, 260)
PY
