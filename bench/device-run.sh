#!/usr/bin/env bash
# Issue 29's many-core measurements in one command on a lent 16-core machine, which allows 10
# minutes a command and about 15 minutes of machine time a session. Sections, in the default
# order (DEVICE_SECTIONS picks and orders them):
#   scaling      the step-up cycle at 1 and 4 workers: bench/stepup.sh pinned, the client on 8
#                cores of its own, an nginx backend (devbench's step-up section has 48
#                connections and 6,000 users, too few for 4 workers, and demo-bank, whose one
#                loop was busy 0.85 of a core at 5,800 cycles a second)
#   store        the stores' ceilings (bench/store.sh: 4 loops on cores 0-3, 64 cycles in flight,
#                redis-server on core 12; needs store-bench.xz): what 4 workers sharing a store
#                can reach at most, against the scaling section's 1-worker rate
#   proxy        devbench's proxy table at 1, 2, 4 and 8 workers (DEVICE_WORKERS, DEVICE_ROUNDS)
#   proxy-c32    the same at 1 worker and 32 connections
#   tls-same     TLS keep-alive at 1 and 4 workers, txgate and nginx on one TLS policy, 3
#                alternating rounds (bench/devbench-profile.sh with ROUNDS)
#   proxy-log    1 worker at 256 and at 32 connections with an access log on both sides (nginx
#                buffered, writing txgate's line), 3 alternating rounds (devbench-profile.sh)
#   tail-4       4 workers, 5 alternating rounds of 5 s (devbench-profile.sh): p50, p90, p99, the
#                time each proxy's threads waited for a core (runnable, not running), and, with
#                perf, their context switches, moves between cores and loop turns a request
#   tail-4-pinned  tail-4 with each proxy's workers pinned to a core each (txgate's cpuAffinity
#                "auto", nginx's worker_cpu_affinity auto): whether moves between cores are the tail
#   profile      perf at 8 workers, txgate then nginx (needs perf.tar.xz)
#   profile-tls  perf, TLS keep-alive at 4 workers, one TLS policy
#   profile-2    perf at 2 workers
#   tls          devbench's TLS section at 1 and 4 workers (nginx on its own TLS defaults)
#   stepup       devbench's step-up section at 1 and 4 workers (not in the default: `scaling`
#                measures the same cycle with a client and a backend that keep up)
# Each section has its own time limit and is skipped when it would end past DEVICE_BUDGET
# seconds (default 540; the default sections take about 640, so the last are skipped unless
# DEVICE_BUDGET is raised or DEVICE_SECTIONS names fewer); the results are packed after
# each one into $OUT/results.tgz (one file: the device tool brings back at most 8), and the
# tables are printed at the end. With the device tool: carry .devbench, timeout_s 590.
#
#   bash bench/device-run.sh [DIR]
#
# DIR (default .devbench, git-ignored: carry it to the machine) holds what devbench's
# make-bundle.sh writes there: bundle.tar.xz (txgate, demo-bank, nginx, HAProxy, wrk,
# redis-server and their libraries) and devbench.py. Optional: txgate.xz (another txgate to
# measure instead of the bundle's, e.g. a base build or one with symbols, `xz -k` of it),
# tls.crt, tls.key and tls (one certificate for the TLS sections; without them one is made with
# openssl, if the machine has it), perf.tar.xz (a perf binary and the libraries it loads, for
# the profiles), store-bench.xz (the store section's): bench/device-prepare.sh writes these
# four. OUT: where results go (the device tool sets it; default /tmp/device-out).
#
# Everything listens on 127.0.0.1 (devbench's layout: the proxy on the first cores, wrk on
# 8-11, the backend on 12-15). Compare ratios within one run (txgate against nginx and HAProxy
# measured beside it), not absolute figures across machines.
set -u

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$(cd "${1:-$ROOT/.devbench}" 2>/dev/null && pwd)" || { echo "device-run.sh: no such folder: ${1:-.devbench}" >&2; exit 2; }
OUT="${OUT:-/tmp/device-out}"
SECTIONS="${DEVICE_SECTIONS:-scaling store proxy proxy-c32 tls-same proxy-log tail-4 tail-4-pinned profile profile-tls profile-2 tls}"
BUDGET="${DEVICE_BUDGET:-540}"
for f in bundle.tar.xz devbench.py; do
  [ -f "$DIR/$f" ] || { echo "device-run.sh: $DIR/$f is missing (run devbench's make-bundle.sh from the project root)" >&2; exit 2; }
