#!/usr/bin/env bash
# Heap objects that more than one worker thread retains, per step-up cycle: each such retain
# (and its release) is an atomic write to a cache line every core then fetches back, a cost
# that grows with the workers and that the 2-core VM hardly shows. Runs `bench/stepup.sh` with
# 2 workers per gateway and, during the Redis round, counts every `swift_retain`,
# `swift_retain_n` and `swift_bridgeObjectRetain` of the Redis gateway with uprobes (`perf
# probe` on libswiftCore.so, the object in %di, a call chain each) and the cycles (a uprobe on
# `TransactionRecord.approved`, once a cycle), then prints the retains per cycle of objects on
# the heap that both workers retained, and the places that retain them most.
#
#   bash bench/shared-retains.sh [TXGATE_BIN]
#
# BENCH_KEEP_TMP=1 keeps the recording and its text. Needs root (uprobes) and perf. The uprobes slow the gateway down a hundredfold; the figures
# are counts per cycle, which do not depend on that. Objects in the binary's or the runtime's
# own mappings (static metadata, the empty collections) are immortal: retaining them writes
# nothing, and they are left out. Not part of `make test`.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${1:-$ROOT/.build/release/txgate}"
[ -x "$BIN" ] || { echo "shared-retains.sh: $BIN is not an executable (swift build -c release first)" >&2; exit 2; }
for tool in perf python3 redis-server; do
  command -v "$tool" >/dev/null 2>&1 || { echo "shared-retains.sh: '$tool' not found" >&2; exit 2; }
done
LIB="$(ldd "$BIN" | awk '/libswiftCore.so/ { print $3 }')"
[ -n "$LIB" ] || { echo "shared-retains.sh: $BIN does not load libswiftCore.so" >&2; exit 2; }
TMP="$(mktemp -d "${TMPDIR:-/tmp}/txgate-retains.XXXXXX")"
STEPUP=""
PERF=""
cleanup() {
  [ -n "$PERF" ] && kill -INT "$PERF" 2>/dev/null && wait "$PERF" 2>/dev/null
  [ -n "$STEPUP" ] && kill "$STEPUP" 2>/dev/null && wait "$STEPUP" 2>/dev/null
  perf probe -q -d 'probe_libswiftCore:*' 2>/dev/null || true
  perf probe -q -d 'probe_txgate:*' 2>/dev/null || true
  [ "${BENCH_KEEP_TMP:-0}" = 1 ] && echo "kept $TMP" >&2 || rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

perf probe -q -d 'probe_libswiftCore:*' 2>/dev/null || true
perf probe -q -d 'probe_txgate:*' 2>/dev/null || true
# Cycles are counted where each one approves its transaction, once (`TransactionRecord.approved`).
APPROVED="$(nm "$BIN" | awk '/TransactionRecordV8approved2by7passkey/ && $2 == "T" { s = $3 } END { print s }')"
[ -n "$APPROVED" ] || { echo "shared-retains.sh: no TransactionRecord.approved symbol in $BIN" >&2; exit 2; }
perf probe -q -x "$BIN" "txgate_cycle=$APPROVED" >/dev/null
for f in swift_retain swift_retain_n swift_bridgeObjectRetain; do
  perf probe -q -x "$LIB" "$f obj=%di:u64" >/dev/null
done

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
perf record -q -e 'probe_libswiftCore:*' -e probe_txgate:txgate_cycle -g -p "$GW" -o "$TMP/perf.data" >/dev/null 2>&1 &
PERF=$!
while pgrep -f 'stepup.py run .*tokens-redis' >/dev/null; do sleep 0.1; done
kill -INT "$PERF"; wait "$PERF" 2>/dev/null || true
PERF=""
wait "$STEPUP" || { cat "$TMP/stepup.out" >&2; exit 1; }
STEPUP=""
rm -rf "$(sed -n 's/^\[stepup\] kept //p' "$TMP/stepup.out")"
perf script -i "$TMP/perf.data" -F tid,event,trace,ip,sym 2>/dev/null >"$TMP/retains.txt"

python3 - "$TMP/retains.txt" "$TMP/maps" <<'PY'
import collections, re, subprocess, sys
events, maps = sys.argv[1:]
# File-backed mappings hold immortal objects (static metadata, empty singletons): not counted.
files = []
for line in open(maps):
    p = line.split()
    if len(p) >= 6 and p[5].startswith("/"):
        a, b = (int(x, 16) for x in p[0].split("-"))
        files.append((a, b))
def heap(o):
    return 4096 < o < (1 << 47) and not any(a <= o < b for a, b in files)
count = collections.Counter(); threads = collections.defaultdict(set); sites = collections.defaultdict(collections.Counter)
total = cycles = 0
obj = tid = None; frames = []
def flush():
    global total
    if obj is None: return
    total += 1
    if heap(obj):
        caller = next((f for f in frames if not f.startswith("swift_") and "ValueWitnesses" not in f and "RefCounts" not in f), "?")
        count[obj] += 1; threads[obj].add(tid); sites[obj][caller] += 1
for line in open(events):
    if "txgate_cycle" in line:
        flush(); obj = None; cycles += 1
    elif "obj=" in line:
        flush(); frames = []
        tid = line.split()[0]; obj = int(line.split("obj=")[1].split()[0])
    elif line.strip():
        p = line.strip().split(None, 1)
        if len(p) == 2: frames.append(re.sub(r"\+0x[0-9a-f]+", "", p[1]))
flush()
if cycles == 0: sys.exit("shared-retains.sh: no cycle was recorded")
shared = [o for o in count if len(threads[o]) > 1]
by_site = collections.Counter()
for o in shared:
    by_site.update(sites[o])
n = sum(count[o] for o in shared)
print(f"cycles {cycles}; retains {total / cycles:.0f} per cycle, of heap objects both workers retained {n / cycles:.1f} per cycle ({len(shared)} objects)")
names = subprocess.run(["swift", "demangle", "--simplified"], input="\n".join(s for s, _ in by_site.most_common(15)),
                       capture_output=True, text=True).stdout.splitlines()
for (site, c), name in zip(by_site.most_common(15), names):
    print(f"{c / cycles:6.1f}  {name[:150]}")
PY
