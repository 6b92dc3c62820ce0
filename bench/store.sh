#!/usr/bin/env bash
# The stores' ceilings: how many step-up cycles a second one SQLite file and one redis-server
# take, and their CPU per cycle. SQLite with group commit (operations queued together share one
# commit, the default) and without (`--max-batch 1`: one commit per operation), in alternating
# rounds of one run; then Redis (a redis-server started here, no persistence), with
# redis-server's own CPU per cycle.
#
#   bash bench/store.sh [--rounds N] [--seconds S] [--workers W] [--concurrency "1 8 64"]
#
# `bench/store-bench` (built here, release, on the gateway's allocator) makes the store calls of
# the gateway's step-up cycle (6 calls, 4 of them writes) as fast as the store answers, with
# `--workers` event loops standing for the gateway's and each `--concurrency` value of cycles in
# flight. The SQLite store runs every SQLite call on one thread and redis-server runs on one:
# the cycles a second each takes are the most any number of gateway workers sharing it can do
# (bench/stepup.sh measures the whole gateway). Each round uses a fresh file or key prefix; the
# temp dir and redis-server are removed on exit. Figures: medians of the rounds.
#
# Environment: STORE_BENCH_BIN (this store-bench instead of building one: no Swift toolchain
# needed), STORE_CORES and REDIS_CORES (taskset core lists for store-bench and redis-server:
# bench/device-run.sh's store section).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

ROUNDS=3 SECONDS_PER=3 WORKERS=4 LEVELS="1 8 64"
command -v redis-server >/dev/null || { echo "store.sh: redis-server not found; run: bash scripts/install-deps.sh --bench" >&2; exit 1; }
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS="${2:?--rounds needs a number}"; shift ;;
    --seconds) SECONDS_PER="${2:?--seconds needs a number}"; shift ;;
    --workers) WORKERS="${2:?--workers needs a number}"; shift ;;
    --concurrency) LEVELS="${2:?--concurrency needs a list}"; shift ;;
    -h|--help) . "$ROOT/bench/lib.sh"; header_help "$0"; exit 0 ;;
    *) echo "store.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
for v in $ROUNDS $WORKERS $LEVELS; do
  [[ "$v" =~ ^[0-9]+$ ]] && [ "$v" -ge 1 ] || { echo "store.sh: '$v' is not a positive integer" >&2; exit 2; }