done
B="$(mktemp -d /tmp/device-bundle.XXXXXX)"
RES="$(mktemp -d /tmp/device-results.XXXXXX)"   # every section's files, packed into $OUT at the end
trap 'rm -rf "$B" "$RES"' EXIT
mkdir -p "$OUT"
tar xJf "$DIR/bundle.tar.xz" -C "$B" || { echo "device-run.sh: $DIR/bundle.tar.xz does not unpack" >&2; exit 1; }
if [ -f "$DIR/txgate.xz" ]; then
  xz -dc "$DIR/txgate.xz" > "$B/bin/txgate" && chmod +x "$B/bin/txgate" || { echo "device-run.sh: $DIR/txgate.xz does not unpack" >&2; exit 1; }
fi
export PYTHONUNBUFFERED=1
BENCH_NAME=device-run.sh
. "$ROOT/bench/lib.sh"   # bench_tls_cert
START=$(date +%s)
echo "machine: $(nproc) cores, $(uname -r); txgate: $(LD_LIBRARY_PATH="$B/lib" "$B/bin/txgate" --version 2>&1 | head -1)" | tee "$RES/machine.txt"

# fits NAME LIMIT_SECONDS: whether a section of that limit ends inside the budget; says so if not.
fits() {
  local left=$(( BUDGET - ($(date +%s) - START) ))
  [ "$2" -le "$left" ] && return 0
  echo "[$1] skipped: its limit is $2 s and $left s of the budget are left"
  return 1
}

# timed NAME LIMIT_SECONDS OUT ERR COMMAND...: COMMAND under its own time limit, unless that
# would pass the budget; its output in OUT, its errors in ERR (empty: in OUT too).
timed() {
  local name="$1" limit="$2" out="$3" err="$4" t0 rc
  shift 4
  fits "$name" "$limit" || return 0
  t0=$(date +%s)
  if [ -n "$err" ]; then timeout -k 5 "$limit" "$@" > "$out" 2> "$err"; else timeout -k 5 "$limit" "$@" > "$out" 2>&1; fi
  rc=$?
  echo "[$name] exit $rc after $(( $(date +%s) - t0 )) s$([ "$rc" = 124 ] && echo ' (stopped at its time limit)')"
}

# section NAME LIMIT_SECONDS DEVBENCH_ARGS...: one devbench run, its JSON lines and tables in
# $RES/NAME.txt, its log in $RES/NAME.err.
section() { local name="$1" limit="$2"; shift 2; timed "$name" "$limit" "$RES/$name.txt" "$RES/$name.err" python3 "$DIR/devbench.py" "$B" "$@"; }

# limited NAME LIMIT_SECONDS COMMAND...: COMMAND, its output in $RES/NAME.log.
limited() { local name="$1" limit="$2"; shift 2; timed "$name" "$limit" "$RES/$name.log" "" "$@"; }

# The certificate of the TLS sections: DIR's, else one made here (TLS_PREFIX.crt, .key, and both in TLS_PREFIX).
TLS_PREFIX=""
tls_cert() {
  [ -n "$TLS_PREFIX" ] && return 0
  if [ -f "$DIR/tls.crt" ] && [ -f "$DIR/tls.key" ] && [ -f "$DIR/tls" ]; then TLS_PREFIX="$DIR/tls"; return 0; fi
  command -v openssl >/dev/null || return 1
  bench_tls_cert "$B/tls.crt" "$B/tls.key" && cat "$B/tls.crt" "$B/tls.key" > "$B/tls" && TLS_PREFIX="$B/tls"
}

# profile NAME WORKERS [VAR=VALUE...]: bench/devbench-profile.sh (txgate, then nginx) with perf from DIR.
P=""
# unpack_perf: P, a folder with perf and its libraries, unpacked from DIR's perf.tar.xz once;
# fails when DIR has none.
unpack_perf() {
  [ -f "$DIR/perf.tar.xz" ] || return 1
  [ -n "$P" ] || { P="$B/perf" && mkdir -p "$P" && tar xJf "$DIR/perf.tar.xz" -C "$P"; }
}
profile() {
  local name="$1" workers="$2"
  shift 2
  unpack_perf || { echo "[$name] skipped: no $DIR/perf.tar.xz"; return; }
  # Two profiles, 8 s of wrk and three reports each.
  limited "$name" 60 env "$@" bash "$ROOT/bench/devbench-profile.sh" "$B" "$P" "$RES" "$workers"
}

# wrap NAME...: wrappers in $W that run the bundle's NAMEs on its libraries, which the client
# (python3) must not get.
W="$B/wrapped"
wrap() {
  local b
  mkdir -p "$W"
  for b in "$@"; do
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$B/lib" "$B/bin/$b" > "$W/$b"; chmod +x "$W/$b"
  done
}