done
[[ "$SECONDS_PER" =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "store.sh: --seconds '$SECONDS_PER' is not a number" >&2; exit 2; }

if [ -n "${STORE_BENCH_BIN:-}" ]; then
  BENCH="$STORE_BENCH_BIN"
else
  echo "[store] building (release)" >&2
  swift build -c release --static-swift-stdlib --product store-bench >/dev/null
  BENCH="$(swift build -c release --show-bin-path)/store-bench"
fi
PIN_BENCH=(); [ -z "${STORE_CORES:-}" ] || PIN_BENCH=(taskset -c "$STORE_CORES")
PIN_REDIS=(); [ -z "${REDIS_CORES:-}" ] || PIN_REDIS=(taskset -c "$REDIS_CORES")
TMP="$(mktemp -d "${TMPDIR:-/tmp}/txgate-store.XXXXXX")"
REDIS_PID=""
trap '[ -n "$REDIS_PID" ] && kill "$REDIS_PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$TMP"' EXIT
BENCH_NAME=store.sh
. "$ROOT/bench/lib.sh"
REDIS_PORT=$(free_port)
"${PIN_REDIS[@]}" redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP" >"$TMP/redis.log" 2>&1 & REDIS_PID=$!
wait_port "$REDIS_PORT" "$REDIS_PID" redis-server

for r in $(seq 1 "$ROUNDS"); do
  # Alternate which goes first, so that neither always runs on a warmer (or busier) machine.
  order="64 1"; [ $((r % 2)) = 0 ] && order="1 64"
  for c in $LEVELS; do
    for b in $order; do
      rm -f "$TMP"/s.db*
      "${PIN_BENCH[@]}" "$BENCH" --path "$TMP/s.db" --seconds "$SECONDS_PER" --workers "$WORKERS" --concurrency "$c" --max-batch "$b" \
        | tee -a "$TMP/results.jsonl" | sed 's/^/[store] /' >&2
    done
    # Redis: redis-server's CPU over the whole run (its start-up and the connections' fencing
    # included, a few ms), per cycle.
    r0=$(cpu_ticks "$REDIS_PID"); t0=$(date +%s.%N)
    out=$("${PIN_BENCH[@]}" "$BENCH" --redis "127.0.0.1:$REDIS_PORT" --seconds "$SECONDS_PER" --workers "$WORKERS" --concurrency "$c" 2>/dev/null)
    r1=$(cpu_ticks "$REDIS_PID"); t1=$(date +%s.%N)
    python3 -c 'import json, sys; d = json.loads(sys.argv[1]); hz = int(sys.argv[4]); t = (int(sys.argv[3]) - int(sys.argv[2])) / hz
d["redis_ms_per_cycle"] = round(t * 1000 / max(1, d["cycles"]), 4); d["redis_cores"] = round(t / (float(sys.argv[6]) - float(sys.argv[5])), 2)
print(json.dumps(d))' "$out" "$r0" "$r1" "$(getconf CLK_TCK)" "$t0" "$t1" | tee -a "$TMP/results.jsonl" | sed 's/^/[store] /' >&2
    redis_inline "$REDIS_PORT" FLUSHALL >/dev/null
  done
done

python3 - "$TMP/results.jsonl" "$ROUNDS" "$SECONDS_PER" "$WORKERS" <<'PY'
import json, statistics, sys
path, rounds, seconds, workers = sys.argv[1:]
every = [json.loads(line) for line in open(path)]
rows = [x for x in every if x["store"] == "sqlite"]
redis = [x for x in every if x["store"] == "redis"]
def med(c, b, k): return statistics.median(float(x[k]) for x in rows if x["concurrency"] == c and x["max_batch"] == b)
def rmed(c, k): return statistics.median(float(x[k]) for x in redis if x["concurrency"] == c)
levels = sorted({x["concurrency"] for x in rows})
batched = max(x["max_batch"] for x in rows)
print()
print("SQLite store, step-up cycle's calls; %s workers, median of %s rounds of %s s" % (workers, rounds, seconds))
print()
print("| cycles in flight | cycles/s, one commit per call | cycles/s, group commit | ratio | CPU ms/cycle, one commit per call | CPU ms/cycle, group commit | ratio | store's thread ms/cycle, group commit |")
print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for c in levels:
    a, b = med(c, 1, "cycles_per_s"), med(c, batched, "cycles_per_s")
    ca, cb = med(c, 1, "cpu_ms_per_cycle"), med(c, batched, "cpu_ms_per_cycle")
    print("| %d | %.0f | %.0f | %.2f | %.3f | %.3f | %.2f | %.3f |" % (c, a, b, b / a, ca, cb, cb / ca, med(c, batched, "store_thread_ms_per_cycle")))
print()
print("The store's thread runs every SQLite call: its ms a cycle, at the most cycles in flight, bound how many")
print("cycles a second the file takes (1 / that), however many workers share it.")
print()
print("Redis store, the same calls (fenced as the gateway's), one redis-server")
print()
print("| cycles in flight | cycles/s | client CPU ms/cycle | redis-server CPU ms/cycle | redis-server cores busy |")
print("| ---: | ---: | ---: | ---: | ---: |")
for c in levels:
    print("| %d | %.0f | %.3f | %.3f | %.2f |" % (c, rmed(c, "cycles_per_s"), rmed(c, "cpu_ms_per_cycle"), rmed(c, "redis_ms_per_cycle"), rmed(c, "redis_cores")))
PY