for s in $SECTIONS; do
  case "$s" in
    proxy) section proxy 200 --workers "${DEVICE_WORKERS:-1,2,4,8}" --rounds "${DEVICE_ROUNDS:-3}" --seconds 3 --sections proxy ;;
    proxy-c32) section proxy-c32 60 --workers 1 --rounds "${DEVICE_ROUNDS:-3}" --seconds 3 --sections proxy --conns 32 ;;
    tls)
      cert=()
      tls_cert && cert=(--cert "$TLS_PREFIX")
      section tls 70 --workers 1,4 --rounds 1 --seconds 3 --sections tls ${cert[@]+"${cert[@]}"} ;;
    stepup) section stepup 150 --workers 1,4 --sections stepup ;;
    scaling)
      wrap txgate nginx redis-server
      # 2 s a store, three codes a user: 8,000 users allow 12,000 cycles/s, 16,000 allow 24,000.
      for n in 1 4; do
        limited "scaling-w$n" 120 env PATH="$W:$PATH" TXGATE_BIN="$W/txgate" BENCH_BACKEND=nginx \
          BENCH_WORKERS="$n" BENCH_GATEWAY_CORES="0-$((n - 1))" BENCH_CLIENT_CORES=4-11 BENCH_SERVICE_CORES=12-15 \
          BENCH_PROCS=12 BENCH_CONCURRENCY=96 BENCH_DURATION=2 BENCH_USERS=$((n == 1 ? 8000 : 16000)) \
          bash "$ROOT/bench/stepup.sh" --rounds 1
      done ;;
    store)
      if [ -f "$DIR/store-bench.xz" ]; then
        xz -dc "$DIR/store-bench.xz" > "$B/bin/store-bench" && chmod +x "$B/bin/store-bench"
        wrap redis-server store-bench
        limited store 60 env PATH="$W:$PATH" STORE_BENCH_BIN="$W/store-bench" STORE_CORES=0-3 REDIS_CORES=12 \
          bash "$ROOT/bench/store.sh" --rounds 3 --seconds 2 --workers 4 --concurrency 64
      else echo "[store] skipped: no $DIR/store-bench.xz (bench/device-prepare.sh writes it)"; fi ;;
    tls-same)
      if tls_cert; then
        for n in 1 4; do
          limited "tls-same-w$n" 60 env TLS_CERT="$TLS_PREFIX" TAG="-w$n" ROUNDS=3 bash "$ROOT/bench/devbench-profile.sh" "$B" - "$RES" "$n"
        done
      else echo "[tls-same] skipped: no certificate and no openssl"; fi ;;
    proxy-log)
      for c in 256 32; do
        limited "proxy-log-c$c" 60 env ACCESS_LOG=1 CONNS="$c" TAG="-w1-c$c" ROUNDS=3 bash "$ROOT/bench/devbench-profile.sh" "$B" - "$RES" 1
      done ;;
    tail-4|tail-4-pinned)
      perf_dir=-
      unpack_perf && perf_dir="$P"
      limited "$s" 90 env PINNED=$([ "$s" = tail-4-pinned ] && echo 1 || echo 0) TAG=-w4-tail ROUNDS=5 \
        bash "$ROOT/bench/devbench-profile.sh" "$B" "$perf_dir" "$RES" 4 ;;
    profile) profile profile 8 ;;
    profile-2) profile profile-2 2 TAG=-w2 ;;
    profile-tls)
      if tls_cert; then profile profile-tls 4 TLS_CERT="$TLS_PREFIX" TAG=-w4; else echo "[profile-tls] skipped: no certificate and no openssl"; fi ;;
    *) echo "device-run.sh: unknown section '$s' (scaling, store, proxy, proxy-c32, tls-same, proxy-log, tail-4, tail-4-pinned, stepup, profile, profile-tls, profile-2, tls)" >&2 ;;
  esac
  # After each section, so that a command stopped from outside still brings back what finished.
  tar czf "$OUT/results.tgz" -C "$RES" .
done

echo "all sections: $(( $(date +%s) - START )) s; results in $OUT/results.tgz"
for s in proxy proxy-c32 tls stepup; do
  [ -s "$RES/$s.txt" ] && { echo; echo "== $s"; grep -v '^{' "$RES/$s.txt"; }
done
[ -s "$RES/store.log" ] && { echo; echo "== store"; grep -v '^\[store\]' "$RES/store.log"; }
for f in "$RES"/scaling-w*.log; do
  [ -s "$f" ] && { echo; echo "== $(basename "$f" .log)"; sed -n '/^step-up cycles/,$p' "$f"; }
done
for f in "$RES"/compare*.txt; do
  [ -s "$f" ] && { echo; echo "== $(basename "$f" .txt)"; sed -n '/^$/,$p' "$f"; }
done
for f in "$RES"/*-dso.txt; do
  [ -f "$f" ] && { echo; echo "== profile $(basename "$f" -dso.txt), by library"; head -8 "$f"; }
done
for f in "$RES"/*-wrk.txt; do [ -f "$f" ] && echo "$(basename "$f" .txt): $(grep Requests/sec "$f")"; done
exit 0
